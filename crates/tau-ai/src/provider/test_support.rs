//! What the adapters' unit tests share: a model to build requests for, SSE events fed through
//! a decoder the way the stream loop feeds them, and the usage a reply ends with.

use tau_protocol::{InputModality, Message, Model, ModelCost, Usage, UserContent, UserMessage};

use super::sse::SseEvent;
use super::{Adapter, Flow, Op, ProviderError};

/// A text-only model of `api` with small limits and no compat; a test sets what its case
/// depends on with struct update syntax.
pub(crate) fn model(api: &str) -> Model {
    Model {
        id: "m".into(),
        name: "m".into(),
        api: api.into(),
        provider: "p".into(),
        base_url: String::new(),
        reasoning: false,
        thinking_level_map: None,
        input: vec![InputModality::Text],
        cost: ModelCost::default(),
        context_window: 1000,
        max_tokens: 100,
        headers: None,
        compat: None,
    }
}

/// A user message of plain text.
pub(crate) fn user_text(text: &str) -> Message {
    Message::User(UserMessage {
        content: UserContent::Text(text.into()),
        timestamp: 0,
        attachments: None,
    })
}

/// An event of data lines only, as the OpenAI and Google streams send them.
pub(crate) fn data(data: &str) -> SseEvent {
    SseEvent {
        event: None,
        data: data.into(),
    }
}

/// An event with an `event:` name, as the Anthropic stream sends them.
pub(crate) fn named(event: &str, data: &str) -> SseEvent {
    SseEvent {
        event: Some(event.into()),
        data: data.into(),
    }
}

/// Feeds `events` to `adapter` as the stream loop does: the first error ends the reply
/// without `on_end`, `Flow::Done` stops reading, and otherwise the body's end is `on_end`.
pub(crate) fn decode(
    adapter: &mut impl Adapter,
    events: impl IntoIterator<Item = SseEvent>,
) -> (Vec<Op>, Result<(), ProviderError>) {
    let mut ops = Vec::new();
    for event in events {
        match adapter.on_event(event, &mut ops) {
            Ok(Flow::Done) => break,
            Ok(Flow::Continue) => {}
            Err(e) => return (ops, Err(e)),
        }
    }
    let end = adapter.on_end(&mut ops);
    (ops, end)
}

/// The error text a stream of `events` fails with.
pub(crate) fn decode_error(
    adapter: &mut impl Adapter,
    events: impl IntoIterator<Item = SseEvent>,
) -> String {
    decode(adapter, events).1.unwrap_err().to_string()
}

/// The usage the reply ends with: the emitter keeps the last one reported.
pub(crate) fn final_usage(ops: &[Op]) -> Usage {
    ops.iter()
        .rev()
        .find_map(|o| match o {
            Op::Usage(u) => Some(u.clone()),
            _ => None,
        })
        .unwrap()
}

/// The token counts of `usage`: input, output, cache reads, cache writes, total.
pub(crate) fn token_counts(usage: &Usage) -> (u64, u64, u64, u64, u64) {
    (
        usage.input,
        usage.output,
        usage.cache_read,
        usage.cache_write,
        usage.total_tokens,
    )
}
