//! Turning a [`Reply`] into a streamed response body: the reply is resolved once into a
//! [`Plan`] (blocks cut into deltas), a cursor walks it step by step, and a per-API encoder
//! turns each step into the events that API sends (SSE events, or Bedrock's binary
//! event-stream messages). Events are produced lazily, one at a time, so a reply of ten
//! thousand deltas never exists as one big buffer.

mod anthropic;
mod bedrock;
mod google;
mod openai_completions;
mod openai_responses;

use std::collections::VecDeque;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::api::Api;
use crate::reply::{Block, DEFAULT_CHUNK_SIZE, Fault, Reply, StopReason, Usage, split_chars};

/// What the encoders need to know about the request being answered.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub api: Api,
    pub model: String,
    /// 1-based number of the request; makes ids deterministic.
    pub seq: u64,
    /// Unix seconds, for the `created` fields.
    pub created: u64,
    /// OpenAI Completions: the request asked for `stream_options.include_usage`.
    pub include_usage: bool,
    /// OpenAI Responses: the request's `include` has `reasoning.encrypted_content`.
    pub include_encrypted: bool,
}

impl Ctx {
    pub(crate) fn new(api: Api, model: String, seq: u64, body: &Value) -> Self {
        let include_usage = body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let include_encrypted = body
            .get("include")
            .and_then(Value::as_array)
            .is_some_and(|items| items.iter().any(|i| i == "reasoning.encrypted_content"));
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            api,
            model,
            seq,
            created,
            include_usage,
            include_encrypted,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Text,
    Thinking {
        signature: Option<String>,
    },
    Redacted {
        data: String,
    },
    ToolCall {
        id: String,
        name: String,
        arguments: Value,
    },
}

/// One block of the reply, cut into the deltas that will be streamed.
#[derive(Debug, Clone)]
pub(crate) struct PlannedBlock {
    pub kind: Kind,
    pub deltas: Vec<String>,
    /// The concatenated deltas: the block's whole text (or argument JSON).
    pub full: String,
}

/// A reply resolved against one request.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub ctx: Ctx,
    pub blocks: Vec<PlannedBlock>,
    pub usage: Usage,
    /// Reasoning tokens, already capped at `usage.output`.
    pub reasoning: u64,
    pub stop: StopReason,
}

impl Plan {
    pub(crate) fn new(reply: Reply, ctx: Ctx) -> Self {
        let stop = reply.effective_stop_reason();
        let size = reply.chunk_size.unwrap_or(DEFAULT_CHUNK_SIZE);
        let cut = |text: &str, chunks: Option<Vec<String>>| -> (Vec<String>, String) {
            match chunks {
                Some(chunks) => {
                    let full = chunks.concat();
                    (chunks, full)
                }
                None => (split_chars(text, size), text.to_owned()),
            }
        };
        let mut thinking_chars = 0usize;
        let mut blocks = Vec::with_capacity(reply.content.len());
        for block in reply.content {
            let planned = match block {
                Block::Text { text, chunks } => {
                    let (deltas, full) = cut(&text, chunks);
                    PlannedBlock {
                        kind: Kind::Text,
                        deltas,
                        full,
                    }
                }
                Block::Thinking {
                    text,
                    signature,
                    chunks,
                } => {
                    let (deltas, full) = cut(&text, chunks);
                    thinking_chars += full.chars().count();
                    PlannedBlock {
                        kind: Kind::Thinking { signature },
                        deltas,
                        full,
                    }
                }
                Block::RedactedThinking { data } => {
                    if ctx.api != Api::AnthropicMessages {
                        continue;
                    }
                    PlannedBlock {
                        kind: Kind::Redacted { data },
                        deltas: Vec::new(),
                        full: String::new(),
                    }
                }
                Block::ToolCall {
                    id,
                    name,
                    arguments,
                    chunks,
                } => {
                    let json = arguments.to_string();
                    let (deltas, full) = cut(&json, chunks);
                    // Google sends arguments as an object, not text: prefer what was
                    // actually "streamed" when explicit fragments form valid JSON.
                    let arguments = serde_json::from_str(&full).unwrap_or(arguments);
                    PlannedBlock {
                        kind: Kind::ToolCall {
                            id,
                            name,
                            arguments,
                        },
                        deltas,
                        full,
                    }
                }
            };
            blocks.push(planned);
        }
        let usage = reply.usage;
        let estimated = u64::try_from(thinking_chars.div_ceil(4)).unwrap_or(u64::MAX);
        let reasoning = estimated.min(usage.output);
        Self {
            ctx,
            blocks,
            usage,
            reasoning,
            stop,
        }
    }

    pub(crate) fn has_text(&self) -> bool {
        self.blocks.iter().any(|b| matches!(b.kind, Kind::Text))
    }
}

/// One position in the walk over a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Begin,
    Start(usize),
    Delta(usize, usize),
    End(usize),
    Finish,
}

fn following(step: Step, blocks: &[PlannedBlock]) -> Option<Step> {
    let start_or_finish = |b: usize| {
        if b < blocks.len() {
            Step::Start(b)
        } else {
            Step::Finish
        }
    };
    let delta_or_end = |b: usize, k: usize| {
        if k < blocks[b].deltas.len() {
            Step::Delta(b, k)
        } else {
            Step::End(b)
        }
    };
    Some(match step {
        Step::Begin => start_or_finish(0),
        Step::Start(b) => delta_or_end(b, 0),
        Step::Delta(b, k) => delta_or_end(b, k + 1),
        Step::End(b) => start_or_finish(b + 1),
        Step::Finish => return None,
    })
}

/// Turns steps into one API's events.
pub(crate) trait Encoder: Send {
    fn encode(&mut self, plan: &Plan, step: Step, out: &mut VecDeque<Bytes>);
    /// The API's own error event inside a stream that has started (an `ErrorEventAfter`
    /// fault).
    fn error_event(&mut self, plan: &Plan) -> Bytes;
}

/// The lazy event source for one response.
pub(crate) struct Events {
    plan: Plan,
    next: Option<Step>,
    encoder: Box<dyn Encoder>,
    queue: VecDeque<Bytes>,
}

impl Events {
    pub(crate) fn new(plan: Plan) -> Self {
        let encoder: Box<dyn Encoder> = match plan.ctx.api {
            Api::AnthropicMessages => Box::new(anthropic::Anthropic),
            Api::OpenAiCompletions => Box::new(openai_completions::Completions::new(&plan)),
            Api::OpenAiResponses | Api::AzureOpenAiResponses => {
                Box::new(openai_responses::Responses::default())
            }
            Api::GoogleGenerativeAi | Api::GoogleVertex => Box::new(google::Google::default()),
            Api::BedrockConverseStream => Box::new(bedrock::Bedrock::default()),
        };
        Self {
            plan,
            next: Some(Step::Begin),
            encoder,
            queue: VecDeque::new(),
        }
    }

    /// The API's in-stream error event.
    pub(crate) fn error_event(&mut self) -> Bytes {
        self.encoder.error_event(&self.plan)
    }

    /// The next complete event, or `None` when the reply is fully sent.
    pub(crate) fn next_event(&mut self) -> Option<Bytes> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            let step = self.next?;
            self.next = following(step, &self.plan.blocks);
            self.encoder.encode(&self.plan, step, &mut self.queue);
        }
    }
}

impl Iterator for Events {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        self.next_event()
    }
}

/// `event: <name>\ndata: <json>\n\n`, as Anthropic and OpenAI Responses frame events.
pub(crate) fn named_event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// `data: <json>\n\n`, as OpenAI Completions frames events.
pub(crate) fn data_event(data: &str) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// How the body stream ends early, if it does.
#[derive(Debug, Clone, Copy)]
enum Cut {
    Drop(usize),
    Stall(usize),
    /// The API's error event, then a clean end.
    Error(usize),
}

/// How long a dropped stream waits before breaking, so the events already handed to hyper
/// reach the socket before the connection is torn down.
const DROP_GRACE: Duration = Duration::from_millis(20);

#[derive(Debug, thiserror::Error)]
enum StreamBreak {
    #[error("tau-mock-llm dropped the connection as scripted")]
    Dropped,
    #[error("tau-mock-llm is shutting down")]
    Shutdown,
}

struct BodyState {
    events: Events,
    sent: usize,
    chunk_delay: Duration,
    cut: Option<Cut>,
    shutdown: CancellationToken,
    finished: bool,
}

/// The streaming response body for `plan`, honouring the reply's chunk delay and a
/// `DropAfter`/`StallAfter`/`ErrorEventAfter` fault. Ends with an error (which makes hyper abort the
/// connection instead of finishing the chunked body) when dropped, or on server shutdown.
pub(crate) fn sse_body(
    plan: Plan,
    chunk_delay_ms: u64,
    fault: Option<&Fault>,
    shutdown: CancellationToken,
) -> Body {
    let cut = match fault {
        Some(Fault::DropAfter { events }) => Some(Cut::Drop(*events)),
        Some(Fault::StallAfter { events }) => Some(Cut::Stall(*events)),
        Some(Fault::ErrorEventAfter { events }) => Some(Cut::Error(*events)),
        _ => None,
    };
    let state = BodyState {
        events: Events::new(plan),
        sent: 0,
        chunk_delay: Duration::from_millis(chunk_delay_ms),
        cut,
        shutdown,
        finished: false,
    };
    let stream = futures_util::stream::unfold(state, |mut s| async move {
        if s.finished {
            return None;
        }
        let cut_now = match s.cut {
            Some(Cut::Drop(n) | Cut::Stall(n) | Cut::Error(n)) => s.sent >= n,
            None => false,
        };
        let next = if cut_now {
            None
        } else {
            if s.sent > 0 && !s.chunk_delay.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(s.chunk_delay) => {}
                    () = s.shutdown.cancelled() => {
                        s.finished = true;
                        return Some((Err(StreamBreak::Shutdown), s));
                    }
                }
            }
            s.events.next_event()
        };
        match (next, s.cut) {
            (Some(event), _) => {
                s.sent += 1;
                if !s.chunk_delay.is_zero() {
                    return Some((Ok(event), s));
                }
                // Without a delay, events go out in frames of up to 64 KiB: one write per
                // event made the mock, not the client, the bottleneck of streaming benchmarks.
                let mut frame = bytes::BytesMut::from(event.as_ref());
                while frame.len() < 64 * 1024 {
                    if let Some(Cut::Drop(n) | Cut::Stall(n) | Cut::Error(n)) = s.cut
                        && s.sent >= n
                    {
                        break;
                    }
                    let Some(event) = s.events.next_event() else {
                        break;
                    };
                    frame.extend_from_slice(&event);
                    s.sent += 1;
                }
                Some((Ok(frame.freeze()), s))
            }
            (None, None) => None,
            (None, Some(Cut::Error(_))) => {
                s.finished = true;
                Some((Ok(s.events.error_event()), s))
            }
            // A cut past the reply's last event still cuts: the body never ends cleanly.
            (None, Some(Cut::Drop(_))) => {
                tokio::select! {
                    () = tokio::time::sleep(DROP_GRACE) => {}
                    () = s.shutdown.cancelled() => {}
                }
                s.finished = true;
                Some((Err(StreamBreak::Dropped), s))
            }
            (None, Some(Cut::Stall(_))) => {
                s.shutdown.cancelled().await;
                s.finished = true;
                Some((Err(StreamBreak::Shutdown), s))
            }
        }
    });
    Body::from_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan(api: Api, reply: Reply) -> Plan {
        Plan::new(reply, Ctx::new(api, "m".into(), 1, &json!({})))
    }

    #[test]
    fn cursor_visits_every_delta_in_order() {
        let p = plan(
            Api::AnthropicMessages,
            Reply::new()
                .thinking("")
                .with_text("abcdefghij")
                .chunk_size(4),
        );
        let mut steps = vec![Step::Begin];
        while let Some(s) = following(*steps.last().unwrap(), &p.blocks) {
            steps.push(s);
        }
        assert_eq!(
            steps,
            [
                Step::Begin,
                Step::Start(0),
                Step::End(0),
                Step::Start(1),
                Step::Delta(1, 0),
                Step::Delta(1, 1),
                Step::Delta(1, 2),
                Step::End(1),
                Step::Finish
            ]
        );
    }

    #[test]
    fn plan_resolves_chunks_reasoning_and_redaction() {
        let reply = Reply::new()
            .thinking("x".repeat(41))
            .redacted_thinking("r")
            .tool_call("c", "bash", json!({"command": "ls -la"}))
            .usage(1, 100, 0, 0);
        let p = plan(Api::OpenAiCompletions, reply.clone());
        assert_eq!(p.blocks.len(), 2, "redacted thinking is Anthropic-only");
        assert_eq!(p.reasoning, 11);
        assert_eq!(p.blocks[1].full, r#"{"command":"ls -la"}"#);
        assert_eq!(p.blocks[1].deltas.concat(), p.blocks[1].full);
        assert_eq!(p.blocks[1].deltas[0].chars().count(), DEFAULT_CHUNK_SIZE);
        assert_eq!(p.stop, StopReason::ToolUse);
        let a = plan(Api::AnthropicMessages, reply.usage(1, 3, 0, 0));
        assert_eq!(a.blocks.len(), 3);
        assert_eq!(a.reasoning, 3, "reasoning is capped at output");
    }
}
