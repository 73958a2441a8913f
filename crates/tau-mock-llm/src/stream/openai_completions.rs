//! OpenAI Chat Completions streaming: `data:` lines of `chat.completion.chunk` objects (a role
//! chunk, content / `reasoning_content` / `tool_calls` deltas, a chunk with `finish_reason`,
//! the usage chunk when `stream_options.include_usage` asked for it), then `data: [DONE]`.

use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::{Value, json};

use super::{Encoder, Kind, Plan, Step, data_event};
use crate::reply::StopReason;

pub(crate) struct Completions {
    /// For each block, its position among the tool calls (the `index` of `tool_calls`).
    tool_index: Vec<usize>,
}

impl Completions {
    pub(crate) fn new(plan: &Plan) -> Self {
        let mut next = 0;
        let tool_index = plan
            .blocks
            .iter()
            .map(|b| {
                let index = next;
                if matches!(b.kind, Kind::ToolCall { .. }) {
                    next += 1;
                }
                index
            })
            .collect();
        Self { tool_index }
    }
}

pub(crate) fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Stop => "stop",
        StopReason::Length => "length",
        StopReason::ToolUse => "tool_calls",
    }
}

fn chunk(plan: &Plan, delta: Value, finish: Option<&str>) -> Bytes {
    let mut chunk = json!({
        "id": format!("chatcmpl-mock{:04}", plan.ctx.seq),
        "object": "chat.completion.chunk",
        "created": plan.ctx.created,
        "model": plan.ctx.model,
        "system_fingerprint": "fp_mock",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    });
    // With include_usage every chunk carries `usage`, null until the last one.
    if plan.ctx.include_usage {
        chunk["usage"] = Value::Null;
    }
    data_event(&chunk.to_string())
}

impl Encoder for Completions {
    fn error_event(&mut self, _plan: &Plan) -> Bytes {
        let error = json!({"error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error", "param": null, "code": null}});
        data_event(&error.to_string())
    }

    fn encode(&mut self, plan: &Plan, step: Step, out: &mut VecDeque<Bytes>) {
        match step {
            Step::Begin => {
                let content = if plan.has_text() {
                    json!("")
                } else {
                    Value::Null
                };
                let delta = json!({"role": "assistant", "content": content, "refusal": null});
                out.push_back(chunk(plan, delta, None));
            }
            Step::Start(b) => {
                if let Kind::ToolCall { id, name, .. } = &plan.blocks[b].kind {
                    let call = json!({
                        "index": self.tool_index[b],
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    });
                    out.push_back(chunk(plan, json!({"tool_calls": [call]}), None));
                }
            }
            Step::Delta(b, k) => {
                let piece = &plan.blocks[b].deltas[k];
                let delta = match &plan.blocks[b].kind {
                    Kind::Text => json!({"content": piece}),
                    Kind::Thinking { .. } => json!({"reasoning_content": piece}),
                    Kind::ToolCall { .. } => json!({"tool_calls": [{
                        "index": self.tool_index[b],
                        "function": {"arguments": piece},
                    }]}),
                    Kind::Redacted { .. } => return,
                };
                out.push_back(chunk(plan, delta, None));
            }
            Step::End(_) => {}
            Step::Finish => {
                out.push_back(chunk(plan, json!({}), Some(finish_reason(plan.stop))));
                if plan.ctx.include_usage {
                    let u = &plan.usage;
                    let prompt = u.input + u.cache_read;
                    let usage = json!({
                        "id": format!("chatcmpl-mock{:04}", plan.ctx.seq),
                        "object": "chat.completion.chunk",
                        "created": plan.ctx.created,
                        "model": plan.ctx.model,
                        "system_fingerprint": "fp_mock",
                        "choices": [],
                        "usage": {
                            "prompt_tokens": prompt,
                            "completion_tokens": u.output,
                            "total_tokens": prompt + u.output,
                            "prompt_tokens_details": {"cached_tokens": u.cache_read, "audio_tokens": 0},
                            "completion_tokens_details": {
                                "reasoning_tokens": plan.reasoning,
                                "audio_tokens": 0,
                                "accepted_prediction_tokens": 0,
                                "rejected_prediction_tokens": 0,
                            },
                        },
                    });
                    out.push_back(data_event(&usage.to_string()));
                }
                out.push_back(data_event("[DONE]"));
            }
        }
    }
}
