//! The screen as a shell command uses it: finished blocks of the conversation are written
//! once into the terminal's own scrollback, where its scrolling, selection and search reach
//! them and where they stay after tau ends; only the live part (the reply being written,
//! running tools, status, editor, footer, dialogs) is redrawn, at the bottom of what was
//! written.
//!
//! The live part is found by relative moves from the cursor, never by absolute rows: tau
//! starts wherever the shell's cursor is, without asking the terminal where that is, and a
//! line the terminal wraps or scrolls differently from what tau expects cannot misplace it.
//! [`LiveBackend`] is a ratatui backend that draws the live rows that way; [`Screen`] writes
//! the history above them.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use crossterm::style::Print;
use crossterm::{cursor, queue, terminal};
use ratatui::Terminal;
use ratatui::backend::{Backend, ClearType, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Rect, Size};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;

use crate::app::App;
use crate::transcript::View;

/// Draws the live rows below the history. Its coordinates are the live part's: row 0 is its
/// top, wherever that is on the screen.
pub struct LiveBackend {
    out: BufWriter<File>,
    /// Where the terminal's cursor is, in the live part's cells; a column equal to the width
    /// is the cursor after a row filled to its end.
    cursor: Position,
    /// The rows of the screen the live part holds (all of them below its top exist, so moves
    /// between them never scroll).
    rows: u16,
    width: u16,
    /// The colours and attributes the terminal writes with now.
    pen: Pen,
}

impl LiveBackend {
    pub fn new(out: File, width: u16) -> Self {
        Self {
            // A frame goes out in one write.
            out: BufWriter::with_capacity(1 << 16, out),
            cursor: Position::ORIGIN,
            rows: 0,
            width,
            pen: Pen::default(),
        }
    }

    /// Writes `text` in `style`, changing the terminal's pen only when it differs.
    fn print(&mut self, style: Style, text: &str) -> io::Result<()> {
        let pen = Pen::of(style);
        if pen != self.pen {
            pen.write(&mut self.out)?;
            self.pen = pen;
        }
        self.out.write_all(text.as_bytes())
    }

    fn reset_style(&mut self) -> io::Result<()> {
        if self.pen != Pen::default() {
            self.out.write_all(b"\x1b[0m")?;
            self.pen = Pen::default();
        }
        Ok(())
    }

    fn move_to(&mut self, x: u16, y: u16) -> io::Result<()> {
        if y < self.cursor.y {
            queue!(self.out, cursor::MoveUp(self.cursor.y - y))?;
        } else if y > self.cursor.y {
            queue!(self.out, cursor::MoveDown(y - self.cursor.y))?;
        }
        if x != self.cursor.x || self.cursor.x >= self.width {
            queue!(self.out, cursor::MoveToColumn(x))?;
        }
        self.cursor = Position { x, y };
        Ok(())
    }

    /// Replaces the live rows: `history` goes where they began (into the scrollback as the
    /// screen scrolls), then `rows` fresh rows are made below it for the live part.
    fn rebuild(&mut self, history: &[Line<'static>], rows: u16, width: u16) -> io::Result<()> {
        self.move_to(0, 0)?;
        self.clear_down()?;
        for line in history {
            for span in &line.spans {
                // A tool's output may hold escape sequences or tabs; written raw they would
                // move the cursor, retitle the window or set the clipboard. Left out, as ratatui
                // leaves them out of the live rows.
                let text: std::borrow::Cow<'_, str> = if span.content.contains(char::is_control) {
                    span.content
                        .chars()
                        .filter(|c| !c.is_control())
                        .collect::<String>()
                        .into()
                } else {
                    std::borrow::Cow::Borrowed(&span.content)
                };
                self.print(line.style.patch(span.style), &text)?;
            }
            self.reset_style()?;
            self.out.write_all(b"\r\n")?;
        }
        // Line feeds make the rows, scrolling the screen when it is full; the cursor ends on
        // the last of them.
        for _ in 1..rows {
            queue!(self.out, Print("\n"))?;
        }
        self.cursor = Position {
            x: 0,
            y: rows.saturating_sub(1),
        };
        self.rows = rows;
        self.width = width;
        Ok(())
    }

    /// Clears the cursor's row and every row below it, the cursor left at its row's start.
    /// Not by erasing from the row's first column: at the screen's top-left corner that is a
    /// clear of the whole screen, which tmux (and some terminals) keep by moving the screen's
    /// rows into the scrollback, where the live rows would then stay.
    fn clear_down(&mut self) -> io::Result<()> {
        self.reset_style()?;
        queue!(
            self.out,
            terminal::Clear(terminal::ClearType::CurrentLine),
            cursor::MoveToColumn(1),
            terminal::Clear(terminal::ClearType::FromCursorDown),
            Print("\r")
        )?;
        self.cursor.x = 0;
        Ok(())
    }

    /// Forgets where the live part was: it starts again at the cursor, wherever another
    /// program left it.
    fn forget(&mut self) {
        self.cursor = Position::ORIGIN;
        self.rows = 0;
    }
}

/// Colours and attributes as the terminal keeps them: what a style comes to on screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pen {
    fg: Color,
    bg: Color,
    modifier: Modifier,
}

impl Default for Pen {
    fn default() -> Self {
        Self {
            fg: Color::Reset,
            bg: Color::Reset,
            modifier: Modifier::empty(),
        }
    }
}

impl Pen {
    fn of(style: Style) -> Self {
        Self {
            fg: style.fg.unwrap_or(Color::Reset),
            bg: style.bg.unwrap_or(Color::Reset),
            modifier: style.add_modifier - style.sub_modifier,
        }
    }

    /// One SGR sequence from the default: shorter than undoing the previous pen's parts.
    fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let mut sgr = String::from("\x1b[0");
        for (modifier, code) in [
            (Modifier::BOLD, "1"),
            (Modifier::DIM, "2"),
            (Modifier::ITALIC, "3"),
            (Modifier::UNDERLINED, "4"),
            (Modifier::SLOW_BLINK, "5"),
            (Modifier::RAPID_BLINK, "6"),
            (Modifier::REVERSED, "7"),
            (Modifier::HIDDEN, "8"),
            (Modifier::CROSSED_OUT, "9"),
        ] {
            if self.modifier.contains(modifier) {
                sgr.push(';');
                sgr.push_str(code);
            }
        }
        colour(&mut sgr, self.fg, 30);
        colour(&mut sgr, self.bg, 40);
        sgr.push('m');
        out.write_all(sgr.as_bytes())
    }
}

/// Appends `color`'s SGR parameters, `base` 30 for the foreground and 40 for the background.
fn colour(sgr: &mut String, color: Color, base: u8) {
    use std::fmt::Write as _;
    let _ = match color {
        Color::Reset => return,
        Color::Black => write!(sgr, ";{base}"),
        Color::Red => write!(sgr, ";{}", base + 1),
        Color::Green => write!(sgr, ";{}", base + 2),
        Color::Yellow => write!(sgr, ";{}", base + 3),
        Color::Blue => write!(sgr, ";{}", base + 4),
        Color::Magenta => write!(sgr, ";{}", base + 5),
        Color::Cyan => write!(sgr, ";{}", base + 6),
        Color::Gray => write!(sgr, ";{}", base + 7),
        Color::DarkGray => write!(sgr, ";{}", base + 60),
        Color::LightRed => write!(sgr, ";{}", base + 61),
        Color::LightGreen => write!(sgr, ";{}", base + 62),
        Color::LightYellow => write!(sgr, ";{}", base + 63),
        Color::LightBlue => write!(sgr, ";{}", base + 64),
        Color::LightMagenta => write!(sgr, ";{}", base + 65),
        Color::LightCyan => write!(sgr, ";{}", base + 66),
        Color::White => write!(sgr, ";{}", base + 67),
        Color::Indexed(i) => write!(sgr, ";{};5;{i}", base + 8),
        Color::Rgb(r, g, b) => write!(sgr, ";{};2;{r};{g};{b}", base + 8),
    };
}

impl Write for LiveBackend {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl Backend for LiveBackend {
    type Error = io::Error;

    fn draw<'a, I>(&mut self, content: I) -> io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        // Cells of one style side by side go out as one styled run.
        let mut run = String::new();
        let mut run_style = Style::default();
        let mut next = Position::ORIGIN;
        for (x, y, cell) in content {
            let style = cell.style();
            if !run.is_empty() && (next != Position { x, y } || style != run_style) {
                self.print(run_style, &run)?;
                self.cursor = next;
                run.clear();
            }
            if run.is_empty() {
                self.move_to(x, y)?;
                run_style = style;
            }
            run.push_str(cell.symbol());
            let width = unicode_width::UnicodeWidthStr::width(cell.symbol()).max(1) as u16;
            next = Position { x: x + width, y };
        }
        if !run.is_empty() {
            self.print(run_style, &run)?;
            self.cursor = next;
        }
        self.reset_style()
    }

    fn hide_cursor(&mut self) -> io::Result<()> {
        queue!(self.out, cursor::Hide)
    }

    fn show_cursor(&mut self) -> io::Result<()> {
        queue!(self.out, cursor::Show)
    }

    fn get_cursor_position(&mut self) -> io::Result<Position> {
        Ok(self.cursor)
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> io::Result<()> {
        let position = position.into();
        self.move_to(position.x, position.y)
    }

    fn clear(&mut self) -> io::Result<()> {
        self.clear_region(ClearType::All)
    }

    fn clear_region(&mut self, clear_type: ClearType) -> io::Result<()> {
        // Never above the live part: that is the history.
        let kind = match clear_type {
            ClearType::All => {
                self.move_to(0, 0)?;
                return self.clear_down();
            }
            ClearType::AfterCursor if self.cursor.x == 0 => return self.clear_down(),
            ClearType::AfterCursor => terminal::ClearType::FromCursorDown,
            ClearType::CurrentLine => terminal::ClearType::CurrentLine,
            ClearType::UntilNewLine => terminal::ClearType::UntilNewLine,
            ClearType::BeforeCursor => {
                let at = self.cursor;
                for y in 0..at.y {
                    self.move_to(0, y)?;
                    queue!(self.out, terminal::Clear(terminal::ClearType::CurrentLine))?;
                }
                self.move_to(at.x, at.y)?;
                terminal::ClearType::FromCursorUp
            }
        };
        self.reset_style()?;
        queue!(self.out, terminal::Clear(kind))
    }

    fn size(&self) -> io::Result<Size> {
        Ok(Size {
            width: self.width,
            height: self.rows,
        })
    }

    fn window_size(&mut self) -> io::Result<WindowSize> {
        let size = self.size()?;
        Ok(WindowSize {
            columns_rows: size,
            pixels: Size::default(),
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        // The frame's one write happens when the whole frame is queued (Screen::draw).
        Ok(())
    }
}

/// The terminal the interactive session draws on.
pub type Live = Terminal<LiveBackend>;

/// The history written so far and the live part.
pub struct Screen {
    pub terminal: Live,
    /// The screen's size.
    size: (u16, u16),
    /// Blocks of the transcript already in the scrollback.
    printed: usize,
    /// The transcript's generation they belong to.
    generation: u64,
    /// The view they were written with.
    view: View,
    /// Something of the conversation is in the scrollback: a blank line goes before more.
    any: bool,
    /// The screen is to be cleared and the conversation written again (a new width).
    reprint: bool,
    /// The live part is to be drawn anew where it is (a new height).
    redraw: bool,
}

/// What one frame draws: the live rows and where the live conversation begins.
pub struct Frame {
    /// The first block still live (not yet in the scrollback).
    pub first_live: usize,
    /// A blank line goes above the live blocks, after the history.
    pub gap: bool,
    /// The screen's width.
    pub width: u16,
    /// The screen's height, the most the live part may take.
    pub screen_height: u16,
}

impl Screen {
    pub fn new(out: File, size: (u16, u16)) -> io::Result<Self> {
        let mut backend = LiveBackend::new(out, size.0);
        // Whatever the shell left on the cursor's line goes; the live part starts there.
        queue!(backend.out, Print("\r"))?;
        let terminal = Terminal::with_options(
            backend,
            ratatui::TerminalOptions {
                viewport: ratatui::Viewport::Fixed(Rect::new(0, 0, size.0, 0)),
            },
        )?;
        Ok(Self {
            terminal,
            size,
            printed: 0,
            generation: 0,
            view: View::default(),
            any: false,
            reprint: false,
            redraw: false,
        })
    }

    /// The terminal changed size. At a new width the history, wrapped at the old one (and
    /// rewrapped or cut by the terminal), is written again from a cleared screen; at a new
    /// height only the live part is drawn again: the terminal keeps the rows around the
    /// cursor, and so the live part, where they were relative to it, unless it no longer fits.
    pub fn resized(&mut self, width: u16, height: u16) {
        let (old_width, _) = self.size;
        self.size = (width, height);
        if width != old_width || height < self.terminal.backend().rows {
            self.reprint = true;
        } else {
            self.redraw = true;
        }
    }

    /// Writes what became history and redraws the live part; `live_height` gives the rows it
    /// needs for the frame it is given, `render` draws them.
    pub fn draw(
        &mut self,
        app: &mut App,
        live_height: impl FnOnce(&mut App, &Frame) -> u16,
        render: impl FnOnce(&mut App, &Frame, &mut ratatui::Frame<'_>),
    ) -> io::Result<()> {
        queue!(
            self.terminal.backend_mut().out,
            terminal::BeginSynchronizedUpdate
        )?;
        let (width, height) = self.size;
        // Blocks written with another view (Ctrl+O, Ctrl+T) would stay as they were: the
        // conversation is written again in the new one.
        if app.view != self.view {
            self.view = app.view;
            self.reprint |= self.any;
        }
        let mut rebuild = std::mem::take(&mut self.redraw);
        if self.reprint {
            self.reprint = false;
            let backend = self.terminal.backend_mut();
            // The scrollback too: what is in it was wrapped at the old width.
            queue!(
                backend.out,
                cursor::MoveTo(0, 0),
                terminal::Clear(terminal::ClearType::All),
                terminal::Clear(terminal::ClearType::Purge)
            )?;
            backend.forget();
            self.printed = 0;
            self.any = false;
            rebuild = true;
        }
        let history = self.history(app, width, app.transcript.settled(app.streaming));
        let frame = Frame {
            first_live: self.printed,
            gap: self.any,
            width,
            screen_height: height,
        };
        let rows = live_height(app, &frame).clamp(1, height.max(1));
        let backend = self.terminal.backend_mut();
        if rebuild || !history.is_empty() || rows != backend.rows || width != backend.width {
            let area_changed = rows != backend.rows || width != backend.width;
            backend.rebuild(&history, rows, width)?;
            if area_changed {
                self.terminal.resize(Rect::new(0, 0, width, rows))?;
            } else {
                self.terminal.clear()?;
            }
        }
        self.terminal.draw(|f| render(app, &frame, f))?;
        let out = &mut self.terminal.backend_mut().out;
        queue!(out, terminal::EndSynchronizedUpdate)?;
        out.flush()
    }

    /// The lines of the blocks that became history since the last frame.
    fn history(&mut self, app: &mut App, width: u16, settled: usize) -> Vec<Line<'static>> {
        let mut lines = Vec::new();
        let transcript = &mut app.transcript;
        if transcript.generation() != self.generation {
            // The conversation shown was replaced (`/new`, `/resume`, `/fork`, `/tree`): a
            // rule ends the old one in the scrollback.
            self.generation = transcript.generation();
            self.printed = 0;
            if self.any {
                lines.push(Line::default());
                lines.push(Line::styled("─".repeat(usize::from(width)), app.theme.dim));
                self.any = false;
            }
        }
        // A reply that showed nothing was dropped from the transcript before it was written.
        self.printed = self.printed.min(transcript.blocks.len());
        for index in self.printed..settled {
            let block = transcript.block_lines(index, usize::from(width), self.view, &app.theme);
            if block.is_empty() {
                continue;
            }
            if self.any {
                lines.push(Line::default());
            }
            lines.extend(block.iter().cloned());
            self.any = true;
        }
        self.printed = self.printed.max(settled);
        lines
    }

    /// Writes everything still live into the scrollback (tau is ending: a reply cut short
    /// stays too) and clears the live part, leaving the cursor below the conversation for
    /// the shell's prompt.
    pub fn finish(&mut self, app: &mut App) -> io::Result<()> {
        let width = self.size.0;
        let history = self.history(app, width, app.transcript.blocks.len());
        self.release(&history)
    }

    /// Gives the terminal to another program (an editor, the shell after Ctrl+Z): the live
    /// part cleared, the cursor where it began, the modes and raw mode off.
    pub fn leave(&mut self) -> io::Result<()> {
        self.release(&[])?;
        modes_off(self.terminal.backend_mut())?;
        crossterm::terminal::disable_raw_mode()
    }

    fn release(&mut self, history: &[Line<'static>]) -> io::Result<()> {
        let backend = self.terminal.backend_mut();
        let width = backend.width;
        backend.rebuild(history, 0, width)?;
        queue!(backend.out, cursor::Show)?;
        backend.out.flush()
    }

    /// The terminal is back from another program: raw mode and the modes on, and the live
    /// part starts again at the cursor, below what the program left.
    pub fn enter(&mut self) -> io::Result<()> {
        crossterm::terminal::enable_raw_mode()?;
        modes_on(self.terminal.backend_mut())?;
        self.terminal.backend_mut().forget();
        // The terminal may have been resized meanwhile.
        if let Ok((width, height)) = crossterm::terminal::size() {
            self.resized(width, height);
        }
        queue!(self.terminal.backend_mut().out, Print("\r"))
    }
}

/// xterm's modifyOtherKeys at level 2: a modified key the kitty protocol would report (Shift+
/// Enter) comes as `CSI 27 ; mod ; code ~` instead of the bare key. xterm, tmux (with its
/// `extended-keys` option) and screen's hosts speak it; a terminal that knows neither ignores it.
const MODIFY_OTHER_KEYS: &str = "\x1b[>4;2m";
const MODIFY_OTHER_KEYS_OFF: &str = "\x1b[>4;0m";

/// Bracketed paste and the keys' modifiers reported, by the kitty protocol where the terminal
/// speaks it and by modifyOtherKeys where it does not (Shift+Enter told from Enter).
pub fn modes_on(out: &mut impl Write) -> io::Result<()> {
    // Not detected first: crossterm asks through fd 1, which is the log while the UI runs,
    // and the question costs a round trip at start. A terminal ignores what it does not know.
    queue!(
        out,
        crossterm::event::EnableBracketedPaste,
        crossterm::event::PushKeyboardEnhancementFlags(
            crossterm::event::KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES
        ),
        Print(MODIFY_OTHER_KEYS)
    )?;
    out.flush()
}

/// The modes as the shell had them.
pub fn modes_off(out: &mut impl Write) -> io::Result<()> {
    queue!(
        out,
        Print(MODIFY_OTHER_KEYS_OFF),
        crossterm::event::PopKeyboardEnhancementFlags,
        crossterm::event::DisableBracketedPaste,
        cursor::Show
    )?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend() -> (LiveBackend, tempfile::NamedTempFile) {
        let file = tempfile::NamedTempFile::new().unwrap();
        let backend = LiveBackend::new(file.reopen().unwrap(), 20);
        (backend, file)
    }

    fn written(backend: &mut LiveBackend, file: &tempfile::NamedTempFile) -> String {
        Write::flush(backend).unwrap();
        std::fs::read_to_string(file.path()).unwrap()
    }

    #[test]
    fn the_live_rows_are_reached_by_relative_moves_only() {
        let (mut backend, file) = backend();
        backend.rebuild(&[Line::from("history")], 3, 20).unwrap();
        assert_eq!(backend.cursor, Position { x: 0, y: 2 });
        let cell = Cell::new("x");
        backend
            .draw([(2, 0, &cell), (3, 0, &cell), (0, 2, &cell)].into_iter())
            .unwrap();
        backend.set_cursor_position((5, 1)).unwrap();
        let out = written(&mut backend, &file);
        // Clear the row and below (from its second column: see clear_down), the history line,
        // two line feeds for the rows; then up two rows to column 3 for "xx", down two to
        // column 1, up one to column 6.
        assert_eq!(
            out,
            "\x1b[2K\x1b[2G\x1b[J\rhistory\r\n\n\n\x1b[2A\x1b[3Gxx\x1b[2B\x1b[1Gx\x1b[1A\x1b[6G"
        );
        assert!(!out.contains('H'), "no absolute position: {out:?}");
    }

    #[test]
    fn control_characters_in_the_history_do_not_reach_the_terminal() {
        let (mut backend, file) = backend();
        let line = Line::from("\x1b]52;c;ZXZpbA==\x07ls\tout\x1b[2J");
        backend.rebuild(&[line], 1, 20).unwrap();
        let out = written(&mut backend, &file);
        assert_eq!(out, "\x1b[2K\x1b[2G\x1b[J\r]52;c;ZXZpbA==lsout[2J\r\n");
    }

    #[test]
    fn a_style_change_splits_a_run_and_resets_after_it() {
        let (mut backend, file) = backend();
        backend.rebuild(&[], 1, 20).unwrap();
        let plain = Cell::new("a");
        let mut bold = Cell::new("b");
        bold.set_style(Style::default().add_modifier(ratatui::style::Modifier::BOLD));
        backend
            .draw([(0, 0, &plain), (1, 0, &bold)].into_iter())
            .unwrap();
        let out = written(&mut backend, &file);
        assert!(out.ends_with("a\x1b[0;1mb\x1b[0m"), "{out:?}");
        assert_eq!(backend.cursor, Position { x: 2, y: 0 });
    }
}
