//! Output limits shared by the tools (tools-resources §1.0.3): at most 2000 lines and 50 KiB.
//! `read`, `grep`, `find` and `ls` keep the head; `bash` keeps the tail. Lines are counted as
//! pi 0.79 counts them: split on `\n`, a trailing newline adds no line, empty text has none
//! (pi 0.73, which the spec describes, counted one more).

use tau_protocol::{TruncatedBy, Truncation};

pub const DEFAULT_MAX_LINES: usize = 2000;
pub const DEFAULT_MAX_BYTES: usize = 51_200;
pub const GREP_MAX_LINE_LENGTH: usize = 500;

/// `formatSize`: `512B`, `50.0KB`, `1.5MB`, rounded like JavaScript's `toFixed(1)` (ties
/// up, so 1280 bytes is `1.3KB`).
pub fn format_size(bytes: usize) -> String {
    let one_decimal = |value: f64| format!("{:.1}", (value * 10.0).round() / 10.0);
    if bytes < 1024 {
        format!("{bytes}B")
    } else if bytes < 1024 * 1024 {
        format!("{}KB", one_decimal(bytes as f64 / 1024.0))
    } else {
        format!("{}MB", one_decimal(bytes as f64 / (1024.0 * 1024.0)))
    }
}

/// pi 0.79's `splitLinesForCounting`.
fn counted_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut lines: Vec<&str> = text.split('\n').collect();
    if text.ends_with('\n') {
        lines.pop();
    }
    lines
}

fn untouched(text: &str, lines: usize, max_lines: usize, max_bytes: usize) -> Truncation {
    Truncation {
        content: text.to_string(),
        truncated: false,
        truncated_by: None,
        total_lines: lines,
        total_bytes: text.len(),
        output_lines: lines,
        output_bytes: text.len(),
        last_line_partial: false,
        first_line_exceeds_limit: false,
        max_lines,
        max_bytes,
    }
}

/// Keeps whole lines from the start. If the first line alone is over the byte limit, the
/// content is empty and `first_line_exceeds_limit` is set.
pub fn truncate_head(text: &str, max_lines: usize, max_bytes: usize) -> Truncation {
    let lines = counted_lines(text);
    if lines.len() <= max_lines && text.len() <= max_bytes {
        return untouched(text, lines.len(), max_lines, max_bytes);
    }
    let mut t = untouched(text, lines.len(), max_lines, max_bytes);
    t.truncated = true;
    if lines.first().is_some_and(|l| l.len() > max_bytes) {
        t.content = String::new();
        t.truncated_by = Some(TruncatedBy::Bytes);
        t.output_lines = 0;
        t.output_bytes = 0;
        t.first_line_exceeds_limit = true;
        return t;
    }
    let mut kept = 0;
    let mut bytes = 0;
    let mut by = TruncatedBy::Lines;
    for (i, line) in lines.iter().enumerate().take(max_lines) {
        let cost = line.len() + usize::from(i > 0);
        if bytes + cost > max_bytes {
            by = TruncatedBy::Bytes;
            break;
        }
        bytes += cost;
        kept += 1;
    }
    if kept >= max_lines && bytes <= max_bytes {
        by = TruncatedBy::Lines;
    }
    t.content = lines[..kept].join("\n");
    t.truncated_by = Some(by);
    t.output_lines = kept;
    t.output_bytes = t.content.len();
    t
}

/// Keeps whole lines from the end. If the last line alone is over the byte limit, its final
/// `max_bytes` (at a character boundary) are kept and `last_line_partial` is set.
pub fn truncate_tail(text: &str, max_lines: usize, max_bytes: usize) -> Truncation {
    let lines = counted_lines(text);
    if lines.len() <= max_lines && text.len() <= max_bytes {
        return untouched(text, lines.len(), max_lines, max_bytes);
    }
    let mut t = untouched(text, lines.len(), max_lines, max_bytes);
    t.truncated = true;
    let mut kept: Vec<&str> = Vec::new();
    let mut bytes = 0;
    let mut by = TruncatedBy::Lines;
    let mut partial = None;
    for line in lines.iter().rev() {
        if kept.len() >= max_lines {
            break;
        }
        let cost = line.len() + usize::from(!kept.is_empty());
        if bytes + cost > max_bytes {
            by = TruncatedBy::Bytes;
            if kept.is_empty() {
                let mut start = line.len() - max_bytes;
                while !line.is_char_boundary(start) {
                    start += 1;
                }
                partial = Some(&line[start..]);
                t.last_line_partial = true;
            }
            break;
        }
        bytes += cost;
        kept.push(line);
    }
    if let Some(partial) = partial {
        kept.push(partial);
    }
    if kept.len() >= max_lines && bytes <= max_bytes {
        by = TruncatedBy::Lines;
    }
    kept.reverse();
    t.content = kept.join("\n");
    t.truncated_by = Some(by);
    t.output_lines = kept.len();
    t.output_bytes = t.content.len();
    t
}

/// `truncateLine`: at most `max` UTF-16 code units, then `... [truncated]`.
pub fn truncate_line(line: &str, max: usize) -> String {
    if line.encode_utf16().count() <= max {
        return line.to_string();
    }
    let mut units = 0;
    let mut end = 0;
    for (i, c) in line.char_indices() {
        if units + c.len_utf16() > max {
            break;
        }
        units += c.len_utf16();
        end = i + c.len_utf8();
    }
    format!("{}... [truncated]", &line[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(format_size(512), "512B");
        assert_eq!(format_size(51_200), "50.0KB");
        assert_eq!(format_size(60_000), "58.6KB");
        assert_eq!(format_size(3 * 1024 * 1024 / 2), "1.5MB");
        assert_eq!(format_size(1280), "1.3KB", "ties round up, as toFixed does");
    }

    #[test]
    fn head_by_lines_ignores_the_trailing_newline() {
        let text: String = (1..=3000).map(|i| format!("{i}\n")).collect();
        let t = truncate_head(&text, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
        assert_eq!(t.total_lines, 3000);
        assert!(t.truncated);
        assert_eq!(t.truncated_by, Some(TruncatedBy::Lines));
        assert_eq!(t.output_lines, 2000);
        assert!(t.content.starts_with("1\n2\n") && t.content.ends_with("\n2000"));
    }

    #[test]
    fn tail_by_lines_keeps_the_end() {
        let text: String = (1..=3000).map(|i| format!("{i}\n")).collect();
        let t = truncate_tail(&text, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
        assert_eq!(t.output_lines, 2000);
        assert!(t.content.starts_with("1001\n"), "{}", &t.content[..10]);
        assert!(
            t.content.ends_with("\n3000"),
            "kept lines joined, no trailing newline"
        );
    }

    #[test]
    fn byte_limits() {
        let line = "x".repeat(100);
        let text = vec![line.as_str(); 1000].join("\n");
        let t = truncate_head(&text, DEFAULT_MAX_LINES, 1000);
        assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
        assert_eq!(t.output_lines, 9);
        assert!(t.output_bytes <= 1000);
        let huge = "é".repeat(1000);
        let t = truncate_head(&huge, 10, 100);
        assert!(t.first_line_exceeds_limit && t.content.is_empty());
        let t = truncate_tail(&huge, 10, 101);
        assert!(t.last_line_partial);
        assert!(t.content.len() <= 101 && t.content.chars().all(|c| c == 'é'));
    }

    #[test]
    fn small_text_is_untouched() {
        let t = truncate_tail("a\nb\n", 10, 100);
        assert!(!t.truncated);
        assert_eq!(t.content, "a\nb\n");
        assert_eq!(t.total_lines, 2);
        assert_eq!(truncate_head("", 10, 100).total_lines, 0);
    }

    #[test]
    fn long_lines_are_cut_in_utf16_units() {
        assert_eq!(truncate_line("abc", 5), "abc");
        assert_eq!(truncate_line("abcdef", 3), "abc... [truncated]");
        assert_eq!(truncate_line("😀😀", 3), "😀... [truncated]");
    }
}
