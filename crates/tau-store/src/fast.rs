//! Deserialisers for the messages of a session file that avoid serde's buffering of tagged
//! and untagged enums. Loading a long session is dominated by parsing its messages, and
//! buffering copies every string once more. They rely on pi and tau writing the tag (`role`,
//! `type`) as the first key; when it is not, they fall back to the derived impls.

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;
use tau_protocol::{
    AgentMessage, BashExecutionMessage, BranchSummaryMessage, CompactionSummaryMessage,
    CustomMessage,
};
use tau_protocol::{
    AssistantContent, AssistantMessage, ImageContent, StopReason, TextContent, ThinkingContent,
    ToolCall, ToolResultMessage, Usage, UserContent, UserContentBlock, UserMessage,
};

/// Reads the rest of a map whose first key was not the tag into a JSON object, then lets the
/// derived impl decide.
fn gather<'de, A: MapAccess<'de>, T: de::DeserializeOwned>(
    first: String,
    mut map: A,
) -> Result<T, A::Error> {
    let mut object = Map::new();
    object.insert(first, map.next_value::<Value>()?);
    while let Some((k, v)) = map.next_entry::<String, Value>()? {
        object.insert(k, v);
    }
    T::deserialize(Value::Object(object)).map_err(de::Error::custom)
}

/// An [`AgentMessage`].
pub(crate) struct MessageSeed;

impl<'de> DeserializeSeed<'de> for MessageSeed {
    type Value = AgentMessage;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<AgentMessage, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MessageSeed {
    type Value = AgentMessage;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a message object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AgentMessage, A::Error> {
        if let Err(first) = first_key_is(&mut map, ROLE)? {
            return gather(first, map);
        }
        let role = map.next_value_seed(Known(ROLES))?;
        Ok(match role.as_str() {
            "user" => AgentMessage::User(UserVisitor.visit_map(map)?),
            "assistant" => AgentMessage::Assistant(AssistantVisitor.visit_map(map)?),
            "toolResult" => AgentMessage::ToolResult(ToolResultVisitor.visit_map(map)?),
            // Rare roles: the derived struct impls read the rest of the map unbuffered.
            "bashExecution" => AgentMessage::BashExecution(BashExecutionMessage::deserialize(
                MapAccessDeserializer::new(map),
            )?),
            "custom" => {
                AgentMessage::Custom(CustomMessage::deserialize(MapAccessDeserializer::new(map))?)
            }
            "compactionSummary" => AgentMessage::CompactionSummary(
                CompactionSummaryMessage::deserialize(MapAccessDeserializer::new(map))?,
            ),
            "branchSummary" => AgentMessage::BranchSummary(BranchSummaryMessage::deserialize(
                MapAccessDeserializer::new(map),
            )?),
            other => return Err(de::Error::unknown_variant(other, ROLES)),
        })
    }
}

fn required<T, E: de::Error>(value: Option<T>, field: &'static str) -> Result<T, E> {
    value.ok_or_else(|| de::Error::missing_field(field))
}

/// The fields of a user message after `role`.
struct UserVisitor;

impl<'de> Visitor<'de> for UserVisitor {
    type Value = UserMessage;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a user message")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UserMessage, A::Error> {
        let mut content = None;
        let mut timestamp = None;
        let mut attachments = None;
        while let Some(key) = map.next_key_seed(Known(USER_FIELDS))? {
            match key.as_str() {
                "content" => content = Some(map.next_value_seed(UserContentSeed)?),
                "timestamp" => timestamp = Some(map.next_value()?),
                "attachments" => attachments = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(UserMessage {
            content: required(content, "content")?,
            timestamp: required(timestamp, "timestamp")?,
            attachments,
        })
    }
}

/// The fields of an assistant message after `role`.
struct AssistantVisitor;

impl<'de> Visitor<'de> for AssistantVisitor {
    type Value = AssistantMessage;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an assistant message")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AssistantMessage, A::Error> {
        let mut content = None;
        let mut api = None;
        let mut provider = None;
        let mut model = None;
        let mut usage: Option<Usage> = None;
        let mut stop_reason: Option<StopReason> = None;
        let mut timestamp = None;
        let mut response_id = None;
        let mut response_model = None;
        let mut diagnostics = None;
        let mut error_message = None;
        while let Some(key) = map.next_key_seed(Known(ASSISTANT_FIELDS))? {
            match key.as_str() {
                "content" => content = Some(map.next_value_seed(SeqOf(AssistantBlockSeed))?),
                "api" => api = Some(map.next_value()?),
                "provider" => provider = Some(map.next_value()?),
                "model" => model = Some(map.next_value()?),
                "usage" => usage = Some(map.next_value()?),
                "stopReason" => stop_reason = Some(map.next_value()?),
                "timestamp" => timestamp = Some(map.next_value()?),
                "responseId" => response_id = map.next_value()?,
                "responseModel" => response_model = map.next_value()?,
                "diagnostics" => diagnostics = map.next_value()?,
                "errorMessage" => error_message = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(AssistantMessage {
            content: required(content, "content")?,
            api: required(api, "api")?,
            provider: required(provider, "provider")?,
            model: required(model, "model")?,
            usage: required(usage, "usage")?,
            stop_reason: required(stop_reason, "stopReason")?,
            timestamp: required(timestamp, "timestamp")?,
            response_id,
            response_model,
            diagnostics,
            error_message,
            retry_after_ms: None,
        })
    }
}

/// The fields of a tool result after `role`.
struct ToolResultVisitor;

impl<'de> Visitor<'de> for ToolResultVisitor {
    type Value = ToolResultMessage;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a tool result message")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolResultMessage, A::Error> {
        let mut tool_call_id = None;
        let mut tool_name = None;
        let mut content = None;
        let mut details = None;
        let mut is_error = None;
        let mut timestamp = None;
        while let Some(key) = map.next_key_seed(Known(TOOL_RESULT_FIELDS))? {
            match key.as_str() {
                "toolCallId" => tool_call_id = Some(map.next_value()?),
                "toolName" => tool_name = Some(map.next_value()?),
                "content" => content = Some(map.next_value_seed(SeqOf(UserBlockSeed))?),
                "details" => details = map.next_value()?,
                "isError" => is_error = Some(map.next_value()?),
                "timestamp" => timestamp = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(ToolResultMessage {
            tool_call_id: required(tool_call_id, "toolCallId")?,
            tool_name: required(tool_name, "toolName")?,
            content: required(content, "content")?,
            details,
            is_error: required(is_error, "isError")?,
            timestamp: required(timestamp, "timestamp")?,
        })
    }
}

/// A key or tag matched against the names a visitor knows, without allocating for them.
#[derive(Clone, Copy)]
pub(crate) struct Known(pub(crate) &'static [&'static str]);

pub(crate) enum Name {
    Known(&'static str),
    Other(String),
}

impl Name {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Name::Known(name) => name,
            Name::Other(name) => name,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Known {
    type Value = Name;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Name, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for Known {
    type Value = Name;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Name, E> {
        Ok(match self.0.iter().find(|k| **k == v) {
            Some(k) => Name::Known(k),
            None => Name::Other(v.to_owned()),
        })
    }
}

const ROLE: &[&str] = &["role"];
const TYPE: &[&str] = &["type"];
const USER_FIELDS: &[&str] = &["content", "timestamp", "attachments"];
const ASSISTANT_FIELDS: &[&str] = &[
    "content",
    "api",
    "provider",
    "model",
    "usage",
    "stopReason",
    "timestamp",
    "responseId",
    "responseModel",
    "diagnostics",
    "errorMessage",
];
const TOOL_RESULT_FIELDS: &[&str] = &[
    "toolCallId",
    "toolName",
    "content",
    "details",
    "isError",
    "timestamp",
];
const ROLES: &[&str] = &[
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "custom",
    "compactionSummary",
    "branchSummary",
];
const USER_BLOCKS: &[&str] = &["text", "image"];
const ASSISTANT_BLOCKS: &[&str] = &["text", "thinking", "toolCall"];

/// Reads the first key of a map; `Err` carries it when it is not `tag`.
fn first_key_is<'de, A: MapAccess<'de>>(
    map: &mut A,
    tag: &'static [&'static str],
) -> Result<Result<(), String>, A::Error> {
    match map.next_key_seed(Known(tag))? {
        Some(Name::Known(_)) => Ok(Ok(())),
        Some(Name::Other(first)) => Ok(Err(first)),
        None => Err(de::Error::missing_field(
            tag.first().copied().unwrap_or("tag"),
        )),
    }
}

/// A JSON array read element by element with a seed.
struct SeqOf<S>(S);

impl<'de, S: DeserializeSeed<'de> + Copy> DeserializeSeed<'de> for SeqOf<S> {
    type Value = Vec<S::Value>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, S: DeserializeSeed<'de> + Copy> Visitor<'de> for SeqOf<S> {
    type Value = Vec<S::Value>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(2));
        while let Some(item) = seq.next_element_seed(self.0)? {
            out.push(item);
        }
        Ok(out)
    }
}

/// User content: a plain string or an array of blocks.
#[derive(Clone, Copy)]
struct UserContentSeed;

impl<'de> DeserializeSeed<'de> for UserContentSeed {
    type Value = UserContent;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<UserContent, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UserContentSeed {
    type Value = UserContent;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or an array of content blocks")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<UserContent, E> {
        Ok(UserContent::Text(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<UserContent, E> {
        Ok(UserContent::Text(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<UserContent, A::Error> {
        SeqOf(UserBlockSeed).visit_seq(seq).map(UserContent::Blocks)
    }
}

/// A text or image block.
#[derive(Clone, Copy)]
struct UserBlockSeed;

impl<'de> DeserializeSeed<'de> for UserBlockSeed {
    type Value = UserContentBlock;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<UserContentBlock, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for UserBlockSeed {
    type Value = UserContentBlock;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a content block")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UserContentBlock, A::Error> {
        if let Err(first) = first_key_is(&mut map, TYPE)? {
            return gather(first, map);
        }
        let kind = map.next_value_seed(Known(USER_BLOCKS))?;
        let rest = MapAccessDeserializer::new(map);
        match kind.as_str() {
            "text" => TextContent::deserialize(rest).map(UserContentBlock::Text),
            "image" => ImageContent::deserialize(rest).map(UserContentBlock::Image),
            other => Err(de::Error::unknown_variant(other, USER_BLOCKS)),
        }
    }
}

/// A text, thinking or tool-call block.
#[derive(Clone, Copy)]
struct AssistantBlockSeed;

impl<'de> DeserializeSeed<'de> for AssistantBlockSeed {
    type Value = AssistantContent;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<AssistantContent, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for AssistantBlockSeed {
    type Value = AssistantContent;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a content block")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AssistantContent, A::Error> {
        if let Err(first) = first_key_is(&mut map, TYPE)? {
            return gather(first, map);
        }
        let kind = map.next_value_seed(Known(ASSISTANT_BLOCKS))?;
        let rest = MapAccessDeserializer::new(map);
        match kind.as_str() {
            "text" => TextContent::deserialize(rest).map(AssistantContent::Text),
            "thinking" => ThinkingContent::deserialize(rest).map(AssistantContent::Thinking),
            "toolCall" => ToolCall::deserialize(rest).map(AssistantContent::ToolCall),
            other => Err(de::Error::unknown_variant(other, ASSISTANT_BLOCKS)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The fast path must agree with the derived impls on everything pi writes.
    fn same(json: &str) {
        let derived: AgentMessage = serde_json::from_str(json).unwrap();
        let mut de = serde_json::Deserializer::from_str(json);
        let fast = MessageSeed.deserialize(&mut de).unwrap();
        assert_eq!(fast, derived, "{json}");
    }

    #[test]
    fn fast_path_matches_derived() {
        same(r#"{"role":"user","content":"plain","timestamp":1}"#);
        same(
            r#"{"role":"user","content":[{"type":"text","text":"a\nb"},{"type":"image","data":"AA==","mimeType":"image/png"}],"timestamp":1,"attachments":[]}"#,
        );
        same(
            r#"{"role":"assistant","content":[{"type":"thinking","thinking":"t","thinkingSignature":"s"},{"type":"text","text":"x","textSignature":"q"},{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}}],"api":"a","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"cost":{"input":0.1,"output":0.2,"cacheRead":0,"cacheWrite":0,"total":0.3}},"stopReason":"toolUse","timestamp":2,"responseId":"r","errorMessage":"e","futureField":1}"#,
        );
        same(
            r#"{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"out"}],"details":{"x":1},"isError":false,"timestamp":3}"#,
        );
        same(
            r#"{"role":"bashExecution","command":"ls","output":"o","exitCode":0,"cancelled":false,"truncated":false,"timestamp":4}"#,
        );
        same(
            r#"{"role":"custom","customType":"k","content":"c","display":true,"details":null,"timestamp":5}"#,
        );
        // Tag not first: the fallback path.
        same(r#"{"content":"late tag","role":"user","timestamp":6}"#);
        same(r#"{"role":"user","content":[{"text":"late","type":"text"}],"timestamp":7}"#);
    }

    #[test]
    fn fast_path_rejects_what_derived_rejects() {
        for json in [
            r#"{"role":"assistant","content":[{"type":"video"}],"api":"a","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}"#,
            r#"{"role":"user","timestamp":1}"#,
            r#"{"role":"robot","content":"x","timestamp":1}"#,
        ] {
            assert!(serde_json::from_str::<AgentMessage>(json).is_err());
            let mut de = serde_json::Deserializer::from_str(json);
            assert!(MessageSeed.deserialize(&mut de).is_err(), "{json}");
        }
    }
}
