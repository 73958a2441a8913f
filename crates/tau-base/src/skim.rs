//! A JSON skimmer for hot paths (streaming chunks, session-file lines): a cursor that
//! descends into the members a reader asks for and steps over everything else, without
//! building anything.
//!
//! Why by hand: a streaming chunk is ~200 bytes of which a reply needs one short string, and
//! `serde_json` spends ~5,000 instructions per chunk deserialising the fields that are thrown
//! away (measured with callgrind; a third of all work at 20,000 deltas). No maintained crate
//! offers a cheaper lazy walk (`sonic-rs`'s lazy iterators measured slower still). The
//! skimmer is deliberately partial: whatever it is not sure of (a malformed document, a value
//! of an unexpected type, an escaped key) makes the caller fall back to `serde_json`, which
//! then also produces the error message. Values the reader does not ask for are only stepped
//! over, so some malformed *ignored* values pass that `serde_json` would reject; providers do
//! not send those, and nothing that is read is ever guessed.

use std::borrow::Cow;

/// The document is not what the skimmer can read; the caller falls back to `serde_json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable;

pub type Skim<T> = Result<T, Unreadable>;

/// A position in a JSON document; every method consumes exactly one value.
pub struct Cursor<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(src: &'a str) -> Self {
        Cursor { src, pos: 0 }
    }

    /// Reads a whole document whose top level `read` consumes; trailing text is refused.
    pub fn document<T>(src: &'a str, read: impl FnOnce(&mut Self) -> Skim<T>) -> Skim<T> {
        let mut cursor = Cursor::new(src);
        let value = read(&mut cursor)?;
        cursor.skip_ws();
        if cursor.pos != src.len() {
            return Err(Unreadable);
        }
        Ok(value)
    }

    #[inline]
    fn bytes(&self) -> &'a [u8] {
        self.src.as_bytes()
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.pos) {
            self.pos += 1;
        }
    }

    #[inline]
    fn peek(&mut self) -> Option<u8> {
        // Providers send compact JSON: the next byte is nearly always the value itself.
        let next = *self.bytes().get(self.pos)?;
        if next > b' ' {
            return Some(next);
        }
        self.skip_ws();
        self.bytes().get(self.pos).copied()
    }

    #[inline]
    fn expect(&mut self, byte: u8) -> Skim<()> {
        if self.peek() != Some(byte) {
            return Err(Unreadable);
        }
        self.pos += 1;
        Ok(())
    }

    /// True (and consumed) when the next value is `null`.
    #[inline]
    pub fn null(&mut self) -> bool {
        if self.peek() == Some(b'n') && self.bytes().get(self.pos..self.pos + 4) == Some(b"null") {
            self.pos += 4;
            return true;
        }
        false
    }

    /// Just after an opening quote: moves past the closing quote and says what the string
    /// holds besides plain characters.
    #[inline]
    fn string_body(&mut self) -> Skim<Body> {
        let bytes = self.bytes();
        let mut pos = self.pos;
        let mut body = Body::default();
        loop {
            pos = next_special(bytes, pos).ok_or(Unreadable)?;
            match bytes.get(pos) {
                Some(b'"') => {
                    self.pos = pos + 1;
                    return Ok(body);
                }
                Some(b'\\') => {
                    body.escaped = true;
                    pos += 2;
                }
                _ => {
                    body.control = true;
                    pos += 1;
                }
            }
        }
    }

    /// Just after an opening quote: moves past the closing quote. Long texts (file contents,
    /// code) are full of escapes, which would restart a search for quote-or-backslash every
    /// few dozen bytes; this searches for quotes alone and counts the backslashes before
    /// each to tell an escaped one.
    fn skip_string_body(&mut self) -> Skim<()> {
        let bytes = self.bytes();
        let start = self.pos;
        // Most skipped strings (keys, ids, object names) are short and plain: a few words
        // settle them before memchr's set-up would pay off.
        let mut pos = start;
        while pos < start + 32 {
            let Some(word) = word_at(bytes, pos) else {
                break;
            };
            let found = quote_or_backslash(word);
            if found != 0 {
                let at = pos + (found.trailing_zeros() / 8) as usize;
                if bytes.get(at) == Some(&b'"') {
                    self.pos = at + 1;
                    return Ok(());
                }
                pos = at;
                break;
            }
            pos += 8;
        }
        loop {
            let rest = bytes.get(pos..).ok_or(Unreadable)?;
            let quote = pos + memchr::memchr(b'"', rest).ok_or(Unreadable)?;
            let backslashes = bytes
                .get(start..quote)
                .unwrap_or_default()
                .iter()
                .rev()
                .take_while(|&&b| b == b'\\')
                .count();
            if backslashes % 2 == 0 {
                self.pos = quote + 1;
                return Ok(());
            }
            pos = quote + 1;
        }
    }

    /// A string or `null`.
    pub fn string(&mut self) -> Skim<Option<Cow<'a, str>>> {
        if self.null() {
            return Ok(None);
        }
        self.expect(b'"')?;
        let start = self.pos;
        let body = self.string_body()?;
        // JSON forbids raw control characters inside strings; leave those to serde_json.
        if body.control {
            return Err(Unreadable);
        }
        if body.escaped {
            let quoted = self.src.get(start - 1..self.pos).ok_or(Unreadable)?;
            return serde_json::from_str::<String>(quoted)
                .map(|s| Some(Cow::Owned(s)))
                .map_err(|_| Unreadable);
        }
        let text = self.src.get(start..self.pos - 1).ok_or(Unreadable)?;
        Ok(Some(Cow::Borrowed(text)))
    }

    /// Steps over one value of any kind.
    pub fn skip(&mut self) -> Skim<()> {
        match self.peek() {
            Some(b'"') => {
                self.pos += 1;
                self.skip_string_body()
            }
            Some(b'{' | b'[') => {
                let bytes = self.bytes();
                let mut depth = 0usize;
                loop {
                    match bytes.get(self.pos) {
                        None => return Err(Unreadable),
                        Some(b'"') => {
                            self.pos += 1;
                            self.skip_string_body()?;
                        }
                        Some(b'{' | b'[') => {
                            depth += 1;
                            self.pos += 1;
                        }
                        Some(b'}' | b']') => {
                            depth -= 1;
                            self.pos += 1;
                            if depth == 0 {
                                return Ok(());
                            }
                        }
                        Some(_) => self.pos += 1,
                    }
                }
            }
            Some(b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
                self.pos += 1;
                while let Some(b) = self.bytes().get(self.pos) {
                    if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.pos += 1;
                }
                Ok(())
            }
            _ => Err(Unreadable),
        }
    }

    /// Byte offset of the next value (after whitespace) in the document.
    pub fn position(&mut self) -> usize {
        self.skip_ws();
        self.pos
    }

    /// Steps over one value and returns its raw text.
    pub fn raw(&mut self) -> Skim<&'a str> {
        self.skip_ws();
        let start = self.pos;
        self.skip()?;
        self.src.get(start..self.pos).ok_or(Unreadable)
    }

    /// An object, or `null` (then `member` is never called and the result is false).
    /// `member` gets each key and must consume its value.
    pub fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Skim<()>) -> Skim<bool> {
        if self.null() {
            return Ok(false);
        }
        self.expect(b'{')?;
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(true);
        }
        loop {
            self.expect(b'"')?;
            let start = self.pos;
            if self.string_body()?.escaped {
                // Keys the hot path reads never need escapes; leave the rare escaped key to
                // serde_json.
                return Err(Unreadable);
            }
            let key = self.src.get(start..self.pos - 1).ok_or(Unreadable)?;
            self.expect(b':')?;
            member(self, key)?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(true);
                }
                _ => return Err(Unreadable),
            }
        }
    }

    /// An array, or `null` (then the result is false). `element` gets each index and must
    /// consume the element.
    pub fn array(&mut self, mut element: impl FnMut(&mut Self, usize) -> Skim<()>) -> Skim<bool> {
        if self.null() {
            return Ok(false);
        }
        self.expect(b'[')?;
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(true);
        }
        let mut index = 0;
        loop {
            element(self, index)?;
            index += 1;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(true);
                }
                _ => return Err(Unreadable),
            }
        }
    }
}

/// What a string's body holds besides plain characters.
#[derive(Debug, Default, Clone, Copy)]
struct Body {
    /// A backslash escape.
    escaped: bool,
    /// A raw control character, which JSON forbids.
    control: bool,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The eight bytes at `pos`, the first in the lowest bits.
#[inline]
fn word_at(bytes: &[u8], pos: usize) -> Option<u64> {
    let eight: [u8; 8] = bytes.get(pos..pos.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(eight))
}

/// The high bit of every byte of `word` that is zero. A byte is only marked wrongly above a
/// zero byte (the subtraction borrows from it), so the lowest mark is always right: the
/// scans below only ever act on the lowest.
#[inline]
fn zero_bytes(word: u64) -> u64 {
    word.wrapping_sub(ONES) & !word & HIGHS
}

/// Marks the quotes and backslashes of `word` (the lowest mark exact, see [`zero_bytes`]).
#[inline]
fn quote_or_backslash(word: u64) -> u64 {
    zero_bytes(word ^ (ONES * u64::from(b'"'))) | zero_bytes(word ^ (ONES * u64::from(b'\\')))
}

/// From `pos` inside a string, where the next quote, backslash or control character is.
/// Eight bytes at a time: a reply's deltas and the keys around them are a few bytes long,
/// too short for memchr's set-up, and a byte loop costs several instructions a byte.
#[inline]
fn next_special(bytes: &[u8], mut pos: usize) -> Option<usize> {
    while let Some(word) = word_at(bytes, pos) {
        // Bytes below 0x20, marked like `zero_bytes` marks zeros (the lowest mark exact).
        let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
        let found = quote_or_backslash(word) | control;
        if found != 0 {
            return Some(pos + (found.trailing_zeros() / 8) as usize);
        }
        pos += 8;
    }
    let rest = bytes.get(pos..)?;
    rest.iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|at| pos + at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(src: &str) -> Skim<Vec<(String, String)>> {
        let mut out = Vec::new();
        Cursor::document(src, |c| {
            c.object(|c, key| {
                out.push((key.to_string(), c.raw()?.to_string()));
                Ok(())
            })
        })?;
        Ok(out)
    }

    #[test]
    fn walks_members_with_raw_values() {
        let got = members(r#" {"a" : 1, "b":{"c":[1,"]}"]}, "d":"x\"y", "e":null} "#);
        assert_eq!(
            got,
            Ok(vec![
                ("a".into(), "1".into()),
                ("b".into(), r#"{"c":[1,"]}"]}"#.into()),
                ("d".into(), r#""x\"y""#.into()),
                ("e".into(), "null".into()),
            ])
        );
        assert_eq!(members("{}"), Ok(vec![]));
    }

    #[test]
    fn malformed_documents_are_unreadable() {
        for bad in [
            "",
            "[]",
            r#"{"a":1"#,
            r#"{"a":1}x"#,
            r#"{"a" 1}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"a":"x}"#,
            r#"{"a\u0062":1}"#,
            r#"{"a":}"#,
            r#"{"a":1,}"#,
        ] {
            assert_eq!(members(bad).map(|_| ()), Err(Unreadable), "{bad}");
        }
    }

    #[test]
    fn strings_borrow_unless_escaped() {
        let read = |src| Cursor::document(src, |c| c.string());
        assert!(matches!(read(r#""abc""#), Ok(Some(Cow::Borrowed("abc")))));
        assert_eq!(
            read(r#""a\nb\u2028""#),
            Ok(Some(Cow::Owned("a\nb\u{2028}".to_string())))
        );
        assert_eq!(read("null"), Ok(None));
        assert_eq!(read("1"), Err(Unreadable));
        assert_eq!(read("\"a\u{1}\""), Err(Unreadable));
        let mut firsts = Vec::new();
        let walked = Cursor::document("[ {\"a\":1} , 2]", |c| {
            c.array(|c, _| {
                firsts.push(c.raw()?.to_string());
                Ok(())
            })
        });
        assert_eq!(walked, Ok(true));
        assert_eq!(firsts, ["{\"a\":1}", "2"]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Stepping over strings full of quotes and backslashes ends exactly where
        /// serde_json's encoding of them ends, and no strict prefix of a document reads.
        #[test]
        fn skipped_strings_end_where_they_end(
            texts in proptest::collection::vec("[a\"\\\\\n\u{e9}x]{0,40}", 1..4)
        ) {
            let encoded: Vec<String> = texts
                .iter()
                .map(|t| serde_json::to_string(t).unwrap_or_default())
                .collect();
            let src = format!(r#"{{"a":[{}],"b":{},"c":1}}"#, encoded.join(","), encoded[0]);
            let got = members(&src);
            proptest::prop_assert_eq!(
                got,
                Ok(vec![
                    ("a".to_string(), format!("[{}]", encoded.join(","))),
                    ("b".to_string(), encoded[0].clone()),
                    ("c".to_string(), "1".to_string()),
                ])
            );
            for cut in (0..src.len()).filter(|&i| src.is_char_boundary(i)) {
                proptest::prop_assert_eq!(members(&src[..cut]).map(|_| ()), Err(Unreadable));
            }
        }

        /// The word-at-a-time string scan reads what serde_json reads, whatever the length
        /// (words and the byte tail) and wherever the quotes, escapes, control characters
        /// and multi-byte characters fall; it declines what serde_json refuses.
        #[test]
        fn strings_read_as_serde_reads_them(
            raw in "[a\"\\\\\u{1}\u{1f}\n\u{7f}\u{e9}\u{2028}x/]{0,40}",
            pad in 0usize..9,
        ) {
            let read = |src: &str| Cursor::document(src, |c| c.string()).map(|s| s.map(Cow::into_owned));
            // Any text, encoded: read back exactly.
            let encoded = format!("{}{}", " ".repeat(pad), serde_json::to_string(&raw).unwrap_or_default());
            proptest::prop_assert_eq!(read(&encoded), Ok(Some(raw.clone())));
            // The same characters taken as a string's raw body: valid JSON or not.
            let src = format!("{}\"{raw}\"", " ".repeat(pad));
            match serde_json::from_str::<String>(&src) {
                Ok(text) => proptest::prop_assert_eq!(read(&src), Ok(Some(text)), "{}", src),
                Err(_) => proptest::prop_assert_eq!(read(&src), Err(Unreadable), "{}", src),
            }
        }
    }
}
