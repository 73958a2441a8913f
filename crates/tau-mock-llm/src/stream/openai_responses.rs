//! OpenAI Responses streaming: semantic events framed as `event: <type>` plus
//! `data: {"type": <type>, …, "sequence_number": n}`. Each block becomes one output item
//! (reasoning with a summary part, message with an `output_text` part, or function call);
//! the stream ends with `response.completed`, or `response.incomplete` when the reply stops
//! for length, as the real API does.

use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::{Value, json};

use super::{Encoder, Kind, Plan, Step, named_event};
use crate::reply::StopReason;

#[derive(Default)]
pub(crate) struct Responses {
    sequence: u64,
    /// Every finished output item, for the final response object.
    done_items: Vec<Value>,
}

fn response_id(plan: &Plan) -> String {
    format!("resp_mock{:04}", plan.ctx.seq)
}

fn item_id(plan: &Plan, b: usize) -> String {
    let seq = plan.ctx.seq;
    match &plan.blocks[b].kind {
        Kind::Thinking { .. } => format!("rs_mock{seq:04}_{b}"),
        Kind::ToolCall { id, .. } => match id.split_once('|') {
            Some((_, item)) => item.to_owned(),
            None => format!("fc_mock{seq:04}_{b}"),
        },
        Kind::Text | Kind::Redacted { .. } => format!("msg_mock{seq:04}_{b}"),
    }
}

/// The `call_id` half of a tool call id written as `call_id|item_id`.
fn call_id(id: &str) -> &str {
    id.split_once('|').map_or(id, |(call, _)| call)
}

fn encrypted_content(plan: &Plan, b: usize, signature: Option<&String>) -> String {
    signature
        .cloned()
        .unwrap_or_else(|| format!("gAAAAABmock{:04}{b}", plan.ctx.seq))
}

fn response(plan: &Plan, status: &str, output: Value, usage: Value) -> Value {
    let incomplete = if status == "incomplete" {
        json!({"reason": "max_output_tokens"})
    } else {
        Value::Null
    };
    json!({
        "id": response_id(plan),
        "object": "response",
        "created_at": plan.ctx.created,
        "status": status,
        "error": null,
        "incomplete_details": incomplete,
        "instructions": null,
        "max_output_tokens": null,
        "model": plan.ctx.model,
        "output": output,
        "parallel_tool_calls": true,
        "previous_response_id": null,
        "reasoning": {"effort": null, "summary": null},
        "store": false,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": null,
        "metadata": {},
    })
}

impl Responses {
    fn emit(&mut self, out: &mut VecDeque<Bytes>, kind: &str, mut fields: Value) {
        // Field order on the wire: type first, the event's own fields, sequence_number last.
        let mut event = serde_json::Map::new();
        event.insert("type".into(), json!(kind));
        if let Value::Object(map) = &mut fields {
            event.append(map);
        }
        event.insert("sequence_number".into(), json!(self.sequence));
        self.sequence += 1;
        out.push_back(named_event(kind, &Value::Object(event)));
    }
}

impl Encoder for Responses {
    fn error_event(&mut self, _plan: &Plan) -> Bytes {
        let mut out = VecDeque::new();
        self.emit(
            &mut out,
            "error",
            json!({"code": "server_error",
                   "message": "The server had an error while processing your request.",
                   "param": null}),
        );
        out.pop_front().unwrap_or_default()
    }

    fn encode(&mut self, plan: &Plan, step: Step, out: &mut VecDeque<Bytes>) {
        match step {
            Step::Begin => {
                let r = response(plan, "in_progress", json!([]), Value::Null);
                self.emit(out, "response.created", json!({"response": r.clone()}));
                self.emit(out, "response.in_progress", json!({"response": r}));
            }
            Step::Start(b) => {
                let id = item_id(plan, b);
                match &plan.blocks[b].kind {
                    Kind::Thinking { .. } => {
                        let item = json!({"id": id, "type": "reasoning", "summary": []});
                        self.emit(
                            out,
                            "response.output_item.added",
                            json!({"output_index": b, "item": item}),
                        );
                        self.emit(
                            out,
                            "response.reasoning_summary_part.added",
                            json!({
                                "item_id": id,
                                "output_index": b,
                                "summary_index": 0,
                                "part": {"type": "summary_text", "text": ""},
                            }),
                        );
                    }
                    Kind::Text => {
                        let item = json!({
                            "id": id, "type": "message", "status": "in_progress",
                            "content": [], "role": "assistant",
                        });
                        self.emit(
                            out,
                            "response.output_item.added",
                            json!({"output_index": b, "item": item}),
                        );
                        self.emit(
                            out,
                            "response.content_part.added",
                            json!({
                                "item_id": id,
                                "output_index": b,
                                "content_index": 0,
                                "part": {"type": "output_text", "annotations": [], "logprobs": [], "text": ""},
                            }),
                        );
                    }
                    Kind::ToolCall { id: call, name, .. } => {
                        let item = json!({
                            "id": id, "type": "function_call", "status": "in_progress",
                            "arguments": "", "call_id": call_id(call), "name": name,
                        });
                        self.emit(
                            out,
                            "response.output_item.added",
                            json!({"output_index": b, "item": item}),
                        );
                    }
                    Kind::Redacted { .. } => {}
                }
            }
            Step::Delta(b, k) => {
                let id = item_id(plan, b);
                let delta = &plan.blocks[b].deltas[k];
                match &plan.blocks[b].kind {
                    Kind::Thinking { .. } => self.emit(
                        out,
                        "response.reasoning_summary_text.delta",
                        json!({"item_id": id, "output_index": b, "summary_index": 0, "delta": delta}),
                    ),
                    Kind::Text => self.emit(
                        out,
                        "response.output_text.delta",
                        json!({
                            "item_id": id, "output_index": b, "content_index": 0,
                            "delta": delta, "logprobs": [],
                        }),
                    ),
                    Kind::ToolCall { .. } => self.emit(
                        out,
                        "response.function_call_arguments.delta",
                        json!({"item_id": id, "output_index": b, "delta": delta}),
                    ),
                    Kind::Redacted { .. } => {}
                }
            }
            Step::End(b) => {
                let id = item_id(plan, b);
                let full = &plan.blocks[b].full;
                let item = match &plan.blocks[b].kind {
                    Kind::Thinking { signature } => {
                        self.emit(
                            out,
                            "response.reasoning_summary_text.done",
                            json!({"item_id": id, "output_index": b, "summary_index": 0, "text": full}),
                        );
                        let part = json!({"type": "summary_text", "text": full});
                        self.emit(
                            out,
                            "response.reasoning_summary_part.done",
                            json!({"item_id": id, "output_index": b, "summary_index": 0, "part": part.clone()}),
                        );
                        let mut item = json!({"id": id, "type": "reasoning", "summary": [part]});
                        if plan.ctx.include_encrypted {
                            item["encrypted_content"] =
                                json!(encrypted_content(plan, b, signature.as_ref()));
                        }
                        item
                    }
                    Kind::Text => {
                        self.emit(
                            out,
                            "response.output_text.done",
                            json!({
                                "item_id": id, "output_index": b, "content_index": 0,
                                "text": full, "logprobs": [],
                            }),
                        );
                        let part = json!({"type": "output_text", "annotations": [], "logprobs": [], "text": full});
                        self.emit(
                            out,
                            "response.content_part.done",
                            json!({"item_id": id, "output_index": b, "content_index": 0, "part": part.clone()}),
                        );
                        json!({
                            "id": id, "type": "message", "status": "completed",
                            "content": [part], "role": "assistant",
                        })
                    }
                    Kind::ToolCall { id: call, name, .. } => {
                        self.emit(
                            out,
                            "response.function_call_arguments.done",
                            json!({"item_id": id, "output_index": b, "arguments": full}),
                        );
                        json!({
                            "id": id, "type": "function_call", "status": "completed",
                            "arguments": full, "call_id": call_id(call), "name": name,
                        })
                    }
                    Kind::Redacted { .. } => return,
                };
                self.done_items.push(item.clone());
                self.emit(
                    out,
                    "response.output_item.done",
                    json!({"output_index": b, "item": item}),
                );
            }
            Step::Finish => {
                let u = &plan.usage;
                let input = u.input + u.cache_read;
                let usage = json!({
                    "input_tokens": input,
                    "input_tokens_details": {"cached_tokens": u.cache_read},
                    "output_tokens": u.output,
                    "output_tokens_details": {"reasoning_tokens": plan.reasoning},
                    "total_tokens": input + u.output,
                });
                let (kind, status) = match plan.stop {
                    StopReason::Length => ("response.incomplete", "incomplete"),
                    StopReason::Stop | StopReason::ToolUse => ("response.completed", "completed"),
                };
                let output = Value::Array(std::mem::take(&mut self.done_items));
                let r = response(plan, status, output, usage);
                self.emit(out, kind, json!({"response": r}));
            }
        }
    }
}
