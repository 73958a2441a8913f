//! Bedrock's Converse stream: `application/vnd.amazon.eventstream` messages (a prelude with
//! lengths and its CRC, typed headers, a JSON payload, the message CRC), one per event:
//! `messageStart`, per block `contentBlockStart` (tool uses only, as Bedrock sends it),
//! `contentBlockDelta`s (`text`, `reasoningContent.text`/`signature`, `toolUse.input`) and
//! `contentBlockStop`, then `messageStop` and `metadata` with the usage. Every payload carries
//! Bedrock's `p` padding field.

use std::collections::VecDeque;

use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::Bytes;
use serde_json::{Value, json};

use super::{Encoder, Kind, Plan, Step};
use crate::reply::StopReason;

#[derive(Default)]
pub(crate) struct Bedrock {
    /// Events sent, which sets the padding's length as Bedrock's varies.
    sent: usize,
}

pub(crate) fn stop_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Stop => "end_turn",
        StopReason::Length => "max_tokens",
        StopReason::ToolUse => "tool_use",
    }
}

const PADDING: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// One event-stream message; the headers are the three Bedrock sets on every event.
pub(crate) fn frame(message_type: &str, type_header: (&str, &str), payload: &Value) -> Bytes {
    let message = Message::new(payload.to_string().into_bytes())
        .add_header(Header::new(
            type_header.0.to_owned(),
            HeaderValue::String(type_header.1.to_owned().into()),
        ))
        .add_header(Header::new(
            ":content-type",
            HeaderValue::String("application/json".into()),
        ))
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String(message_type.to_owned().into()),
        ));
    let mut out = Vec::new();
    // Writing fails only for a header name over 255 bytes or a message over 4 GiB, neither
    // of which these fixed names and scripted replies make.
    if aws_smithy_eventstream::frame::write_message_to(&message, &mut out).is_err() {
        tracing::warn!("tau-mock-llm could not encode an event-stream message");
    }
    Bytes::from(out)
}

impl Bedrock {
    fn event(&mut self, out: &mut VecDeque<Bytes>, kind: &str, mut payload: Value) {
        let pad = PADDING
            .get(..(self.sent * 7) % PADDING.len() + 1)
            .unwrap_or("a");
        payload["p"] = json!(pad);
        self.sent += 1;
        out.push_back(frame("event", (":event-type", kind), &payload));
    }

    fn delta(&mut self, out: &mut VecDeque<Bytes>, b: usize, delta: Value) {
        self.event(
            out,
            "contentBlockDelta",
            json!({"contentBlockIndex": b, "delta": delta}),
        );
    }
}

impl Encoder for Bedrock {
    fn error_event(&mut self, _plan: &Plan) -> Bytes {
        frame(
            "exception",
            (":exception-type", "throttlingException"),
            &json!({"message": "Too many requests, please wait before trying again."}),
        )
    }

    fn encode(&mut self, plan: &Plan, step: Step, out: &mut VecDeque<Bytes>) {
        match step {
            Step::Begin => self.event(out, "messageStart", json!({"role": "assistant"})),
            Step::Start(b) => {
                if let Kind::ToolCall { id, name, .. } = &plan.blocks[b].kind {
                    self.event(
                        out,
                        "contentBlockStart",
                        json!({"contentBlockIndex": b,
                               "start": {"toolUse": {"toolUseId": id, "name": name}}}),
                    );
                }
            }
            Step::Delta(b, k) => {
                let block = &plan.blocks[b];
                let text = &block.deltas[k];
                let delta = match &block.kind {
                    Kind::Text => json!({"text": text}),
                    Kind::Thinking { .. } => json!({"reasoningContent": {"text": text}}),
                    Kind::ToolCall { .. } => json!({"toolUse": {"input": text}}),
                    Kind::Redacted { .. } => return,
                };
                self.delta(out, b, delta);
            }
            Step::End(b) => {
                let block = &plan.blocks[b];
                if let Kind::Thinking {
                    signature: Some(signature),
                } = &block.kind
                {
                    self.delta(
                        out,
                        b,
                        json!({"reasoningContent": {"signature": signature}}),
                    );
                }
                self.event(out, "contentBlockStop", json!({"contentBlockIndex": b}));
            }
            Step::Finish => {
                self.event(
                    out,
                    "messageStop",
                    json!({"stopReason": stop_reason(plan.stop)}),
                );
                let u = &plan.usage;
                let mut usage = json!({
                    "inputTokens": u.input,
                    "outputTokens": u.output,
                    "totalTokens": u.input + u.output + u.cache_read + u.cache_write,
                });
                // Bedrock reports the cache counts only when the prompt used the cache.
                if u.cache_read > 0 {
                    usage["cacheReadInputTokens"] = json!(u.cache_read);
                }
                if u.cache_write > 0 {
                    usage["cacheWriteInputTokens"] = json!(u.cache_write);
                }
                self.event(
                    out,
                    "metadata",
                    json!({"usage": usage, "metrics": {"latencyMs": 42}}),
                );
            }
        }
    }
}
