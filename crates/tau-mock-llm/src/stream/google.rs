//! Google Generative AI streaming (`streamGenerateContent?alt=sse`): one
//! `GenerateContentResponse` per `data:` line, each with a single part (text, thought text, or
//! a whole `functionCall`), CRLF-framed as Google frames them. The last chunk carries
//! `finishReason` and the final `usageMetadata`, so each part is held back one step until it
//! is known whether it is the last.

use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::{Value, json};

use super::{Encoder, Kind, Plan, Step};
use crate::reply::StopReason;

#[derive(Default)]
pub(crate) struct Google {
    held: Option<Value>,
}

pub(crate) fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Length => "MAX_TOKENS",
        StopReason::Stop | StopReason::ToolUse => "STOP",
    }
}

fn prompt_tokens(plan: &Plan) -> u64 {
    plan.usage.input + plan.usage.cache_read
}

fn final_usage(plan: &Plan) -> Value {
    let prompt = prompt_tokens(plan);
    let thoughts = plan.reasoning;
    let candidates = plan.usage.output - thoughts;
    let mut usage = json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + thoughts,
    });
    // Google leaves zero counts out rather than sending 0.
    if plan.usage.cache_read > 0 {
        usage["cachedContentTokenCount"] = json!(plan.usage.cache_read);
    }
    usage["promptTokensDetails"] = json!([{"modality": "TEXT", "tokenCount": prompt}]);
    if thoughts > 0 {
        usage["thoughtsTokenCount"] = json!(thoughts);
    }
    usage
}

fn chunk(plan: &Plan, part: Value, last: bool) -> Bytes {
    let mut candidate = json!({"content": {"parts": [part], "role": "model"}});
    let usage = if last {
        candidate["finishReason"] = json!(finish_reason(plan.stop));
        final_usage(plan)
    } else {
        let prompt = prompt_tokens(plan);
        json!({"promptTokenCount": prompt, "totalTokenCount": prompt})
    };
    candidate["index"] = json!(0);
    let response = json!({
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": plan.ctx.model,
        "responseId": format!("mockResponse{:04}", plan.ctx.seq),
    });
    Bytes::from(format!("data: {response}\r\n\r\n"))
}

impl Google {
    fn part(&mut self, plan: &Plan, part: Value, out: &mut VecDeque<Bytes>) {
        if let Some(previous) = self.held.replace(part) {
            out.push_back(chunk(plan, previous, false));
        }
    }
}

impl Encoder for Google {
    fn error_event(&mut self, _plan: &Plan) -> Bytes {
        let error = json!({"error": {"code": 503,
            "message": "The model is overloaded. Please try again later.",
            "status": "UNAVAILABLE"}});
        Bytes::from(format!("data: {error}\r\n\r\n"))
    }

    fn encode(&mut self, plan: &Plan, step: Step, out: &mut VecDeque<Bytes>) {
        match step {
            Step::Begin => {}
            Step::Start(b) => {
                if let Kind::ToolCall {
                    name, arguments, ..
                } = &plan.blocks[b].kind
                {
                    let part = json!({"functionCall": {"name": name, "args": arguments}});
                    self.part(plan, part, out);
                }
            }
            Step::Delta(b, k) => {
                let block = &plan.blocks[b];
                let text = &block.deltas[k];
                let part = match &block.kind {
                    Kind::Text => json!({"text": text}),
                    Kind::Thinking { signature } => {
                        let mut part = json!({"text": text, "thought": true});
                        if let (Some(sig), true) = (signature, k + 1 == block.deltas.len()) {
                            part["thoughtSignature"] = json!(sig);
                        }
                        part
                    }
                    Kind::ToolCall { .. } | Kind::Redacted { .. } => return,
                };
                self.part(plan, part, out);
            }
            Step::End(b) => {
                let block = &plan.blocks[b];
                if let (
                    Kind::Thinking {
                        signature: Some(sig),
                    },
                    true,
                ) = (&block.kind, block.deltas.is_empty())
                {
                    let part = json!({"text": "", "thought": true, "thoughtSignature": sig});
                    self.part(plan, part, out);
                }
            }
            Step::Finish => {
                let last = self.held.take().unwrap_or_else(|| json!({"text": ""}));
                out.push_back(chunk(plan, last, true));
            }
        }
    }
}
