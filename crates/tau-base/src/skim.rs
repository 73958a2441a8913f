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

    fn bytes(&self) -> &'a [u8] {
        self.src.as_bytes()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.bytes().get(self.pos).copied()
    }

    fn expect(&mut self, byte: u8) -> Skim<()> {
        if self.peek() != Some(byte) {
            return Err(Unreadable);
        }
        self.pos += 1;
        Ok(())
    }

    /// True (and consumed) when the next value is `null`.
    pub fn null(&mut self) -> bool {
        if self.peek() == Some(b'n') && self.bytes().get(self.pos..self.pos + 4) == Some(b"null") {
            self.pos += 4;
            return true;
        }
        false
    }

    /// Just after an opening quote: moves past the closing quote and says whether the string
    /// had escapes.
    fn string_body(&mut self) -> Skim<bool> {
        let bytes = self.bytes();
        let mut pos = self.pos;
        let mut escaped = false;
        // Keys and deltas are short: a plain loop beats memchr's dispatch on the first
        // bytes; memchr wins on long strings.
        let short_end = bytes.len().min(pos + 24);
        while pos < short_end {
            match bytes[pos] {
                b'"' => {
                    self.pos = pos + 1;
                    return Ok(escaped);
                }
                b'\\' => {
                    escaped = true;
                    pos += 2;
                }
                _ => pos += 1,
            }
        }
        loop {
            let rest = bytes.get(pos..).ok_or(Unreadable)?;
            pos += memchr::memchr2(b'"', b'\\', rest).ok_or(Unreadable)?;
            if bytes[pos] == b'"' {
                self.pos = pos + 1;
                return Ok(escaped);
            }
            escaped = true;
            pos += 2;
        }
    }

    /// Just after an opening quote: moves past the closing quote. Long texts (file contents,
    /// code) are full of escapes, which would restart a search for quote-or-backslash every
    /// few dozen bytes; this searches for quotes alone and counts the backslashes before
    /// each to tell an escaped one.
    fn skip_string_body(&mut self) -> Skim<()> {
        let bytes = self.bytes();
        let start = self.pos;
        let short_end = bytes.len().min(start + 24);
        let mut pos = start;
        while pos < short_end {
            match bytes[pos] {
                b'"' => {
                    self.pos = pos + 1;
                    return Ok(());
                }
                b'\\' => break,
                _ => pos += 1,
            }
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
        let escaped = self.string_body()?;
        let body = self.src.get(start..self.pos - 1).ok_or(Unreadable)?;
        if escaped {
            let quoted = self.src.get(start - 1..self.pos).ok_or(Unreadable)?;
            return serde_json::from_str::<String>(quoted)
                .map(|s| Some(Cow::Owned(s)))
                .map_err(|_| Unreadable);
        }
        // JSON forbids raw control characters inside strings; leave those to serde_json.
        if body.bytes().any(|b| b < 0x20) {
            return Err(Unreadable);
        }
        Ok(Some(Cow::Borrowed(body)))
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
            if self.string_body()? {
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
    }
}
