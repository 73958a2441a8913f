//! The conversation as the screen shows it: a list of blocks (the user's messages, the model's
//! answers with their thinking, tool calls with their output, notices), each rendered to
//! wrapped lines once per width and content change, so a streaming answer re-renders only
//! itself.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::markdown;
use crate::theme::Theme;
use crate::wrap::wrap_line;

/// How a tool call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    Running,
    Done,
    Failed,
}

/// What a notice is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeKind {
    Info,
    Warning,
    Error,
}

#[derive(Debug, Clone)]
pub enum BlockKind {
    User {
        text: String,
    },
    Assistant {
        text: String,
        thinking: String,
        error: Option<String>,
    },
    Tool {
        id: String,
        name: String,
        args: Value,
        output: String,
        diff: Option<String>,
        status: ToolStatus,
    },
    Notice {
        text: String,
        kind: NoticeKind,
    },
}

/// A block and its rendering cache.
#[derive(Debug, Clone)]
pub struct Block {
    pub kind: BlockKind,
    cache: Option<(usize, bool, Vec<Line<'static>>)>,
}

impl Block {
    pub fn new(kind: BlockKind) -> Self {
        Self { kind, cache: None }
    }

    /// The block changed: rendered again on the next draw.
    pub fn touch(&mut self) {
        self.cache = None;
    }
}

/// How the blocks are shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct View {
    /// Tool output and thinking in full rather than collapsed.
    pub expanded: bool,
    /// Thinking left out (Ctrl+T); the blocks it changes are touched when it changes.
    pub hide_thinking: bool,
}

/// Lines of tool output shown while collapsed.
const COLLAPSED_OUTPUT_LINES: usize = 8;

#[derive(Debug, Default)]
pub struct Transcript {
    pub blocks: Vec<Block>,
    /// Counts the clears: the terminal, which writes finished blocks into its scrollback
    /// once, starts over from the first block when this changes.
    generation: u64,
}

impl Transcript {
    pub fn push(&mut self, kind: BlockKind) -> usize {
        self.blocks.push(Block::new(kind));
        self.blocks.len() - 1
    }

    pub fn notice(&mut self, text: impl Into<String>, kind: NoticeKind) {
        self.push(BlockKind::Notice {
            text: text.into(),
            kind,
        });
    }

    pub fn clear(&mut self) {
        self.blocks.clear();
        self.generation += 1;
    }

    /// How many times the transcript was cleared (`/new`, `/resume`, `/fork`, `/tree`).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// How many blocks from the first are finished, so that they can be written into the
    /// terminal's scrollback, which cannot be changed after: all but the reply being written
    /// and the tools running while a run goes on, and any block after them. A reply is known
    /// finished once a later reply, tool call or message follows it, or the run ends.
    pub fn settled(&self, running: bool) -> usize {
        if !running {
            return self.blocks.len();
        }
        let last_reply = self
            .blocks
            .iter()
            .rposition(|b| matches!(b.kind, BlockKind::Assistant { .. }));
        self.blocks
            .iter()
            .enumerate()
            .position(|(i, b)| match &b.kind {
                BlockKind::Tool { status, .. } => *status == ToolStatus::Running,
                BlockKind::Assistant { .. } => {
                    Some(i) == last_reply
                        && !self.blocks[i + 1..]
                            .iter()
                            .any(|later| !matches!(later.kind, BlockKind::Notice { .. }))
                }
                _ => false,
            })
            .unwrap_or(self.blocks.len())
    }

    /// The lines of block `index` at `width` (none for a block that shows nothing).
    pub fn block_lines(
        &mut self,
        index: usize,
        width: usize,
        view: View,
        theme: &Theme,
    ) -> &[Line<'static>] {
        let Some(block) = self.blocks.get_mut(index) else {
            return &[];
        };
        let fresh = matches!(&block.cache, Some((w, e, _)) if *w == width && *e == view.expanded);
        if !fresh {
            let lines = render_block(&block.kind, width, view, theme);
            block.cache = Some((width, view.expanded, lines));
        }
        block
            .cache
            .as_ref()
            .map_or(&[], |(_, _, lines)| lines.as_slice())
    }

    /// The tool block of `id`, the latest first.
    pub fn tool_mut(&mut self, call_id: &str) -> Option<&mut Block> {
        self.blocks
            .iter_mut()
            .rev()
            .find(|b| matches!(&b.kind, BlockKind::Tool { id, .. } if id == call_id))
    }

    pub fn invalidate(&mut self) {
        for block in &mut self.blocks {
            block.touch();
        }
    }

    /// Every line at `width`, with a blank line between blocks.
    pub fn lines(&mut self, width: usize, view: View, theme: &Theme) -> Vec<Line<'static>> {
        self.window(width, view, theme, usize::MAX, 0).0
    }

    /// The lines the screen shows: at most `height` of them, ending `scroll` lines above the
    /// last, and how many lines there are in all. Only these are copied: a long conversation
    /// costs a frame no more than a short one, beyond the blocks that changed.
    pub fn window(
        &mut self,
        width: usize,
        view: View,
        theme: &Theme,
        height: usize,
        scroll: usize,
    ) -> (Vec<Line<'static>>, usize) {
        self.window_from(0, width, view, theme, height, scroll)
    }

    /// [`Transcript::window`] over the blocks from `first` on.
    pub fn window_from(
        &mut self,
        first: usize,
        width: usize,
        view: View,
        theme: &Theme,
        height: usize,
        scroll: usize,
    ) -> (Vec<Line<'static>>, usize) {
        for index in first..self.blocks.len() {
            self.block_lines(index, width, view, theme);
        }
        let shown: Vec<&[Line<'static>]> = self
            .blocks
            .iter()
            .skip(first)
            .filter_map(|b| b.cache.as_ref().map(|(_, _, lines)| lines.as_slice()))
            .filter(|lines| !lines.is_empty())
            .collect();
        // A blank line between blocks.
        let total = shown.iter().map(|l| l.len()).sum::<usize>() + shown.len().saturating_sub(1);
        let end = total - scroll.min(total);
        let start = end.saturating_sub(height);
        let blank = Line::default();
        let mut out = Vec::new();
        let mut at = 0;
        for (i, lines) in shown.iter().enumerate() {
            let separator = (i > 0).then_some(&blank);
            let size = usize::from(separator.is_some()) + lines.len();
            if at + size <= start {
                at += size;
                continue;
            }
            if at >= end {
                break;
            }
            for line in separator.into_iter().chain(lines.iter()) {
                if (start..end).contains(&at) {
                    out.push(line.clone());
                }
                at += 1;
            }
        }
        (out, total)
    }
}

fn wrap_all(
    lines: impl IntoIterator<Item = Line<'static>>,
    width: usize,
    indent: &[Span<'static>],
) -> Vec<Line<'static>> {
    lines
        .into_iter()
        .flat_map(|l| wrap_line(&l, width, indent))
        .collect()
}

fn render_block(kind: &BlockKind, width: usize, view: View, theme: &Theme) -> Vec<Line<'static>> {
    match kind {
        BlockKind::User { text } => {
            let marker = Span::styled("› ", theme.user);
            let mut out = Vec::new();
            for (i, line) in text.lines().enumerate() {
                let lead = if i == 0 {
                    marker.clone()
                } else {
                    Span::raw("  ")
                };
                out.extend(wrap_line(
                    &Line::from(vec![lead, Span::styled(line.to_string(), theme.user)]),
                    width,
                    &[Span::raw("  ")],
                ));
            }
            out
        }
        BlockKind::Assistant {
            text,
            thinking,
            error,
        } => {
            let mut out = Vec::new();
            if !view.hide_thinking && !thinking.trim().is_empty() {
                if view.expanded {
                    for line in thinking.trim().lines() {
                        out.extend(wrap_line(
                            &Line::from(Span::styled(line.to_string(), theme.thinking)),
                            width,
                            &[],
                        ));
                    }
                } else {
                    let count = thinking.trim().lines().count();
                    let first = thinking.trim().lines().next().unwrap_or_default();
                    let summary = format!(
                        "Thinking: {first}{}",
                        if count > 1 {
                            format!(" (+{} lines, Ctrl+O)", count - 1)
                        } else {
                            String::new()
                        }
                    );
                    out.extend(
                        wrap_line(
                            &Line::from(Span::styled(summary, theme.thinking)),
                            width,
                            &[],
                        )
                        .into_iter()
                        .take(2),
                    );
                }
            }
            for md in markdown::render(text, theme) {
                if md.verbatim {
                    out.push(cut(md.line, width));
                } else {
                    out.extend(wrap_line(&md.line, width, &md.indent));
                }
            }
            if let Some(error) = error {
                out.extend(wrap_line(
                    &Line::from(Span::styled(format!("Error: {error}"), theme.error)),
                    width,
                    &[],
                ));
            }
            out
        }
        BlockKind::Tool {
            name,
            args,
            output,
            diff,
            status,
            ..
        } => {
            let (mark, style) = match status {
                ToolStatus::Running => ("◌ ", theme.tool),
                ToolStatus::Done => ("● ", theme.tool),
                ToolStatus::Failed => ("✗ ", theme.tool_error),
            };
            let mut out = wrap_line(
                &Line::from(vec![
                    Span::styled(mark, style),
                    Span::styled(name.clone(), style),
                    Span::raw(" "),
                    Span::styled(summary(name, args), theme.dim),
                ]),
                width,
                &[Span::raw("  ")],
            );
            let body: Vec<Line<'static>> = match diff {
                Some(diff) => diff
                    .lines()
                    .map(|l| {
                        let style = if l.starts_with('+') {
                            theme.added
                        } else if l.starts_with('-') {
                            theme.removed
                        } else {
                            theme.dim
                        };
                        Line::from(Span::styled(l.to_string(), style))
                    })
                    .collect(),
                None => {
                    let style = if *status == ToolStatus::Failed {
                        theme.error
                    } else {
                        theme.dim
                    };
                    output
                        .trim_end()
                        .lines()
                        .map(|l| Line::from(Span::styled(l.to_string(), style)))
                        .collect()
                }
            };
            let indent = [Span::raw("  ")];
            let body: Vec<Line<'static>> = body
                .into_iter()
                .map(|l| {
                    let mut spans = vec![Span::raw("  ")];
                    spans.extend(l.spans);
                    Line::from(spans)
                })
                .collect();
            let total = body.len();
            if view.expanded || total <= COLLAPSED_OUTPUT_LINES {
                out.extend(wrap_all(body, width, &indent));
            } else {
                // The end of the output is what matters while it streams and after.
                out.push(Line::from(Span::styled(
                    format!(
                        "  … {} more lines (Ctrl+O to expand)",
                        total - COLLAPSED_OUTPUT_LINES
                    ),
                    theme.dim,
                )));
                out.extend(wrap_all(
                    body.into_iter().skip(total - COLLAPSED_OUTPUT_LINES),
                    width,
                    &indent,
                ));
            }
            out
        }
        BlockKind::Notice { text, kind } => {
            let style = match kind {
                NoticeKind::Info => theme.dim,
                NoticeKind::Warning => theme.notice,
                NoticeKind::Error => theme.error,
            };
            text.lines()
                .flat_map(|l| {
                    wrap_line(&Line::from(Span::styled(l.to_string(), style)), width, &[])
                })
                .collect()
        }
    }
}

/// A verbatim line cut at the width (code keeps its layout; the end is marked).
fn cut(line: Line<'static>, width: usize) -> Line<'static> {
    if line.width() <= width {
        return line;
    }
    let mut spans = Vec::new();
    let mut used = 0;
    for span in line.spans {
        let mut text = String::new();
        for ch in span.content.chars() {
            let w = unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0);
            if used + w + 1 > width {
                break;
            }
            used += w;
            text.push(ch);
        }
        let style: Style = span.style;
        spans.push(Span::styled(text, style));
        if used + 1 >= width {
            break;
        }
    }
    spans.push(Span::raw("…"));
    Line::from(spans)
}

/// A tool call's arguments in a few words: the command, the path, or compact JSON.
pub fn summary(name: &str, args: &Value) -> String {
    let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_string);
    let short = match name {
        "bash" => text("command"),
        "read" | "write" | "edit" | "ls" => text("path"),
        "grep" | "find" => text("pattern").map(|p| match text("path") {
            Some(path) => format!("{p}  in {path}"),
            None => p,
        }),
        _ => None,
    };
    let mut s = short.unwrap_or_else(|| {
        if args.is_null() {
            String::new()
        } else {
            args.to_string()
        }
    });
    if s.chars().count() > 200 {
        s = s.chars().take(199).collect::<String>() + "…";
    }
    s.replace('\n', " ⏎ ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrap::plain;
    use serde_json::json;

    fn text_of(t: &mut Transcript, width: usize, view: View) -> Vec<String> {
        t.lines(width, view, &Theme::new(true))
            .iter()
            .map(plain)
            .collect()
    }

    #[test]
    fn long_tool_output_collapses_to_its_end() {
        let mut t = Transcript::default();
        let output: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        t.push(BlockKind::Tool {
            id: "1".into(),
            name: "bash".into(),
            args: json!({"command": "seq 20"}),
            output,
            diff: None,
            status: ToolStatus::Done,
        });
        let collapsed = text_of(&mut t, 40, View::default());
        assert_eq!(collapsed[0], "● bash seq 20");
        assert!(collapsed[1].contains("12 more lines"));
        assert_eq!(collapsed.last().map(String::as_str), Some("  line 20"));
        assert!(!collapsed.iter().any(|l| l == "  line 1"));
        let view = View {
            expanded: true,
            ..View::default()
        };
        let expanded = text_of(&mut t, 40, view);
        assert_eq!(expanded.len(), 21);
    }

    #[test]
    fn the_window_is_the_slice_of_every_line_the_screen_shows() {
        let mut t = Transcript::default();
        for i in 0..5 {
            t.push(BlockKind::User {
                text: format!("message {i}\nsecond line"),
            });
        }
        let theme = Theme::new(true);
        let all: Vec<String> = t
            .lines(40, View::default(), &theme)
            .iter()
            .map(plain)
            .collect();
        assert_eq!(all.len(), 14);
        for height in [1, 3, 7, 14, 20] {
            for scroll in [0, 1, 4, 13, 14, 30] {
                let (window, total) = t.window(40, View::default(), &theme, height, scroll);
                assert_eq!(total, 14);
                let end = 14 - scroll.min(14);
                let expected = &all[end.saturating_sub(height)..end];
                let got: Vec<String> = window.iter().map(plain).collect();
                assert_eq!(got, expected, "height {height}, scroll {scroll}");
            }
        }
    }

    #[test]
    fn a_block_is_settled_once_nothing_can_change_it() {
        let mut t = Transcript::default();
        t.push(BlockKind::User { text: "q".into() });
        let reply = || BlockKind::Assistant {
            text: "a".into(),
            thinking: String::new(),
            error: None,
        };
        t.push(reply());
        // The reply being written, and a notice after it, wait; the question does not.
        t.notice("note", NoticeKind::Info);
        assert_eq!(t.settled(true), 1);
        assert_eq!(t.settled(false), 3);
        // A tool call after the reply ends it; the running tool waits.
        t.push(BlockKind::Tool {
            id: "1".into(),
            name: "bash".into(),
            args: Value::Null,
            output: String::new(),
            diff: None,
            status: ToolStatus::Running,
        });
        assert_eq!(t.settled(true), 3);
        if let BlockKind::Tool { status, .. } = &mut t.blocks[3].kind {
            *status = ToolStatus::Done;
        }
        assert_eq!(t.settled(true), 4);
        // The next reply waits again, and a clear is counted.
        t.push(reply());
        assert_eq!(t.settled(true), 4);
        let generation = t.generation();
        t.clear();
        assert_eq!(t.generation(), generation + 1);
        assert_eq!(t.settled(true), 0);
    }

    #[test]
    fn blocks_are_separated_and_cached_per_width() {
        let mut t = Transcript::default();
        t.push(BlockKind::User {
            text: "hello there".into(),
        });
        t.push(BlockKind::Assistant {
            text: "**hi**".into(),
            thinking: String::new(),
            error: None,
        });
        assert_eq!(
            text_of(&mut t, 40, View::default()),
            ["› hello there", "", "hi"]
        );
        assert_eq!(
            text_of(&mut t, 8, View::default()),
            ["› hello", "  there", "", "hi"]
        );
    }
}
