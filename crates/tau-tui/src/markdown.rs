//! The model's Markdown as styled terminal lines (pulldown-cmark's events): headings, emphasis,
//! inline code, code blocks, lists, quotes, rules, links and tables. Lines come out unwrapped,
//! each with the hanging indent its continuation lines take; `wrap` fits them to the width.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use crate::theme::Theme;

/// One rendered line and the indent its wrapped continuation takes.
pub struct MdLine {
    pub line: Line<'static>,
    pub indent: Vec<Span<'static>>,
    /// A code block's line: never re-flowed, cut at the width instead.
    pub verbatim: bool,
}

/// Renders `text` as Markdown.
pub fn render(text: &str, theme: &Theme) -> Vec<MdLine> {
    let mut r = Renderer {
        theme,
        out: Vec::new(),
        spans: Vec::new(),
        styles: vec![Style::default()],
        lists: Vec::new(),
        quote: 0,
        code: None,
        code_text: String::new(),
        link: None,
        table: None,
        pending_item: None,
    };
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(text, options) {
        r.event(event);
    }
    r.flush_line();
    // No blank line (or bare quote bar) at the end of the block.
    while r.out.last().is_some_and(|l| {
        l.line
            .spans
            .iter()
            .all(|s| s.content.trim_matches([' ', '│']).is_empty())
    }) {
        r.out.pop();
    }
    r.out
}

struct Table {
    rows: Vec<Vec<String>>,
    cell: String,
    row: Vec<String>,
}

struct Renderer<'t> {
    theme: &'t Theme,
    out: Vec<MdLine>,
    spans: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// The open lists: the next number of an ordered one, `None` for bullets.
    lists: Vec<Option<u64>>,
    quote: usize,
    /// Inside a fenced or indented code block: its language.
    code: Option<String>,
    /// The code block's text so far (drawn whole at its end, highlighted).
    code_text: String,
    link: Option<String>,
    table: Option<Table>,
    /// The marker of a list item whose first line has not started yet.
    pending_item: Option<String>,
}

impl Renderer<'_> {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, patch: Style) {
        let style = self.style().patch(patch);
        self.styles.push(style);
    }

    fn pop_style(&mut self) {
        if self.styles.len() > 1 {
            self.styles.pop();
        }
    }

    /// What every line of the current block starts with: quote bars and list indentation.
    fn prefix(&self) -> Vec<Span<'static>> {
        let mut prefix = Vec::new();
        for _ in 0..self.quote {
            prefix.push(Span::styled("│ ", self.theme.quote));
        }
        if !self.lists.is_empty() {
            prefix.push(Span::raw("  ".repeat(self.lists.len() - 1)));
        }
        prefix
    }

    fn start_line(&mut self) {
        if self.spans.is_empty() {
            self.spans = self.prefix();
            if let Some(marker) = self.pending_item.take() {
                self.spans.push(Span::styled(marker, self.theme.bullet));
            }
        }
    }

    fn text(&mut self, text: &str) {
        self.start_line();
        let style = self.style();
        self.spans.push(Span::styled(text.to_string(), style));
    }

    fn flush_line(&mut self) {
        if self.spans.is_empty() && self.pending_item.is_none() {
            return;
        }
        self.start_line();
        let mut indent = self.prefix();
        if !self.lists.is_empty() {
            indent.push(Span::raw("  "));
        }
        let line = Line::from(std::mem::take(&mut self.spans));
        self.out.push(MdLine {
            line,
            indent,
            verbatim: false,
        });
    }

    fn blank(&mut self) {
        self.flush_line();
        if self
            .out
            .last()
            .is_some_and(|l| l.line.width() > 0 || !l.indent.is_empty())
        {
            let prefix = self.prefix();
            self.out.push(MdLine {
                line: Line::from(prefix),
                indent: Vec::new(),
                verbatim: false,
            });
        }
    }

    fn event(&mut self, event: Event<'_>) {
        if let Some(table) = &mut self.table {
            match event {
                Event::Text(t) | Event::Code(t) => {
                    table.cell.push_str(&t);
                    return;
                }
                Event::End(TagEnd::TableCell) => {
                    let cell = std::mem::take(&mut table.cell);
                    table.row.push(cell.trim().to_string());
                    return;
                }
                Event::End(TagEnd::TableHead | TagEnd::TableRow) => {
                    let row = std::mem::take(&mut table.row);
                    table.rows.push(row);
                    return;
                }
                Event::End(TagEnd::Table) => {
                    self.end_table();
                    return;
                }
                _ => return,
            }
        }
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => {
                if self.code.is_some() {
                    self.code_text.push_str(&text);
                } else {
                    self.text(&text);
                }
            }
            Event::Code(code) => {
                self.start_line();
                self.spans
                    .push(Span::styled(code.to_string(), self.theme.inline_code));
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.flush_line(),
            Event::Rule => {
                self.blank();
                self.start_line();
                self.spans
                    .push(Span::styled("─".repeat(24), self.theme.rule));
                self.flush_line();
                self.blank();
            }
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
            Event::Html(html) | Event::InlineHtml(html) => self.text(&html),
            Event::FootnoteReference(name) => self.text(&format!("[^{name}]")),
            Event::InlineMath(m) | Event::DisplayMath(m) => self.text(&m),
        }
    }

    /// The code block's lines, highlighted when its language has a grammar.
    fn code_lines(&mut self) {
        let text = std::mem::take(&mut self.code_text);
        if text.is_empty() {
            return;
        }
        let language = self.code.clone().unwrap_or_default();
        let body = text.strip_suffix('\n').unwrap_or(&text);
        match crate::highlight::highlight(&language, &text) {
            Some(lines) => {
                for tokens in lines {
                    self.start_line();
                    for (class, run) in tokens {
                        self.spans.push(Span::styled(run, self.theme.syntax(class)));
                    }
                    self.flush_code_line();
                }
            }
            None => {
                for line in body.split('\n') {
                    self.start_line();
                    if !line.is_empty() {
                        self.spans
                            .push(Span::styled(line.to_string(), self.theme.code_block));
                    }
                    self.flush_code_line();
                }
            }
        }
    }

    fn flush_code_line(&mut self) {
        self.start_line();
        let line = Line::from(std::mem::take(&mut self.spans));
        self.out.push(MdLine {
            line,
            indent: Vec::new(),
            verbatim: true,
        });
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {}
            Tag::Heading { level, .. } => {
                self.blank();
                let style = match level {
                    HeadingLevel::H1 => self.theme.heading.add_modifier(Modifier::UNDERLINED),
                    _ => self.theme.heading,
                };
                self.push_style(style);
                self.start_line();
                let hashes = match level {
                    HeadingLevel::H1 => "# ",
                    HeadingLevel::H2 => "## ",
                    HeadingLevel::H3 => "### ",
                    _ => "#### ",
                };
                self.spans.push(Span::styled(hashes, self.theme.heading));
            }
            Tag::BlockQuote(_) => {
                self.blank();
                self.quote += 1;
            }
            Tag::CodeBlock(kind) => {
                self.blank();
                let language = match kind {
                    CodeBlockKind::Fenced(lang) => {
                        lang.split_whitespace().next().unwrap_or("").to_string()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.start_line();
                let label = if language.is_empty() {
                    "```".to_string()
                } else {
                    format!("```{language}")
                };
                self.spans.push(Span::styled(label, self.theme.rule));
                self.flush_code_line();
                self.code = Some(language);
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.blank();
                } else {
                    self.flush_line();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush_line();
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let marker = format!("{n}. ");
                        *n += 1;
                        marker
                    }
                    _ => "• ".to_string(),
                };
                self.pending_item = Some(marker);
            }
            Tag::Emphasis => self.push_style(Style::default().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(Style::default().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => {
                self.push_style(Style::default().add_modifier(Modifier::CROSSED_OUT))
            }
            Tag::Link { dest_url, .. } => {
                self.link = Some(dest_url.to_string());
                self.push_style(self.theme.link);
            }
            Tag::Image { dest_url, .. } => {
                self.text(&format!("[image: {dest_url}]"));
            }
            Tag::Table(_) => {
                self.blank();
                self.table = Some(Table {
                    rows: Vec::new(),
                    cell: String::new(),
                    row: Vec::new(),
                });
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush_line();
                if self.lists.is_empty() {
                    self.blank();
                }
            }
            TagEnd::Heading(_) => {
                self.pop_style();
                self.flush_line();
                self.blank();
            }
            TagEnd::BlockQuote(_) => {
                self.flush_line();
                // The paragraph's blank line inside the quote is the quote's end.
                if self.out.last().is_some_and(|l| {
                    l.line
                        .spans
                        .iter()
                        .all(|s| s.content.trim_matches([' ', '│']).is_empty())
                }) {
                    self.out.pop();
                }
                self.quote = self.quote.saturating_sub(1);
                self.blank();
            }
            TagEnd::CodeBlock => {
                self.code_lines();
                self.code = None;
                self.start_line();
                self.spans.push(Span::styled("```", self.theme.rule));
                self.flush_code_line();
                self.blank();
            }
            TagEnd::List(_) => {
                self.flush_line();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.blank();
                }
            }
            TagEnd::Item => self.flush_line(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::Link => {
                self.pop_style();
                if let Some(url) = self.link.take()
                    && !url.is_empty()
                    && !self.spans.iter().any(|s| s.content.contains(url.as_str()))
                {
                    self.spans
                        .push(Span::styled(format!(" ({url})"), self.theme.dim));
                }
            }
            _ => {}
        }
    }

    fn end_table(&mut self) {
        let Some(table) = self.table.take() else {
            return;
        };
        let columns = table.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0usize; columns];
        for row in &table.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(unicode_width::UnicodeWidthStr::width(cell.as_str()));
            }
        }
        for (r, row) in table.rows.iter().enumerate() {
            self.start_line();
            for (i, width) in widths.iter().enumerate() {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                let pad = width - unicode_width::UnicodeWidthStr::width(cell);
                let style = if r == 0 {
                    self.theme.heading
                } else {
                    Style::default()
                };
                self.spans
                    .push(Span::styled(format!("{cell}{}", " ".repeat(pad)), style));
                if i + 1 < columns {
                    self.spans.push(Span::styled(" │ ", self.theme.rule));
                }
            }
            self.flush_code_line();
            if r == 0 {
                self.start_line();
                let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
                self.spans
                    .push(Span::styled(rule.join("─┼─"), self.theme.rule));
                self.flush_code_line();
            }
        }
        self.blank();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrap::plain;

    fn lines(text: &str) -> Vec<String> {
        render(text, &Theme::new(false))
            .iter()
            .map(|l| plain(&l.line))
            .collect()
    }

    #[test]
    fn headings_lists_and_code() {
        let out = lines(
            "# Title\n\nSome *text* here.\n\n- one\n- two\n\n1. first\n2. second\n\n```rust\nfn main() {}\n```\n",
        );
        assert_eq!(
            out,
            [
                "# Title",
                "",
                "Some text here.",
                "",
                "• one",
                "• two",
                "",
                "1. first",
                "2. second",
                "",
                "```rust",
                "fn main() {}",
                "```"
            ]
        );
    }

    #[test]
    fn emphasis_is_styled_not_marked() {
        let out = render("a **bold** word", &Theme::new(false));
        let bold = out[0]
            .line
            .spans
            .iter()
            .find(|s| s.content == "bold")
            .map(|s| s.style);
        assert!(bold.is_some_and(|s| s.add_modifier.contains(Modifier::BOLD)));
    }

    #[test]
    fn tables_line_up() {
        let out = lines("| a | long header |\n|---|---|\n| xyz | 1 |\n");
        assert_eq!(
            out,
            [
                "a   │ long header",
                "────┼────────────",
                "xyz │ 1          "
            ]
        );
    }

    #[test]
    fn quotes_carry_their_bar() {
        let out = lines("> quoted\n> text");
        assert_eq!(out, ["│ quoted text"]);
    }
}
