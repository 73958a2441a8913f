//! Anthropic Messages streaming: `message_start`, a `ping`, per block
//! `content_block_start`/`content_block_delta`/`content_block_stop`, then `message_delta`
//! and `message_stop`, each framed as `event: <type>` plus `data: <json>`.

use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::json;

use super::{Encoder, Kind, Plan, Step, named_event};
use crate::reply::StopReason;

pub(crate) struct Anthropic;

/// Anthropic's ping payload is spaced like this on the wire.
const PING: &str = "event: ping\ndata: {\"type\": \"ping\"}\n\n";

pub(crate) fn stop_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Stop => "end_turn",
        StopReason::Length => "max_tokens",
        StopReason::ToolUse => "tool_use",
    }
}

/// A stand-in signature for thinking blocks scripted without one: the real API signs every
/// thinking block, and clients replay the signature on the next turn.
fn placeholder_signature(seq: u64, index: usize) -> String {
    format!("bW9jay1zaWduYXR1cmU{seq}x{index}")
}

impl Encoder for Anthropic {
    fn error_event(&mut self, _plan: &Plan) -> Bytes {
        named_event(
            "error",
            &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )
    }

    fn encode(&mut self, plan: &Plan, step: Step, out: &mut VecDeque<Bytes>) {
        let usage = &plan.usage;
        match step {
            Step::Begin => {
                let message = json!({
                    "type": "message_start",
                    "message": {
                        "id": format!("msg_mock_{:04}", plan.ctx.seq),
                        "type": "message",
                        "role": "assistant",
                        "model": plan.ctx.model,
                        "content": [],
                        "stop_reason": null,
                        "stop_sequence": null,
                        "usage": {
                            "input_tokens": usage.input,
                            "cache_creation_input_tokens": usage.cache_write,
                            "cache_read_input_tokens": usage.cache_read,
                            "cache_creation": {
                                "ephemeral_5m_input_tokens":
                                    usage.cache_write.saturating_sub(usage.cache_write_1h),
                                "ephemeral_1h_input_tokens": usage.cache_write_1h,
                            },
                            "output_tokens": usage.output.min(1),
                        },
                    },
                });
                out.push_back(named_event("message_start", &message));
                out.push_back(Bytes::from_static(PING.as_bytes()));
            }
            Step::Start(b) => {
                let block = match &plan.blocks[b].kind {
                    Kind::Text => json!({"type": "text", "text": ""}),
                    Kind::Thinking { .. } => {
                        json!({"type": "thinking", "thinking": "", "signature": ""})
                    }
                    Kind::Redacted { data } => json!({"type": "redacted_thinking", "data": data}),
                    Kind::ToolCall { id, name, .. } => {
                        json!({"type": "tool_use", "id": id, "name": name, "input": {}})
                    }
                };
                let event =
                    json!({"type": "content_block_start", "index": b, "content_block": block});
                out.push_back(named_event("content_block_start", &event));
            }
            Step::Delta(b, k) => {
                let piece = &plan.blocks[b].deltas[k];
                let delta = match &plan.blocks[b].kind {
                    Kind::Text => json!({"type": "text_delta", "text": piece}),
                    Kind::Thinking { .. } => json!({"type": "thinking_delta", "thinking": piece}),
                    Kind::ToolCall { .. } => {
                        json!({"type": "input_json_delta", "partial_json": piece})
                    }
                    Kind::Redacted { .. } => return,
                };
                let event = json!({"type": "content_block_delta", "index": b, "delta": delta});
                out.push_back(named_event("content_block_delta", &event));
            }
            Step::End(b) => {
                if let Kind::Thinking { signature } = &plan.blocks[b].kind {
                    let signature = signature
                        .clone()
                        .unwrap_or_else(|| placeholder_signature(plan.ctx.seq, b));
                    let event = json!({
                        "type": "content_block_delta",
                        "index": b,
                        "delta": {"type": "signature_delta", "signature": signature},
                    });
                    out.push_back(named_event("content_block_delta", &event));
                }
                let event = json!({"type": "content_block_stop", "index": b});
                out.push_back(named_event("content_block_stop", &event));
            }
            Step::Finish => {
                let event = json!({
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason(plan.stop), "stop_sequence": null},
                    "usage": {
                        "input_tokens": usage.input,
                        "cache_creation_input_tokens": usage.cache_write,
                        "cache_read_input_tokens": usage.cache_read,
                        "output_tokens": usage.output,
                    },
                });
                out.push_back(named_event("message_delta", &event));
                out.push_back(named_event(
                    "message_stop",
                    &json!({"type": "message_stop"}),
                ));
            }
        }
    }
}
