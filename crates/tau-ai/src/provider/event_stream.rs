//! AWS's binary event stream (`application/vnd.amazon.eventstream`), the framing of Bedrock's
//! Converse stream, cut into messages by the AWS SDK's own decoder (`aws-smithy-eventstream`:
//! prelude, prelude CRC, typed headers, payload, message CRC).
//!
//! Each message becomes an [`SseEvent`] so that the Bedrock adapter reads it like any other
//! stream: an event message as `event` = its `:event-type` with the JSON payload as `data`;
//! a modelled exception as `exception:<:exception-type>` with its payload; an unmodelled
//! error as `error:<:error-code>` with its `:error-message` as `data`.

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::{HeaderValue, Message};
use bytes::{Buf, BytesMut};

use super::ProviderError;
use super::sse::{MAX_EVENT_BYTES, SseEvent};

/// Incremental decoder: feed body chunks, get complete messages as events.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    frames: MessageFrameDecoder,
    buffer: BytesMut,
}

fn string_header<'a>(message: &'a Message, name: &str) -> Option<&'a str> {
    message
        .headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| match h.value() {
            HeaderValue::String(s) => Some(s.as_str()),
            _ => None,
        })
}

/// The event a message stands for.
pub(crate) fn to_event(message: &Message) -> SseEvent {
    let payload = String::from_utf8_lossy(message.payload()).into_owned();
    let header = |name| string_header(message, name).unwrap_or_default().to_string();
    match string_header(message, ":message-type") {
        Some("exception") => SseEvent {
            event: Some(format!("exception:{}", header(":exception-type"))),
            data: payload,
        },
        Some("error") => SseEvent {
            event: Some(format!("error:{}", header(":error-code"))),
            data: header(":error-message"),
        },
        _ => SseEvent {
            event: Some(header(":event-type")),
            data: payload,
        },
    }
}

impl Decoder {
    /// Adds a chunk and returns the messages it completes. A corrupt message (a CRC that
    /// does not match, impossible lengths) ends the stream: nothing after it can be trusted.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, ProviderError> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        loop {
            match self.frames.decode_frame(&mut self.buffer) {
                Ok(DecodedFrame::Complete(message)) => events.push(to_event(&message)),
                Ok(DecodedFrame::Incomplete) => break,
                Err(err) => {
                    return Err(ProviderError::Stream(format!(
                        "Invalid event stream message: {err}"
                    )));
                }
            }
        }
        // The decoder waits for a whole message, so a broken server announcing a huge one
        // would grow the buffer without end; SSE's bound applies here too.
        if self.buffer.remaining() > MAX_EVENT_BYTES {
            return Err(ProviderError::Stream(format!(
                "An event stream message exceeded {} MiB",
                MAX_EVENT_BYTES >> 20
            )));
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use aws_smithy_eventstream::frame::write_message_to;
    use aws_smithy_types::event_stream::Header;
    use proptest::prelude::*;

    use super::*;

    fn message(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
        let mut message = Message::new(payload.to_vec());
        for (name, value) in headers {
            message = message.add_header(Header::new(
                (*name).to_string(),
                HeaderValue::String((*value).to_string().into()),
            ));
        }
        let mut out = Vec::new();
        write_message_to(&message, &mut out).unwrap();
        out
    }

    fn event(kind: &str, payload: &str) -> Vec<u8> {
        message(
            &[
                (":event-type", kind),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            payload.as_bytes(),
        )
    }

    #[test]
    fn events_exceptions_and_errors() {
        let mut bytes = event("contentBlockDelta", r#"{"delta":{"text":"hi"}}"#);
        bytes.extend(message(
            &[
                (":exception-type", "throttlingException"),
                (":message-type", "exception"),
            ],
            br#"{"message":"slow down"}"#,
        ));
        bytes.extend(message(
            &[
                (":error-code", "InternalFailure"),
                (":error-message", "boom"),
                (":message-type", "error"),
            ],
            b"",
        ));
        let events = Decoder::default().feed(&bytes).unwrap();
        assert_eq!(
            events,
            [
                SseEvent {
                    event: Some("contentBlockDelta".into()),
                    data: r#"{"delta":{"text":"hi"}}"#.into()
                },
                SseEvent {
                    event: Some("exception:throttlingException".into()),
                    data: r#"{"message":"slow down"}"#.into()
                },
                SseEvent {
                    event: Some("error:InternalFailure".into()),
                    data: "boom".into()
                },
            ]
        );
    }

    #[test]
    fn a_corrupt_message_ends_the_stream() {
        let mut bytes = event("messageStart", r#"{"role":"assistant"}"#);
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        let err = Decoder::default().feed(&bytes).unwrap_err();
        assert!(
            err.to_string().starts_with("Invalid event stream message"),
            "{err}"
        );
        // So does a prelude whose own CRC is wrong.
        let mut bytes = event("messageStart", "{}");
        bytes[9] ^= 0x01;
        assert!(Decoder::default().feed(&bytes).is_err());
    }

    proptest! {
        /// Any messages, cut at any points, come out whole and in order.
        #[test]
        fn messages_survive_any_chunking(
            payloads in prop::collection::vec("[ -~]{0,300}", 1..8),
            cuts in prop::collection::vec(0usize..2000, 0..12),
        ) {
            let mut bytes = Vec::new();
            for (i, payload) in payloads.iter().enumerate() {
                bytes.extend(event(&format!("e{i}"), payload));
            }
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.sort_unstable();
            let mut decoder = Decoder::default();
            let mut events = Vec::new();
            let mut at = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                events.extend(decoder.feed(&bytes[at..cut]).unwrap());
                at = cut;
            }
            prop_assert_eq!(events.len(), payloads.len());
            for (i, (event, payload)) in events.iter().zip(&payloads).enumerate() {
                let name = format!("e{i}");
                prop_assert_eq!(event.event.as_deref(), Some(name.as_str()));
                prop_assert_eq!(&event.data, payload);
            }
        }

        /// Random bytes never panic the decoder: they give an error or wait for more.
        #[test]
        fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
            let _ = Decoder::default().feed(&bytes);
        }
    }
}
