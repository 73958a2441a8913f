//! JSONL framing of stdin, exactly as pi's RPC reference requires: records end at LF only; one
//! trailing CR is stripped; U+2028/U+2029 and lone CRs are ordinary payload; an unterminated
//! last line is still a record; empty lines are records too (they get a parse error).
//!
//! Written by hand because generic line readers either split on Unicode separators or
//! require UTF-8, and the bytes must reach the JSON parser untouched.

use std::io::{self, BufRead};

/// Iterates over the records of a byte stream.
pub struct LineReader<R> {
    inner: R,
    done: bool,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(inner: R) -> Self {
        Self { inner, done: false }
    }
}

impl<R: BufRead> Iterator for LineReader<R> {
    type Item = io::Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut line = Vec::new();
        match self.inner.read_until(b'\n', &mut line) {
            Ok(0) => {
                self.done = true;
                None
            }
            Ok(_) => {
                if line.last() == Some(&b'\n') {
                    line.pop();
                } else {
                    // An unterminated last line: deliver it, then stop.
                    self.done = true;
                }
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                Some(Ok(line))
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => self.next(),
            Err(err) => {
                self.done = true;
                Some(Err(err))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8]) -> Vec<Vec<u8>> {
        LineReader::new(input).map(|l| l.unwrap()).collect()
    }

    #[test]
    fn splits_on_lf_only_and_strips_one_cr() {
        let input = "a\r\nb\u{2028}c\n\nd\re\n\r\r\nlast".as_bytes();
        let got = lines(input);
        let want: Vec<Vec<u8>> = vec![
            b"a".to_vec(),
            "b\u{2028}c".as_bytes().to_vec(),
            b"".to_vec(),
            b"d\re".to_vec(),
            b"\r".to_vec(),
            b"last".to_vec(),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn trailing_newline_adds_no_record() {
        assert_eq!(lines(b"x\n"), vec![b"x".to_vec()]);
        assert!(lines(b"").is_empty());
    }

    #[test]
    fn invalid_utf8_passes_through() {
        assert_eq!(lines(b"\xff\xfe\n"), vec![vec![0xff, 0xfe]]);
    }
}
