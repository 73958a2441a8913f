//! Writes `message_update` records. pi 0.79's shape carries the whole message so far twice
//! per delta (`assistantMessageEvent.partial` and `message`), so the output grows
//! quadratically by contract; what must not grow quadratically is the work per byte. The
//! renderer keeps each content block of the streaming message already serialised and appends
//! each escaped delta to it, so writing an update is a copy of cached bytes, not a
//! re-serialisation of the message.
//!
//! pi 1.x's lean shape (`{type, usage, assistantMessageEvent}` without snapshots) is written
//! when the host asks for it at startup.

use std::io::{self, Write};

use serde::Serialize;
use tau_ai::provider::parse_arguments;
use tau_protocol::{AssistantContent, AssistantMessage, AssistantMessageEvent};

/// Which `message_update` shape the host wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpdateShape {
    /// Document 004: `{type, assistantMessageEvent (with partial), message}`.
    #[default]
    Full,
    /// pi 1.x: `{type, usage, assistantMessageEvent}` without snapshots.
    Lean,
}

/// One content block, kept serialised.
#[derive(Debug)]
struct Block {
    /// The block's JSON. For a text or thinking block that is still growing, the JSON up to
    /// the end of the escaped text (the closing `"` and `}` are written separately).
    json: Vec<u8>,
    /// `true` while `json` is open (deltas can be appended).
    open: bool,
    /// Raw argument JSON of a tool call, re-parsed when it grows.
    raw_args: String,
}

/// The streaming assistant message, for building snapshots.
#[derive(Debug)]
struct Streaming {
    message: AssistantMessage,
    blocks: Vec<Block>,
    /// `],"api":…}`: everything after the content array.
    tail: Vec<u8>,
}

/// Renders `message_update` lines for one writer.
#[derive(Debug, Default)]
pub struct SnapshotRenderer {
    shape: UpdateShape,
    current: Option<Streaming>,
    /// Lean shape: the last `usage` written and its JSON, reused while it does not change
    /// (it changes a few times per message, the events thousands of times).
    lean_usage: Option<(tau_protocol::Usage, Vec<u8>)>,
}

const HEAD: &[u8] = br#"{"role":"assistant","content":["#;

fn to_vec<T: Serialize>(value: &T) -> io::Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(io::Error::other)
}

/// The JSON of `message` after its `content` array: `],"api":…}`.
fn tail_of(message: &AssistantMessage) -> io::Result<Vec<u8>> {
    let mut without_content = message.clone();
    without_content.content = Vec::new();
    let full = to_vec(&without_content)?;
    // `{"role":"assistant","content":[],…}` → `],…}`
    let split = HEAD.len();
    if full.len() < split || &full[..split] != HEAD {
        return Err(io::Error::other("unexpected assistant message layout"));
    }
    Ok(full[split..].to_vec())
}

/// Appends `text` JSON-escaped (without quotes).
fn push_escaped(out: &mut Vec<u8>, text: &str) -> io::Result<()> {
    let quoted = to_vec(&text)?;
    out.extend_from_slice(&quoted[1..quoted.len() - 1]);
    Ok(())
}

impl SnapshotRenderer {
    pub fn new(shape: UpdateShape) -> Self {
        Self {
            shape,
            current: None,
            lean_usage: None,
        }
    }

    /// A new assistant message starts streaming.
    pub fn start(&mut self, message: &AssistantMessage) -> io::Result<()> {
        if self.shape == UpdateShape::Lean {
            return Ok(());
        }
        let mut blocks = Vec::with_capacity(message.content.len());
        for block in &message.content {
            blocks.push(Block {
                json: to_vec(block)?,
                open: false,
                raw_args: String::new(),
            });
        }
        self.current = Some(Streaming {
            message: message.clone(),
            blocks,
            tail: tail_of(message)?,
        });
        Ok(())
    }

    /// The streaming message ended.
    pub fn end(&mut self) {
        self.current = None;
    }

    /// Writes one `message_update` record (without the newline).
    pub fn write_update(
        &mut self,
        out: &mut impl Write,
        usage: Option<&tau_protocol::Usage>,
        event: &AssistantMessageEvent,
    ) -> io::Result<()> {
        if self.shape == UpdateShape::Lean {
            out.write_all(br#"{"type":"message_update","usage":"#)?;
            let usage = usage.cloned().unwrap_or_default();
            let cached = match &self.lean_usage {
                Some((known, json)) if *known == usage => json,
                _ => {
                    let json = to_vec(&usage)?;
                    &self.lean_usage.insert((usage, json)).1
                }
            };
            out.write_all(cached)?;
            out.write_all(br#","assistantMessageEvent":"#)?;
            if write_delta_open(out, event)? {
                return out.write_all(b"}}");
            }
            if has_partial(event) {
                serde_json::to_writer(&mut *out, &without_partial(event))
                    .map_err(io::Error::other)?;
            } else {
                serde_json::to_writer(&mut *out, event).map_err(io::Error::other)?;
            }
            return out.write_all(b"}");
        }
        let Some(streaming) = self.current.as_mut() else {
            // An update without a start: nothing to snapshot, write it as it is.
            out.write_all(br#"{"type":"message_update","assistantMessageEvent":"#)?;
            serde_json::to_writer(&mut *out, event).map_err(io::Error::other)?;
            return out.write_all(b"}");
        };
        streaming.apply(event)?;
        // The event itself, minus its closing brace, then `,"partial":SNAPSHOT}`. pi 0.79's
        // `toolcall_start` carries neither `id` nor `toolName` (the lean shape's additions).
        out.write_all(br#"{"type":"message_update","assistantMessageEvent":"#)?;
        if write_delta_open(out, event)? {
            out.write_all(br#","partial":"#)?;
            streaming.write_snapshot(out)?;
            out.write_all(br#"},"message":"#)?;
            streaming.write_snapshot(out)?;
            return out.write_all(b"}");
        }
        let event_json = match event {
            AssistantMessageEvent::ToolCallStart { content_index, .. } => {
                to_vec(&AssistantMessageEvent::ToolCallStart {
                    content_index: *content_index,
                    id: None,
                    tool_name: None,
                    partial: None,
                })?
            }
            // A producer that filled `partial` itself: the renderer's snapshot replaces it.
            _ if has_partial(event) => to_vec(&without_partial(event))?,
            _ => to_vec(event)?,
        };
        out.write_all(&event_json[..event_json.len() - 1])?;
        out.write_all(br#","partial":"#)?;
        streaming.write_snapshot(out)?;
        out.write_all(br#"},"message":"#)?;
        streaming.write_snapshot(out)?;
        out.write_all(b"}")
    }
}

/// Writes a text, thinking or tool-call delta without its closing brace and says whether it
/// did. Deltas are nearly every event of a stream; written by hand they skip serde's
/// per-key escaping, which was a tenth of the lean path's work. The key order is serde's.
fn write_delta_open(out: &mut impl Write, event: &AssistantMessageEvent) -> io::Result<bool> {
    use AssistantMessageEvent as E;
    let (head, content_index, delta): (&[u8], _, _) = match event {
        E::TextDelta {
            content_index,
            delta,
            ..
        } => (
            br#"{"type":"text_delta","contentIndex":"#,
            content_index,
            delta,
        ),
        E::ThinkingDelta {
            content_index,
            delta,
            ..
        } => (
            br#"{"type":"thinking_delta","contentIndex":"#,
            content_index,
            delta,
        ),
        E::ToolCallDelta {
            content_index,
            delta,
            ..
        } => (
            br#"{"type":"toolcall_delta","contentIndex":"#,
            content_index,
            delta,
        ),
        _ => return Ok(false),
    };
    out.write_all(head)?;
    match u8::try_from(*content_index) {
        // A message has a handful of blocks: one digit, without the formatting machinery.
        Ok(digit @ 0..=9) => out.write_all(&[b'0' + digit])?,
        _ => write!(out, "{content_index}")?,
    }
    out.write_all(br#","delta":"#)?;
    write_json_string(out, delta)?;
    Ok(true)
}

/// Writes `text` as a JSON string exactly as serde_json does. A delta seldom holds anything
/// to escape (serde_json escapes only `"`, `\` and control characters); then it goes out
/// as it is, without serde_json's escape loop over every byte.
fn write_json_string(out: &mut impl Write, text: &str) -> io::Result<()> {
    if text.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        return serde_json::to_writer(&mut *out, text).map_err(io::Error::other);
    }
    out.write_all(b"\"")?;
    out.write_all(text.as_bytes())?;
    out.write_all(b"\"")
}

fn has_partial(event: &AssistantMessageEvent) -> bool {
    use AssistantMessageEvent as E;
    matches!(
        event,
        E::TextStart {
            partial: Some(_),
            ..
        } | E::TextDelta {
            partial: Some(_),
            ..
        } | E::TextEnd {
            partial: Some(_),
            ..
        } | E::ThinkingStart {
            partial: Some(_),
            ..
        } | E::ThinkingDelta {
            partial: Some(_),
            ..
        } | E::ThinkingEnd {
            partial: Some(_),
            ..
        } | E::ToolCallDelta {
            partial: Some(_),
            ..
        } | E::ToolCallEnd {
            partial: Some(_),
            ..
        }
    )
}

fn without_partial(event: &AssistantMessageEvent) -> AssistantMessageEvent {
    use AssistantMessageEvent as E;
    let mut event = event.clone();
    match &mut event {
        E::TextStart { partial, .. }
        | E::TextDelta { partial, .. }
        | E::TextEnd { partial, .. }
        | E::ThinkingStart { partial, .. }
        | E::ThinkingDelta { partial, .. }
        | E::ThinkingEnd { partial, .. }
        | E::ToolCallStart { partial, .. }
        | E::ToolCallDelta { partial, .. }
        | E::ToolCallEnd { partial, .. } => *partial = None,
        E::Start { .. } | E::Done { .. } | E::Error { .. } => {}
    }
    event
}

impl Streaming {
    fn apply(&mut self, event: &AssistantMessageEvent) -> io::Result<()> {
        use AssistantMessageEvent as E;
        match event {
            E::TextStart { .. } => {
                self.open_block(AssistantContent::Text(tau_protocol::TextContent {
                    text: String::new(),
                    text_signature: None,
                }))
            }
            E::ThinkingStart { .. } => {
                self.open_block(AssistantContent::Thinking(tau_protocol::ThinkingContent {
                    thinking: String::new(),
                    thinking_signature: None,
                    redacted: None,
                }))
            }
            E::ToolCallStart { id, tool_name, .. } => {
                let block = AssistantContent::ToolCall(tau_protocol::ToolCall {
                    id: id.clone().unwrap_or_default(),
                    name: tool_name.clone().unwrap_or_default(),
                    arguments: serde_json::Map::new(),
                    thought_signature: None,
                });
                self.blocks.push(Block {
                    json: to_vec(&block)?,
                    open: false,
                    raw_args: String::new(),
                });
                self.message.content.push(block);
                Ok(())
            }
            E::TextDelta {
                content_index,
                delta,
                ..
            }
            | E::ThinkingDelta {
                content_index,
                delta,
                ..
            } => {
                if let Some(content) = self.message.content.get_mut(*content_index) {
                    match content {
                        AssistantContent::Text(t) => t.text.push_str(delta),
                        AssistantContent::Thinking(t) => t.thinking.push_str(delta),
                        AssistantContent::ToolCall(_) => {}
                    }
                }
                match self.blocks.get_mut(*content_index) {
                    Some(block) if block.open => push_escaped(&mut block.json, delta),
                    Some(_) => self.reserialize(*content_index),
                    None => Ok(()),
                }
            }
            E::ToolCallDelta {
                content_index,
                delta,
                ..
            } => {
                let Some(block) = self.blocks.get_mut(*content_index) else {
                    return Ok(());
                };
                block.raw_args.push_str(delta);
                if let Some(AssistantContent::ToolCall(call)) =
                    self.message.content.get_mut(*content_index)
                {
                    call.arguments = parse_arguments(&block.raw_args);
                }
                self.reserialize(*content_index)
            }
            E::TextEnd { content_index, .. } | E::ThinkingEnd { content_index, .. } => {
                self.reserialize(*content_index)
            }
            E::ToolCallEnd {
                content_index,
                tool_call,
                ..
            } => {
                if let Some(content) = self.message.content.get_mut(*content_index) {
                    *content = AssistantContent::ToolCall(tool_call.clone());
                }
                self.reserialize(*content_index)
            }
            E::Start { .. } | E::Done { .. } | E::Error { .. } => Ok(()),
        }
    }

    /// Adds an empty text or thinking block whose JSON stays open for appended deltas.
    fn open_block(&mut self, block: AssistantContent) -> io::Result<()> {
        let mut json = to_vec(&block)?;
        // `{"type":"text","text":""}` → `{"type":"text","text":"` (open string).
        let close = br#""}"#;
        if json.ends_with(close) {
            json.truncate(json.len() - close.len());
            self.blocks.push(Block {
                json,
                open: true,
                raw_args: String::new(),
            });
        } else {
            self.blocks.push(Block {
                json,
                open: false,
                raw_args: String::new(),
            });
        }
        self.message.content.push(block);
        Ok(())
    }

    fn reserialize(&mut self, index: usize) -> io::Result<()> {
        if let (Some(block), Some(content)) =
            (self.blocks.get_mut(index), self.message.content.get(index))
        {
            block.json = to_vec(content)?;
            block.open = false;
        }
        Ok(())
    }

    fn write_snapshot(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(HEAD)?;
        for (i, block) in self.blocks.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            out.write_all(&block.json)?;
            if block.open {
                out.write_all(br#""}"#)?;
            }
        }
        out.write_all(&self.tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tau_protocol::{StopReason, TextContent, ToolCall, Usage};

    #[test]
    fn hand_written_deltas_match_serde() {
        let delta = "a\"b\\c\n\u{1}\u{2028}é</script>".to_string();
        for event in [
            AssistantMessageEvent::TextDelta {
                content_index: 0,
                delta: delta.clone(),
                partial: None,
            },
            AssistantMessageEvent::ThinkingDelta {
                content_index: 12,
                delta: delta.clone(),
                partial: None,
            },
            AssistantMessageEvent::ToolCallDelta {
                content_index: 3,
                delta: delta.clone(),
                partial: None,
            },
        ] {
            let mut out = Vec::new();
            assert!(matches!(write_delta_open(&mut out, &event), Ok(true)));
            out.push(b'}');
            let by_serde = serde_json::to_vec(&event).unwrap_or_default();
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&by_serde)
            );
        }
        let mut out = Vec::new();
        let start = AssistantMessageEvent::TextStart {
            content_index: 0,
            partial: None,
        };
        assert!(matches!(write_delta_open(&mut out, &start), Ok(false)));
        assert!(out.is_empty());
    }

    proptest::proptest! {
        /// The hand-written delta, plain text written as it is included, is serde_json's
        /// byte for byte, whatever the text and the index.
        #[test]
        fn any_delta_matches_serde(
            delta in "[a0\"\\\\\u{1}\u{1f}\n\u{7f}\u{e9}\u{2028}</ ]{0,12}",
            content_index in 0usize..40,
        ) {
            let event = AssistantMessageEvent::TextDelta {
                content_index,
                delta,
                partial: None,
            };
            let mut out = Vec::new();
            proptest::prop_assert!(matches!(write_delta_open(&mut out, &event), Ok(true)));
            out.push(b'}');
            let by_serde = serde_json::to_vec(&event).unwrap_or_default();
            proptest::prop_assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&by_serde)
            );
        }
    }

    fn message() -> AssistantMessage {
        AssistantMessage {
            content: Vec::new(),
            api: "openai-completions".into(),
            provider: "mock".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            timestamp: 7,
            response_id: None,
            response_model: None,
            diagnostics: None,
            error_message: None,
            retry_after_ms: None,
        }
    }

    /// What the snapshot must equal: the message serialised from scratch.
    fn line(renderer: &mut SnapshotRenderer, event: AssistantMessageEvent) -> serde_json::Value {
        let mut out = Vec::new();
        renderer.write_update(&mut out, None, &event).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn snapshots_equal_full_serialisation_at_every_step() {
        let mut r = SnapshotRenderer::new(UpdateShape::Full);
        let mut expected = message();
        r.start(&expected).unwrap();
        let v = line(
            &mut r,
            AssistantMessageEvent::TextStart {
                content_index: 0,
                partial: None,
            },
        );
        expected.content.push(AssistantContent::Text(TextContent {
            text: String::new(),
            text_signature: None,
        }));
        assert_eq!(v["message"], serde_json::to_value(&expected).unwrap());
        for delta in ["Hel", "lo \"wo\u{2028}rld\"\n", "✓"] {
            let v = line(
                &mut r,
                AssistantMessageEvent::TextDelta {
                    content_index: 0,
                    delta: delta.into(),
                    partial: None,
                },
            );
            if let AssistantContent::Text(t) = &mut expected.content[0] {
                t.text.push_str(delta);
            }
            let want = serde_json::to_value(&expected).unwrap();
            assert_eq!(v["message"], want);
            assert_eq!(v["assistantMessageEvent"]["partial"], want);
            assert_eq!(v["assistantMessageEvent"]["delta"], delta);
        }
        let v = line(
            &mut r,
            AssistantMessageEvent::ToolCallStart {
                content_index: 1,
                id: Some("c1".into()),
                tool_name: Some("bash".into()),
                partial: None,
            },
        );
        assert_eq!(v["message"]["content"][1]["name"], "bash");
        let v = line(
            &mut r,
            AssistantMessageEvent::ToolCallDelta {
                content_index: 1,
                delta: r#"{"command":"l"#.into(),
                partial: None,
            },
        );
        assert_eq!(
            v["message"]["content"][1]["arguments"],
            serde_json::json!({"command": "l"})
        );
        let call = ToolCall {
            id: "c1".into(),
            name: "bash".into(),
            arguments: serde_json::json!({"command": "ls"})
                .as_object()
                .cloned()
                .unwrap(),
            thought_signature: None,
        };
        let v = line(
            &mut r,
            AssistantMessageEvent::ToolCallEnd {
                content_index: 1,
                tool_call: call,
                partial: None,
            },
        );
        assert_eq!(
            v["message"]["content"][1]["arguments"],
            serde_json::json!({"command": "ls"})
        );
        assert_eq!(
            v["message"]["content"][0]["text"],
            "Hello \"wo\u{2028}rld\"\n✓"
        );
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["type", "assistantMessageEvent", "message"]);
    }

    #[test]
    fn lean_updates_carry_no_snapshot() {
        let mut r = SnapshotRenderer::new(UpdateShape::Lean);
        r.start(&message()).unwrap();
        let v = line(
            &mut r,
            AssistantMessageEvent::TextDelta {
                content_index: 0,
                delta: "x".into(),
                partial: None,
            },
        );
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["type", "usage", "assistantMessageEvent"]);
        assert!(v["assistantMessageEvent"].get("partial").is_none());
    }
}
