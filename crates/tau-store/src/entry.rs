//! The records of a session file: the header line and the entries after it, with pi's exact
//! key order when written and a lossless fallback for entries tau does not understand.

use super::fast::{Known, Name};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::sync::Arc;
use tau_protocol::AgentMessage;
use tau_protocol::UserContent;

/// The session file format version tau writes.
pub const CURRENT_VERSION: u32 = 3;

/// Line 1 of a session file.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionHeader {
    pub version: u32,
    pub id: String,
    pub timestamp: String,
    pub cwd: String,
    pub parent_session: Option<String>,
    /// Fields tau does not know, written back after the known ones.
    pub extra: Map<String, Value>,
}

impl SessionHeader {
    /// Reads a header from a parsed line; `None` when the line is not a header
    /// (`type` other than `session`, or no string `id`). A missing version means 1.
    pub fn from_map(mut map: Map<String, Value>) -> Option<Self> {
        if map.get("type").and_then(Value::as_str) != Some("session") {
            return None;
        }
        let id = match map.get("id") {
            Some(Value::String(id)) => id.clone(),
            _ => return None,
        };
        map.shift_remove("type");
        map.shift_remove("id");
        let version = match map.shift_remove("version") {
            Some(v) => u32::try_from(v.as_u64().unwrap_or(1)).unwrap_or(u32::MAX),
            None => 1,
        };
        let timestamp = take_string(&mut map, "timestamp").unwrap_or_default();
        let cwd = take_string(&mut map, "cwd").unwrap_or_default();
        let parent_session = take_string(&mut map, "parentSession");
        Some(Self {
            version,
            id,
            timestamp,
            cwd,
            parent_session,
            extra: map,
        })
    }
}

fn take_string(map: &mut Map<String, Value>, key: &str) -> Option<String> {
    match map.shift_remove(key) {
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            // Not ours to judge: keep the odd value so it is written back unchanged.
            map.insert(key.to_owned(), other);
            None
        }
        None => None,
    }
}

impl Serialize for SessionHeader {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", "session")?;
        map.serialize_entry("version", &self.version)?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("timestamp", &self.timestamp)?;
        map.serialize_entry("cwd", &self.cwd)?;
        if let Some(parent) = &self.parent_session {
            map.serialize_entry("parentSession", parent)?;
        }
        for (k, v) in &self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// One entry of a session file: a node of the session tree.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEntry {
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
    pub kind: EntryKind,
    /// Entry-level fields tau does not know, written back after the known ones.
    pub extra: Map<String, Value>,
}

/// What an entry records. Field names follow pi's JSON keys in camelCase.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryKind {
    /// The message is shared with the conversation's context (`SessionContext::messages`):
    /// a long session's messages are most of its memory, and the context holds every one of
    /// them too. `Arc` rather than a context borrowing from the store because the two live
    /// behind different locks and the context outlives branch moves; messages are never
    /// changed after they are stored, so sharing them is only a pointer copy.
    Message {
        message: Arc<AgentMessage>,
    },
    ThinkingLevelChange {
        thinking_level: String,
    },
    ModelChange {
        provider: String,
        model_id: String,
    },
    Compaction {
        summary: String,
        first_kept_entry_id: String,
        tokens_before: u64,
        details: Option<Value>,
        from_hook: Option<bool>,
    },
    BranchSummary {
        from_id: String,
        summary: String,
        details: Option<Value>,
        from_hook: Option<bool>,
    },
    Custom {
        custom_type: String,
        data: Option<Value>,
    },
    CustomMessage {
        custom_type: String,
        content: UserContent,
        display: bool,
        details: Option<Value>,
    },
    Label {
        target_id: String,
        label: Option<String>,
    },
    SessionInfo {
        name: Option<String>,
    },
    /// An entry of a type tau does not know, or a known type whose fields did not parse:
    /// the whole original object, kept so it is written back unchanged.
    Unknown(Map<String, Value>),
}

impl EntryKind {
    /// The JSON `type` of the entry.
    pub fn type_name(&self) -> &str {
        match self {
            EntryKind::Message { .. } => "message",
            EntryKind::ThinkingLevelChange { .. } => "thinking_level_change",
            EntryKind::ModelChange { .. } => "model_change",
            EntryKind::Compaction { .. } => "compaction",
            EntryKind::BranchSummary { .. } => "branch_summary",
            EntryKind::Custom { .. } => "custom",
            EntryKind::CustomMessage { .. } => "custom_message",
            EntryKind::Label { .. } => "label",
            EntryKind::SessionInfo { .. } => "session_info",
            EntryKind::Unknown(map) => map.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }
}

impl SessionEntry {
    /// The JSON `type` of the entry.
    pub fn type_name(&self) -> &str {
        self.kind.type_name()
    }

    /// The message of a `message` entry.
    pub fn message(&self) -> Option<&AgentMessage> {
        match &self.kind {
            EntryKind::Message { message } => Some(message),
            _ => None,
        }
    }

    /// The entry as one JSON line without the trailing newline.
    pub fn to_line(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

impl Serialize for SessionEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let EntryKind::Unknown(raw) = &self.kind {
            // The original object, except that the tree links are ours: a fork re-chains them.
            let mut wrote_parent = false;
            for (k, v) in raw {
                match k.as_str() {
                    "parentId" => {
                        map.serialize_entry(k, &self.parent_id)?;
                        wrote_parent = true;
                    }
                    "id" => map.serialize_entry(k, &self.id)?,
                    _ => map.serialize_entry(k, v)?,
                }
            }
            if !wrote_parent && self.parent_id.is_some() {
                map.serialize_entry("parentId", &self.parent_id)?;
            }
            return map.end();
        }
        map.serialize_entry("type", self.type_name())?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("parentId", &self.parent_id)?;
        map.serialize_entry("timestamp", &self.timestamp)?;
        match &self.kind {
            EntryKind::Message { message } => map.serialize_entry("message", &**message)?,
            EntryKind::ThinkingLevelChange { thinking_level } => {
                map.serialize_entry("thinkingLevel", thinking_level)?;
            }
            EntryKind::ModelChange { provider, model_id } => {
                map.serialize_entry("provider", provider)?;
                map.serialize_entry("modelId", model_id)?;
            }
            EntryKind::Compaction {
                summary,
                first_kept_entry_id,
                tokens_before,
                details,
                from_hook,
            } => {
                map.serialize_entry("summary", summary)?;
                map.serialize_entry("firstKeptEntryId", first_kept_entry_id)?;
                map.serialize_entry("tokensBefore", tokens_before)?;
                if let Some(details) = details {
                    map.serialize_entry("details", details)?;
                }
                if let Some(from_hook) = from_hook {
                    map.serialize_entry("fromHook", from_hook)?;
                }
            }
            EntryKind::BranchSummary {
                from_id,
                summary,
                details,
                from_hook,
            } => {
                map.serialize_entry("fromId", from_id)?;
                map.serialize_entry("summary", summary)?;
                if let Some(details) = details {
                    map.serialize_entry("details", details)?;
                }
                if let Some(from_hook) = from_hook {
                    map.serialize_entry("fromHook", from_hook)?;
                }
            }
            EntryKind::Custom { custom_type, data } => {
                map.serialize_entry("customType", custom_type)?;
                if let Some(data) = data {
                    map.serialize_entry("data", data)?;
                }
            }
            EntryKind::CustomMessage {
                custom_type,
                content,
                display,
                details,
            } => {
                map.serialize_entry("customType", custom_type)?;
                map.serialize_entry("content", content)?;
                map.serialize_entry("display", display)?;
                if let Some(details) = details {
                    map.serialize_entry("details", details)?;
                }
            }
            EntryKind::Label { target_id, label } => {
                map.serialize_entry("targetId", target_id)?;
                if let Some(label) = label {
                    map.serialize_entry("label", label)?;
                }
            }
            EntryKind::SessionInfo { name } => {
                if let Some(name) = name {
                    map.serialize_entry("name", name)?;
                }
            }
            EntryKind::Unknown(_) => {}
        }
        for (k, v) in &self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

const ENTRY_TYPES: &[&str] = &[
    "message",
    "thinking_level_change",
    "model_change",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "session_info",
];

/// Keys of an entry line, told apart without allocating for the known ones.
enum Key {
    Type,
    Id,
    ParentId,
    Timestamp,
    Message,
    Other(String),
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an entry key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "type" => Key::Type,
                    "id" => Key::Id,
                    "parentId" => Key::ParentId,
                    "timestamp" => Key::Timestamp,
                    "message" => Key::Message,
                    other => Key::Other(other.to_owned()),
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for SessionEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(EntryVisitor)
    }
}

struct EntryVisitor;

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = SessionEntry;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a session entry object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SessionEntry, A::Error> {
        let mut entry_type: Option<Name> = None;
        let mut id: Option<String> = None;
        let mut parent_id: Option<String> = None;
        let mut timestamp: Option<String> = None;
        let mut message: Option<AgentMessage> = None;
        let mut rest = Map::new();
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Type => entry_type = Some(map.next_value_seed(Known(ENTRY_TYPES))?),
                Key::Id => id = Some(map.next_value()?),
                Key::ParentId => parent_id = map.next_value()?,
                Key::Timestamp => timestamp = Some(map.next_value()?),
                Key::Message => message = Some(map.next_value_seed(super::fast::MessageSeed)?),
                Key::Other(k) => {
                    let v = map.next_value::<Value>()?;
                    rest.insert(k, v);
                }
            }
        }
        let entry_type = entry_type.ok_or_else(|| de::Error::missing_field("type"))?;
        let id = id.ok_or_else(|| de::Error::missing_field("id"))?;
        let timestamp = timestamp.ok_or_else(|| de::Error::missing_field("timestamp"))?;
        let kind =
            build_kind(entry_type.as_str(), message, &mut rest).map_err(de::Error::custom)?;
        Ok(SessionEntry {
            id,
            parent_id,
            timestamp,
            kind,
            extra: rest,
        })
    }
}

/// Takes the kind's fields out of `rest`; whatever is left stays there as extras.
fn build_kind(
    entry_type: &str,
    message: Option<AgentMessage>,
    rest: &mut Map<String, Value>,
) -> Result<EntryKind, String> {
    fn req<T: serde::de::DeserializeOwned>(
        rest: &mut Map<String, Value>,
        key: &str,
    ) -> Result<T, String> {
        let v = rest
            .shift_remove(key)
            .ok_or_else(|| format!("missing field `{key}`"))?;
        serde_json::from_value(v).map_err(|e| format!("field `{key}`: {e}"))
    }
    fn opt<T: serde::de::DeserializeOwned>(
        rest: &mut Map<String, Value>,
        key: &str,
    ) -> Result<Option<T>, String> {
        match rest.shift_remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => serde_json::from_value(v)
                .map(Some)
                .map_err(|e| format!("field `{key}`: {e}")),
        }
    }
    Ok(match entry_type {
        "message" => EntryKind::Message {
            message: Arc::new(message.ok_or("missing field `message`")?),
        },
        _ if message.is_some() => return Err(format!("unexpected `message` in {entry_type}")),
        "thinking_level_change" => EntryKind::ThinkingLevelChange {
            thinking_level: req(rest, "thinkingLevel")?,
        },
        "model_change" => EntryKind::ModelChange {
            provider: req(rest, "provider")?,
            model_id: req(rest, "modelId")?,
        },
        "compaction" => EntryKind::Compaction {
            summary: req(rest, "summary")?,
            first_kept_entry_id: req(rest, "firstKeptEntryId")?,
            tokens_before: req(rest, "tokensBefore")?,
            details: opt(rest, "details")?,
            from_hook: opt(rest, "fromHook")?,
        },
        "branch_summary" => EntryKind::BranchSummary {
            from_id: req(rest, "fromId")?,
            summary: req(rest, "summary")?,
            details: opt(rest, "details")?,
            from_hook: opt(rest, "fromHook")?,
        },
        "custom" => EntryKind::Custom {
            custom_type: req(rest, "customType")?,
            data: opt(rest, "data")?,
        },
        "custom_message" => EntryKind::CustomMessage {
            custom_type: req(rest, "customType")?,
            content: req(rest, "content")?,
            display: req(rest, "display")?,
            details: opt(rest, "details")?,
        },
        "label" => EntryKind::Label {
            target_id: req(rest, "targetId")?,
            label: opt(rest, "label")?,
        },
        "session_info" => EntryKind::SessionInfo {
            name: opt(rest, "name")?,
        },
        other => return Err(format!("unknown entry type `{other}`")),
    })
}
