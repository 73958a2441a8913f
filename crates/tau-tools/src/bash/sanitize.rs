//! Cleaning command output for the RPC `bash` command (rpc §10.1): ANSI escape sequences
//! removed, control characters other than TAB and LF dropped, U+FFF9–U+FFFB dropped, and
//! every CR deleted.
//!
//! The escape matcher follows the pattern pi uses (`ansi-regex`): an OSC sequence
//! `ESC ] … ST` (ST = BEL, `ESC \` or U+009C), or `ESC`/U+009B, then any of `[]()#;?`, then
//! optional numeric parameters (`\d{1,4}` followed by `[;:]\d{0,4}` groups), then one final
//! character. pi applies it to each chunk separately; here a sequence split between two reads
//! is held back until it is complete, so it is removed as a whole.

/// A sequence still open after this many bytes is decided on what has arrived, so a stray
/// `ESC ]` cannot make the sanitiser hold output back indefinitely.
const MAX_HELD_BACK: usize = 8 * 1024;

#[derive(Debug, Default)]
pub(crate) struct Sanitizer {
    held: String,
}

enum Escape {
    /// The sequence ends before this byte index.
    Match(usize),
    /// Not an escape sequence: the introducer is an ordinary (dropped) character.
    NoMatch,
    /// More input could change the answer.
    Incomplete,
}

impl Sanitizer {
    pub(crate) fn push(&mut self, text: &str, out: &mut String) {
        self.run(text, out, false);
    }

    /// Decides whatever was held back, at the end of the stream.
    pub(crate) fn finish(&mut self, out: &mut String) {
        self.run("", out, true);
    }

    fn run(&mut self, text: &str, out: &mut String, at_end: bool) {
        let joined;
        let s = if self.held.is_empty() {
            text
        } else {
            self.held.push_str(text);
            joined = std::mem::take(&mut self.held);
            joined.as_str()
        };
        let mut kept_from = 0;
        let mut i = 0;
        while let Some(c) = s[i..].chars().next() {
            if c == '\u{1b}' || c == '\u{9b}' {
                let decide_now = at_end || s.len() - i > MAX_HELD_BACK;
                match escape_at(s, i, c.len_utf8(), decide_now) {
                    Escape::Match(end) => {
                        out.push_str(&s[kept_from..i]);
                        i = end;
                        kept_from = end;
                        continue;
                    }
                    Escape::Incomplete => {
                        out.push_str(&s[kept_from..i]);
                        self.held.push_str(&s[i..]);
                        return;
                    }
                    Escape::NoMatch => {}
                }
            }
            let next = i + c.len_utf8();
            if !keep(c) {
                out.push_str(&s[kept_from..i]);
                kept_from = next;
            }
            i = next;
        }
        out.push_str(&s[kept_from..]);
    }
}

fn keep(c: char) -> bool {
    match c {
        '\t' | '\n' => true,
        // pi keeps CR in this step and deletes every CR right after.
        '\r' => false,
        c if (c as u32) <= 0x1f => false,
        '\u{FFF9}'..='\u{FFFB}' => false,
        _ => true,
    }
}

fn is_final(b: u8) -> bool {
    matches!(b, b'0'..=b'9' | b'A'..=b'P' | b'R'..=b'T' | b'Z' | b'c' | b'f'..=b'n' | b'q'..=b'u' | b'y' | b'=' | b'>' | b'<' | b'~')
}

/// How many ASCII digits start at `from`, counting at most 5 (more than 4 ends a parameter).
fn digits(b: &[u8], from: usize) -> usize {
    b[from.min(b.len())..]
        .iter()
        .take(5)
        .take_while(|c| c.is_ascii_digit())
        .count()
}

/// Matches an escape sequence whose introducer (`intro` bytes long) is at `i`. With
/// backtracking the pattern prefers the longest parameter run that is followed by a final
/// character, which is what the loop over `ends` reproduces.
fn escape_at(s: &str, i: usize, intro: usize, at_end: bool) -> Escape {
    let b = s.as_bytes();
    if b[i] == 0x1b {
        match b.get(i + 1) {
            None if !at_end => return Escape::Incomplete,
            None => return Escape::NoMatch,
            Some(b']') => {
                let mut j = i + 2;
                while j < b.len() {
                    match (b[j], b.get(j + 1)) {
                        (0x07, _) => return Escape::Match(j + 1),
                        (0x1b, Some(b'\\')) | (0xc2, Some(0x9c)) => return Escape::Match(j + 2),
                        _ => j += 1,
                    }
                }
                if !at_end {
                    return Escape::Incomplete;
                }
                // Unterminated: the CSI form below may still match (`]` is an intermediate).
            }
            Some(_) => {}
        }
    }
    let mut p = i + intro;
    while p < b.len() && matches!(b[p], b'[' | b']' | b'(' | b')' | b'#' | b';' | b'?') {
        p += 1;
    }
    if p == b.len() {
        return if at_end {
            Escape::NoMatch
        } else {
            Escape::Incomplete
        };
    }
    let mut ends = vec![p];
    let mut reached_end = false;
    let d = digits(b, p);
    if d > 0 {
        ends.extend((1..=d.min(4)).map(|k| p + k));
        if d < 5 && p + d == b.len() {
            reached_end = true;
        } else if d <= 4 {
            let mut q = p + d;
            loop {
                if q == b.len() {
                    reached_end = true;
                    break;
                }
                if b[q] != b';' && b[q] != b':' {
                    break;
                }
                q += 1;
                ends.push(q);
                let e = digits(b, q);
                ends.extend((1..=e.min(4)).map(|k| q + k));
                if e < 5 && q + e == b.len() {
                    reached_end = true;
                    break;
                }
                if e > 4 {
                    break;
                }
                q += e;
            }
        }
    }
    if reached_end && !at_end {
        return Escape::Incomplete;
    }
    ends.iter()
        .rev()
        .find(|&&e| e < b.len() && is_final(b[e]))
        .map_or(Escape::NoMatch, |&e| Escape::Match(e + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(chunks: &[&str]) -> String {
        let mut s = Sanitizer::default();
        let mut out = String::new();
        for chunk in chunks {
            s.push(chunk, &mut out);
        }
        s.finish(&mut out);
        out
    }

    #[test]
    fn strips_colours_controls_and_carriage_returns() {
        assert_eq!(clean(&["\x1b[31mred\x1b[0m\r\n"]), "red\n");
        assert_eq!(clean(&["a\x01b\x7f\tc\u{FFFA}d"]), "ab\x7f\tcd");
        assert_eq!(clean(&["\u{9b}2Jx"]), "x");
    }

    #[test]
    fn osc_sequences_end_at_any_terminator() {
        assert_eq!(clean(&["\x1b]0;title\x07after"]), "after");
        assert_eq!(clean(&["\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"]), "link");
        assert_eq!(clean(&["\x1b]2;t\u{9c}z"]), "z");
    }

    #[test]
    fn matches_like_the_regex_does() {
        // `x` is not a final character, so the match backs off to `ESC[1;2`.
        assert_eq!(clean(&["\x1b[1;2x"]), "x");
        // At most four digits per parameter; a fifth digit is the final character.
        assert_eq!(clean(&["\x1b[123456"]), "6");
        // An unterminated OSC falls back to the CSI form: `ESC ] 0 ; t` is a sequence.
        assert_eq!(clean(&["\x1b]0;title"]), "itle");
        // A lone ESC is just a dropped control character.
        assert_eq!(clean(&["a\x1b"]), "a");
    }

    #[test]
    fn sequences_split_between_reads_are_removed_whole() {
        assert_eq!(clean(&["a\x1b", "[3", "1m", "b"]), "ab");
        assert_eq!(clean(&["x\x1b]0;ti", "tle\x07y"]), "xy");
        assert_eq!(clean(&["\x1b[1;", "2", "x"]), "x");
    }
}
