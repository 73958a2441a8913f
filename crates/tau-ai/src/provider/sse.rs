//! Server-sent events (the WHATWG `text/event-stream` format) for provider streams: the
//! `sse-core` crate's decoder behind the small interface the providers use.
//!
//! It replaced a hand-written decoder once the provider benchmark showed no cost (issue 13;
//! the `tau-ai` `stream` bench of `bash bench/provider-stream.sh`, seven interleaved runs,
//! medians of deltas/s against the hand-written decoder in the same run: anthropic 0.99,
//! openai-completions 1.01, openai-responses 0.99, google 1.00, the same allocations per
//! delta). Of the other candidates, `eventsource-stream` ran at 0.45–0.88 of it, and
//! `sse-stream` refuses unknown fields and invalid UTF-8, which the standard says to ignore
//! and replace.

use std::num::NonZeroUsize;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; `None` means the default type `message`.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Bounds one event's data. A Responses `response.completed` event repeats the whole output
/// and streamed images are base64, so the bound is far above any real event; it exists so a
/// broken server cannot grow memory without end.
pub const MAX_EVENT_BYTES: usize = 64 << 20;

/// An event's data passed [`MAX_EVENT_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a server-sent event exceeded {} MiB", MAX_EVENT_BYTES >> 20)]
pub struct EventTooLarge;

/// Incremental decoder: feed body chunks, get complete events.
#[derive(Debug)]
pub struct SseDecoder {
    inner: sse_core::SseDecoder,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::with_limit(MAX_EVENT_BYTES)
    }

    fn with_limit(bytes: usize) -> Self {
        let limit = NonZeroUsize::new(bytes).unwrap_or(NonZeroUsize::MIN);
        Self {
            inner: sse_core::SseDecoder::with_limit(limit),
        }
    }

    /// Adds a chunk and returns the events it completes.
    pub fn feed(&mut self, mut chunk: &[u8]) -> Result<Vec<SseEvent>, EventTooLarge> {
        let mut events = Vec::new();
        while let Some(event) = self.inner.next(&mut chunk) {
            match event {
                Ok(sse_core::SseEvent::Message(message)) => events.push(SseEvent {
                    event: (message.event != "message").then(|| message.event.into_owned()),
                    data: message.data,
                }),
                // Reconnection timing is for clients that reconnect; providers' streams are
                // one request each.
                Ok(sse_core::SseEvent::Retry(_)) => {}
                Err(sse_core::PayloadTooLargeError) => return Err(EventTooLarge),
            }
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        chunks
            .iter()
            .flat_map(|c| d.feed(c).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    }

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_string),
            data: data.to_string(),
        }
    }

    #[test]
    fn events_data_and_comments() {
        let got = all(&[b": ping\nevent: message_start\ndata: {\"a\":1}\n\ndata: x\ndata: y\n\n"]);
        assert_eq!(
            got,
            vec![ev(Some("message_start"), "{\"a\":1}"), ev(None, "x\ny")]
        );
    }

    #[test]
    fn any_line_ending_and_split_chunks() {
        let got = all(&[b"data: a\r", b"\n\r\ndata:b\r\rdata: c\n", b"\n"]);
        assert_eq!(got, vec![ev(None, "a"), ev(None, "b"), ev(None, "c")]);
    }

    #[test]
    fn byte_by_byte_equals_whole() {
        let input = "\u{feff}event: e\ndata: héllo\u{2028}\n\ndata: [DONE]\n\n".as_bytes();
        let whole = all(&[input]);
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(all(&bytes), whole);
        assert_eq!(whole[0], ev(Some("e"), "héllo\u{2028}"));
        assert_eq!(whole[1], ev(None, "[DONE]"));
    }

    #[test]
    fn unknown_repeated_and_bare_fields_are_ignored() {
        let got = all(&[b"id: 1\nretry: soon\nx-trace: a\nevent: a\nevent: b\ndata\ndata: x\n\n"]);
        assert_eq!(got, vec![ev(Some("b"), "\nx")]);
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(all(&[b"data: a\xFFb\n\n"]), vec![ev(None, "a\u{FFFD}b")]);
    }

    #[test]
    fn unterminated_event_is_dropped() {
        assert!(all(&[b"data: partial"]).is_empty());
        assert!(all(&[b"data: complete line, no blank line\n"]).is_empty());
    }

    #[test]
    fn an_oversized_event_is_an_error_not_a_truncation() {
        let mut d = SseDecoder::with_limit(8);
        assert_eq!(d.feed(b"data: ok\n\n"), Ok(vec![ev(None, "ok")]));
        assert_eq!(d.feed(b"data: 0123456789\n\n"), Err(EventTooLarge));
    }

    proptest::proptest! {
        /// However the body is cut into chunks, the same events come out.
        #[test]
        fn chunking_never_changes_the_events(
            body in proptest::collection::vec(
                proptest::sample::select(vec![
                    "data: x", "data:", "event: e", ": c", "id: 1", "\n", "\r", "\r\n", "é", "\u{feff}",
                ]),
                0..40,
            ),
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let body = body.concat().into_bytes();
            let whole = all(&[&body]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(body.len())).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([body.len()]) {
                pieces.push(&body[from..cut]);
                from = cut;
            }
            proptest::prop_assert_eq!(all(&pieces), whole);
        }
    }
}
