//! Builds the assistant message from a provider's decoded stream and emits the
//! [`AssistantMessageEvent`]s, so that every API adapter only has to say what arrived.

use tau_protocol::{
    AssistantContent, AssistantMessage, AssistantMessageEvent, Model, StopReason, TextContent,
    ThinkingContent, ToolCall,
};
use tokio::sync::mpsc;

use super::partial_json::parse_arguments;
use super::{Op, ProviderError};

/// Accumulates the message and sends events to the consumer.
pub(crate) struct Emitter {
    message: AssistantMessage,
    /// Events travel boxed: one carries a whole message (a few hundred bytes) in some
    /// variants, and every move through the channel and the futures on either side would
    /// copy all of it, for every delta (a sixth of a streamed reply's work when they did).
    tx: mpsc::Sender<Box<AssistantMessageEvent>>,
    include_partial: bool,
    cost: tau_protocol::ModelCost,
    /// Raw argument text of each tool call, by content index.
    tool_args: Vec<Option<String>>,
    started: bool,
    /// The server answered with a success status: a failure from here on ends a reply that
    /// has started (pi's providers send `start` once the response is there, and none when the
    /// request itself fails).
    responded: bool,
}

impl Emitter {
    pub fn new(
        model: &Model,
        tx: mpsc::Sender<Box<AssistantMessageEvent>>,
        include_partial: bool,
    ) -> Self {
        Self {
            message: AssistantMessage {
                api: model.api.clone(),
                provider: model.provider.clone(),
                model: model.id.clone(),
                stop_reason: StopReason::Stop,
                ..super::empty_message()
            },
            tx,
            include_partial,
            cost: model.cost.clone(),
            tool_args: Vec::new(),
            started: false,
            responded: false,
        }
    }

    /// False once the consumer has gone away; the adapter should stop reading.
    pub fn wanted(&self) -> bool {
        !self.tx.is_closed()
    }

    fn partial(&self) -> Option<AssistantMessage> {
        self.include_partial.then(|| self.message.clone())
    }

    /// Takes the event boxed, so it is built straight into its box and the future waiting
    /// on a full channel holds only the pointer.
    async fn send(&self, event: Box<AssistantMessageEvent>) {
        // The consumer keeps up nearly always: a free slot takes the event without the
        // semaphore's wait machinery. A full channel waits, in order, as before.
        match self.tx.try_send(event) {
            Err(mpsc::error::TrySendError::Full(event)) => {
                let _ = self.tx.send(event).await;
            }
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    async fn ensure_started(&mut self) {
        if !self.started {
            self.started = true;
            let partial = self.message.clone();
            self.send(Box::new(AssistantMessageEvent::Start { partial }))
                .await;
        }
    }

    /// Applies one decoded operation.
    pub async fn apply(&mut self, op: Op) -> Result<(), ProviderError> {
        // Facts about the reply (its usage, ids) do not start it: an adapter that learns them
        // before its first content, as Anthropic's `message_start` does, gets them into the
        // `start` event's message, as pi's does.
        if !matches!(
            op,
            Op::Usage(_) | Op::ResponseId(_) | Op::ResponseModel(_) | Op::StopReason(_)
        ) {
            self.ensure_started().await;
        }
        match op {
            Op::Start => {}
            Op::TextStart => {
                self.push(AssistantContent::Text(TextContent {
                    text: String::new(),
                    text_signature: None,
                }));
                let content_index = self.message.content.len() - 1;
                let partial = self.partial();
                self.send(Box::new(AssistantMessageEvent::TextStart {
                    content_index,
                    partial,
                }))
                .await;
            }
            Op::TextDelta { index, text } => {
                match self.message.content.get_mut(index) {
                    Some(AssistantContent::Text(t)) => t.text.push_str(&text),
                    _ => return Err(bad_index(index)),
                }
                let partial = self.partial();
                self.send(Box::new(AssistantMessageEvent::TextDelta {
                    content_index: index,
                    delta: text,
                    partial,
                }))
                .await;
            }
            Op::TextSignature { index, signature } => match self.message.content.get_mut(index) {
                Some(AssistantContent::Text(t)) => t.text_signature = Some(signature),
                _ => return Err(bad_index(index)),
            },
            Op::TextEnd { index } => {
                let content = match self.message.content.get(index) {
                    Some(AssistantContent::Text(t)) => t.text.clone(),
                    _ => return Err(bad_index(index)),
                };
                let partial = self.partial();
                self.send(Box::new(AssistantMessageEvent::TextEnd {
                    content_index: index,
                    content,
                    partial,
                }))
                .await;
            }
            Op::ThinkingStart { redacted } => {
                self.push(AssistantContent::Thinking(ThinkingContent {
                    thinking: String::new(),
                    thinking_signature: None,
                    redacted: redacted.then_some(true),
                }));
                let content_index = self.message.content.len() - 1;
                let partial = self.partial();
                self.send(Box::new(AssistantMessageEvent::ThinkingStart {
                    content_index,
                    partial,
                }))
                .await;
            }
            Op::ThinkingDelta { index, text } => {
                match self.message.content.get_mut(index) {
                    Some(AssistantContent::Thinking(t)) => t.thinking.push_str(&text),
                    _ => return Err(bad_index(index)),
                }
                let partial = self.partial();
                self.send(Box::new(AssistantMessageEvent::ThinkingDelta {
                    content_index: index,
                    delta: text,
                    partial,
                }))
                .await;
            }
            Op::ThinkingSignature {
                index,
                signature,
                append,
            } => match self.message.content.get_mut(index) {
                Some(AssistantContent::Thinking(t)) => match (&mut t.thinking_signature, append) {
                    (Some(existing), true) => existing.push_str(&signature),
                    (slot, _) => *slot = Some(signature),
                },
                _ => return Err(bad_index(index)),
            },
            Op::ThinkingEnd { index } => {
                let content = match self.message.content.get(index) {
                    Some(AssistantContent::Thinking(t)) => t.thinking.clone(),
                    _ => return Err(bad_index(index)),
                };
                let partial = self.partial();
                self.send(Box::new(AssistantMessageEvent::ThinkingEnd {
                    content_index: index,
                    content,
                    partial,
                }))
                .await;
            }
            Op::ToolCallStart { id, name } => {
                // The event names the call (pi 1.x's lean shape); the 0.79 writer drops them.
                let (event_id, event_name) = (id.clone(), name.clone());
                self.push(AssistantContent::ToolCall(ToolCall {
                    id,
                    name,
                    arguments: serde_json::Map::new(),
                    thought_signature: None,
                }));
                let content_index = self.message.content.len() - 1;
                let partial = self.partial();
                self.send(Box::new(AssistantMessageEvent::ToolCallStart {
                    content_index,
                    id: Some(event_id),
                    tool_name: Some(event_name),
                    partial,
                }))
                .await;
            }
            Op::ToolCallDelta { index, json } => {
                let text = match self.tool_args.get_mut(index) {
                    Some(Some(text)) => text,
                    _ => return Err(bad_index(index)),
                };
                text.push_str(&json);
                if self.include_partial {
                    let arguments = parse_arguments(text);
                    if let Some(AssistantContent::ToolCall(call)) =
                        self.message.content.get_mut(index)
                    {
                        call.arguments = arguments;
                    }
                }
                let partial = self.partial();
                self.send(Box::new(AssistantMessageEvent::ToolCallDelta {
                    content_index: index,
                    delta: json,
                    partial,
                }))
                .await;
            }
            Op::ToolCallSignature { index, signature } => match self.message.content.get_mut(index)
            {
                Some(AssistantContent::ToolCall(call)) => call.thought_signature = Some(signature),
                _ => return Err(bad_index(index)),
            },
            Op::ToolCallEnd { index } => {
                let text = match self.tool_args.get(index) {
                    Some(Some(text)) => text.clone(),
                    _ => return Err(bad_index(index)),
                };
                let tool_call = match self.message.content.get_mut(index) {
                    Some(AssistantContent::ToolCall(call)) => {
                        call.arguments = parse_arguments(&text);
                        call.clone()
                    }
                    _ => return Err(bad_index(index)),
                };
                let partial = self.partial();
                self.send(Box::new(AssistantMessageEvent::ToolCallEnd {
                    content_index: index,
                    tool_call,
                    partial,
                }))
                .await;
            }
            Op::Usage(usage) => self.message.usage = usage,
            Op::StopReason(reason) => self.message.stop_reason = reason,
            Op::ResponseId(id) => self.message.response_id = Some(id),
            Op::ResponseModel(model) => {
                if model != self.message.model {
                    self.message.response_model = Some(model);
                }
            }
        }
        Ok(())
    }

    fn push(&mut self, block: AssistantContent) {
        let is_tool = matches!(block, AssistantContent::ToolCall(_));
        self.message.content.push(block);
        self.tool_args.push(is_tool.then(String::new));
    }

    /// Ends the stream successfully: computes the cost and sends `done`.
    pub async fn finish(mut self) {
        self.ensure_started().await;
        self.compute_cost();
        let reason = self.message.stop_reason;
        if matches!(reason, StopReason::Error | StopReason::Aborted) {
            let error = self
                .message
                .error_message
                .clone()
                .unwrap_or_else(|| "An unknown error occurred".into());
            return self.fail(ProviderError::Stream(error)).await;
        }
        self.send(Box::new(AssistantMessageEvent::Done {
            reason,
            message: self.message.clone(),
        }))
        .await;
    }

    /// Records that the server answered with a success status.
    pub fn responded(&mut self) {
        self.responded = true;
    }

    /// Ends the stream with an error (or an abort), keeping what streamed so far.
    pub async fn fail(mut self, error: ProviderError) {
        if self.responded {
            self.ensure_started().await;
        }
        self.compute_cost();
        let reason = if error == ProviderError::Aborted {
            StopReason::Aborted
        } else {
            StopReason::Error
        };
        self.message.stop_reason = reason;
        self.message.error_message = Some(error.to_string());
        if let ProviderError::Http {
            retry_after: Some(wait),
            ..
        } = &error
        {
            self.message.retry_after_ms = Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX));
        }
        self.send(Box::new(AssistantMessageEvent::Error {
            reason,
            error: self.message.clone(),
        }))
        .await;
    }

    fn compute_cost(&mut self) {
        let u = &mut self.message.usage;
        let per = |price: f64, tokens: u64| price / 1_000_000.0 * tokens as f64;
        u.cost.input = per(self.cost.input, u.input);
        u.cost.output = per(self.cost.output, u.output);
        u.cost.cache_read = per(self.cost.cache_read, u.cache_read);
        // One-hour cache writes are billed at twice the input price (Anthropic's rule).
        let long_writes = u.cache_write_1h.unwrap_or(0).min(u.cache_write);
        u.cost.cache_write = per(self.cost.cache_write, u.cache_write - long_writes)
            + per(self.cost.input * 2.0, long_writes);
        u.cost.total = u.cost.input + u.cost.output + u.cost.cache_read + u.cost.cache_write;
    }
}

fn bad_index(index: usize) -> ProviderError {
    ProviderError::Stream(format!(
        "provider stream referred to unknown content block {index}"
    ))
}

#[cfg(test)]
mod tests {
    use super::super::test_support;
    use super::*;
    use tau_protocol::{ModelCost, Usage};

    #[tokio::test]
    async fn one_hour_cache_writes_cost_twice_the_input_price() {
        let model = Model {
            cost: ModelCost {
                input: 3.0,
                output: 15.0,
                cache_read: 0.3,
                cache_write: 3.75,
            },
            ..test_support::model("anthropic-messages")
        };
        let (tx, mut rx) = mpsc::channel(8);
        let mut emitter = Emitter::new(&model, tx, false);
        let usage = Usage {
            cache_write: 3_000_000,
            cache_write_1h: Some(1_000_000),
            ..Usage::default()
        };
        emitter.apply(Op::Usage(usage)).await.unwrap();
        emitter.finish().await;
        let mut done = None;
        while let Some(event) = rx.recv().await {
            if let AssistantMessageEvent::Done { message, .. } = *event {
                done = Some(message);
            }
        }
        let cost = done.expect("a done event").usage.cost;
        // 2M five-minute writes at 3.75 per million, 1M one-hour writes at 2 × 3.
        assert!((cost.cache_write - (7.5 + 6.0)).abs() < 1e-9, "{cost:?}");
    }
}
