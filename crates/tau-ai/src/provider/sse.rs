//! Server-sent events decoding (the WHATWG `text/event-stream` format) for provider streams.
//!
//! Written by hand: it is small, the crates that do it wrap a whole HTTP client, and the
//! provider code needs to feed raw body chunks and see every event as soon as its blank line
//! arrives.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; `None` means the default type `message`.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental decoder: feed body chunks, get complete events.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    state: LineState,
    started: bool,
}

/// The event being assembled from `event:` and `data:` lines.
#[derive(Debug, Default)]
struct LineState {
    event: Option<String>,
    data: String,
    has_data: bool,
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a chunk and returns the events it completes.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buf.extend_from_slice(chunk);
        if !self.started && self.buf.len() >= 3 {
            self.started = true;
            if self.buf.starts_with(b"\xEF\xBB\xBF") {
                self.buf.drain(..3);
            }
        }
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(offset) = memchr::memchr2(b'\n', b'\r', &self.buf[start..]) {
            let end = start + offset;
            let terminator_len = if self.buf[end] == b'\r' {
                match self.buf.get(end + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    // A CR at the end of the buffer may be the first half of a CRLF.
                    None => break,
                }
            } else {
                1
            };
            // Valid UTF-8 (the normal case) is used in place; only broken bytes are copied.
            let bytes = &self.buf[start..end];
            let event = match std::str::from_utf8(bytes) {
                Ok(line) => line_event(&mut self.state, line),
                Err(_) => line_event(&mut self.state, &String::from_utf8_lossy(bytes)),
            };
            start = end + terminator_len;
            if let Some(event) = event {
                events.push(event);
            }
        }
        self.buf.drain(..start);
        events
    }

    /// Ends the stream. A trailing event without its blank line is not dispatched, as the
    /// standard says; a pending line is processed first.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        if !self.buf.is_empty() {
            let mut rest = std::mem::take(&mut self.buf);
            if rest.last() == Some(&b'\r') {
                rest.pop();
            }
            let line = String::from_utf8_lossy(&rest).into_owned();
            if let Some(event) = line_event(&mut self.state, &line) {
                events.push(event);
            }
        }
        events
    }
}

/// Handles one line; a blank line dispatches the event assembled so far.
fn line_event(state: &mut LineState, line: &str) -> Option<SseEvent> {
    if line.is_empty() {
        if !state.has_data {
            state.event = None;
            return None;
        }
        state.has_data = false;
        return Some(SseEvent {
            event: state.event.take(),
            data: std::mem::take(&mut state.data),
        });
    }
    if line.starts_with(':') {
        return None;
    }
    let (field, value) = match line.split_once(':') {
        Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
        None => (line, ""),
    };
    match field {
        "event" => state.event = Some(value.to_string()),
        "data" => {
            if state.has_data {
                state.data.push('\n');
            }
            state.data.push_str(value);
            state.has_data = true;
        }
        _ => {}
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out: Vec<SseEvent> = chunks.iter().flat_map(|c| d.feed(c)).collect();
        out.extend(d.finish());
        out
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
    fn unterminated_event_is_dropped() {
        assert!(all(&[b"data: partial"]).is_empty());
    }
}
