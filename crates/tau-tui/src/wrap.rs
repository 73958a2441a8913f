//! Word wrapping of styled lines to a width, in terminal cells. The transcript is wrapped here,
//! not by ratatui's `Paragraph`, because the view needs every block's height to anchor the
//! conversation to the bottom and to scroll it, and keeps each block's wrapped lines cached.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// `line` broken into lines of at most `width` cells: at spaces where it can, inside a word
/// longer than the width where it must. Continuation lines start with `indent` (a hanging
/// indent for list items and quotes).
pub fn wrap_line(
    line: &Line<'static>,
    width: usize,
    indent: &[Span<'static>],
) -> Vec<Line<'static>> {
    let width = width.max(1);
    let indent_width: usize = indent.iter().map(|s| s.width()).sum();
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut current: Vec<Span<'static>> = Vec::new();
    let mut current_width = 0usize;
    // Characters of the word being gathered, with their styles (a word may change style).
    let mut word: Vec<(char, Style)> = Vec::new();
    let mut word_width = 0usize;

    let flush_word = |current: &mut Vec<Span<'static>>,
                      current_width: &mut usize,
                      out: &mut Vec<Line<'static>>,
                      word: &mut Vec<(char, Style)>,
                      word_width: &mut usize| {
        if word.is_empty() {
            return;
        }
        let line_start = if out.is_empty() { 0 } else { indent_width };
        if *current_width + *word_width > width && *current_width > line_start {
            // The word goes to the next line; trailing spaces of this one are dropped.
            trim_end(current);
            out.push(Line::from(std::mem::take(current)));
            current.extend(indent.iter().cloned());
            *current_width = indent_width;
        }
        for (ch, style) in word.drain(..) {
            let w = ch.width().unwrap_or(0);
            let line_start = if out.is_empty() { 0 } else { indent_width };
            if *current_width + w > width && *current_width > line_start {
                out.push(Line::from(std::mem::take(current)));
                current.extend(indent.iter().cloned());
                *current_width = indent_width;
            }
            push_char(current, ch, style);
            *current_width += w;
        }
        *word_width = 0;
    };

    for span in &line.spans {
        let style = line.style.patch(span.style);
        for ch in span.content.chars() {
            if ch == ' ' {
                flush_word(
                    &mut current,
                    &mut current_width,
                    &mut out,
                    &mut word,
                    &mut word_width,
                );
                if current_width < width {
                    push_char(&mut current, ' ', style);
                    current_width += 1;
                }
            } else {
                word.push((ch, style));
                word_width += ch.width().unwrap_or(0);
            }
        }
    }
    flush_word(
        &mut current,
        &mut current_width,
        &mut out,
        &mut word,
        &mut word_width,
    );
    out.push(Line::from(current));
    out
}

fn push_char(spans: &mut Vec<Span<'static>>, ch: char, style: Style) {
    if let Some(last) = spans.last_mut()
        && last.style == style
    {
        last.content.to_mut().push(ch);
        return;
    }
    spans.push(Span::styled(ch.to_string(), style));
}

fn trim_end(spans: &mut Vec<Span<'static>>) {
    while let Some(last) = spans.last_mut() {
        let trimmed = last.content.trim_end_matches(' ').len();
        if trimmed == 0 {
            spans.pop();
        } else {
            last.content.to_mut().truncate(trimmed);
            break;
        }
    }
}

/// The plain text of a line (for tests and copying).
pub fn plain(line: &Line<'_>) -> String {
    line.spans.iter().map(|s| s.content.as_ref()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrapped(text: &str, width: usize) -> Vec<String> {
        wrap_line(&Line::from(text.to_string()), width, &[])
            .iter()
            .map(plain)
            .collect()
    }

    #[test]
    fn breaks_at_spaces_within_the_width() {
        assert_eq!(
            wrapped("one two three four", 9),
            ["one two", "three", "four"]
        );
    }

    #[test]
    fn a_word_longer_than_the_width_is_cut() {
        assert_eq!(wrapped("abcdefghij", 4), ["abcd", "efgh", "ij"]);
    }

    #[test]
    fn wide_characters_count_two_cells() {
        assert_eq!(wrapped("日本語です", 4), ["日本", "語で", "す"]);
    }

    #[test]
    fn continuation_lines_get_the_indent() {
        let lines = wrap_line(
            &Line::from("- alpha beta gamma".to_string()),
            10,
            &[Span::raw("  ")],
        );
        let text: Vec<String> = lines.iter().map(plain).collect();
        assert_eq!(text, ["- alpha", "  beta", "  gamma"]);
    }

    #[test]
    fn every_line_fits() {
        let text = "the quick brown fox jumps over the lazy dog again and again";
        for width in 1..30 {
            for line in wrap_line(&Line::from(text.to_string()), width, &[]) {
                assert!(line.width() <= width, "{width}: {:?}", plain(&line));
            }
        }
    }
}
