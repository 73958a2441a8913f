//! tau's terminal front-end (`tau` on a terminal): an interactive session drawn with ratatui
//! over crossterm. It is a client of the RPC server running in the same process over a pair of
//! pipes, as the one-shot modes are (decision T111): every command, event and extension dialog
//! is the protocol's, so the terminal gets exactly what RPC hosts get. This crate owns the
//! screen, the keys and the prompt history; `app` holds the rules without a terminal.

pub mod app;
pub mod editor;
pub mod highlight;
pub mod inline;
pub mod keys;
pub mod markdown;
pub mod outside;
pub mod overlays;
pub mod sessions;
pub mod text;
pub mod theme;
pub mod transcript;
pub mod tree;
pub mod tty;
pub mod wrap;

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use crossterm::event::Event;
use crossterm::execute;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use serde_json::Value;
use tau_protocol::rpc::OutboundRecord;

use app::{App, Dialog, DialogBody};

/// The shortest time between two frames: the screen is redrawn at most at ~60 Hz, however
/// fast the deltas come, so a long reply costs little more than in RPC mode.
const FRAME: Duration = Duration::from_millis(16);

/// What the interactive session starts with.
pub struct Options {
    /// The folder, as the footer shows it.
    pub cwd_label: String,
    /// The folder itself (`@` paths complete in it).
    pub cwd: PathBuf,
    /// Where prompt history is kept (one JSON string per line), if anywhere.
    pub history_file: Option<PathBuf>,
    /// This folder's sessions (`/resume`).
    pub session_dir: Option<PathBuf>,
    /// Show the conversation so far (`--continue`, `--session`).
    pub show_history: bool,
    /// Open the session picker first (`--resume`).
    pub resume: bool,
    /// The message given on the command line, sent at once.
    pub initial_prompt: Option<String>,
    /// Warnings written before the screen was taken (settings, trust, extensions).
    pub warnings: Vec<String>,
    /// The `theme` setting: `"light"` or `"dark"` picks the colours for that background;
    /// otherwise the terminal is asked.
    pub theme: Option<String>,
    /// tau's version, for the start screen.
    pub version: String,
    /// Why no model can answer and what to do, when none can (shown at once, issue 48).
    pub no_model: Option<String>,
}

enum Input {
    /// A record other than a delta, decoded (one that does not decode is not sent).
    Record(OutboundRecord),
    /// Consecutive `message_update` text or thinking deltas, joined.
    Delta {
        thinking: bool,
        text: String,
    },
    Terminal(Event),
    ServerGone,
}

/// Runs the interactive session until the user quits or the server ends; `records` is the
/// server's output, `commands` its input, `screen` the terminal. Returns the exit code.
pub fn run(
    records: impl Read + Send + 'static,
    mut commands: impl Write,
    screen: File,
    options: Options,
) -> io::Result<u8> {
    // Before the key reader starts: it would take the terminal's answer for keys.
    let theme = theme::Theme::from_env(options.theme.as_deref());
    let (tx, rx) = mpsc::channel();
    let records_tx = tx.clone();
    std::thread::Builder::new()
        .name("tau-tui-records".into())
        .spawn(move || read_records(records, &records_tx))?;
    std::thread::Builder::new()
        .name("tau-tui-keys".into())
        .spawn(move || {
            while let Ok(event) = outside::read_event() {
                if tx.send(Input::Terminal(event)).is_err() {
                    return;
                }
            }
        })?;

    let (history, history_warning) = options
        .history_file
        .as_deref()
        .map(read_history)
        .unwrap_or_default();
    let mut app = App::new(theme, options.cwd_label.clone(), history);
    app.session_dir = options.session_dir.clone();
    app.cwd = options.cwd.clone();
    app.start_screen(&options.version, options.no_model.as_deref());
    for warning in options.warnings.iter().chain(&history_warning) {
        app.transcript.notice(
            format!("Warning: {warning}"),
            transcript::NoticeKind::Warning,
        );
    }
    if options.show_history {
        app.load_history();
    }
    if options.resume {
        app.open_resume_picker();
    }
    if let Some(text) = options.initial_prompt.filter(|t| !t.trim().is_empty()) {
        app.editor.set_text(&text);
        app.submit(false);
    }

    let guard = TerminalGuard::enter(&screen)?;
    let size = crossterm::terminal::size().unwrap_or((80, 24));
    let mut live = inline::Screen::new(screen, size)?;
    let result = event_loop(&mut app, &rx, &mut commands, &mut live, || {
        hung_up(std::io::stdin())
    });
    // The conversation stays in the scrollback, the shell's prompt below it.
    let _ = live.finish(&mut app);
    drop(live);
    drop(guard);
    if let Some(path) = &options.history_file {
        write_history(path, app.editor.history());
    }
    result.map(|()| 0)
}

/// A lean `message_update` carrying a delta, read without building a `Value`: they are nearly
/// every record of a reply.
#[derive(serde::Deserialize)]
struct DeltaRecord<'a> {
    #[serde(rename = "assistantMessageEvent", borrow)]
    event: DeltaEvent<'a>,
}

#[derive(serde::Deserialize)]
struct DeltaEvent<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    delta: Option<std::borrow::Cow<'a, str>>,
}

/// The thinking flag and text of a delta record; `None` for any other record.
fn delta_of(line: &[u8]) -> Option<(bool, std::borrow::Cow<'_, str>)> {
    if !line.starts_with(br#"{"type":"message_update""#) {
        return None;
    }
    let record: DeltaRecord<'_> = serde_json::from_slice(line).ok()?;
    let thinking = match record.event.kind {
        "text_delta" => false,
        "thinking_delta" => true,
        _ => return None,
    };
    Some((thinking, record.event.delta?))
}

/// Reads the server's records, one per line, for the UI thread. Deltas that arrive together
/// are sent as one, so a fast stream costs the UI one wake-up per read, not one per token.
fn read_records(records: impl Read, tx: &mpsc::Sender<Input>) {
    let mut reader = BufReader::with_capacity(RECORDS_READ, LastRead::new(records));
    let mut line = Vec::new();
    let mut pending: Option<(bool, String)> = None;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let record = line.strip_suffix(b"\n").unwrap_or(&line);
        match delta_of(record) {
            Some((thinking, delta)) => match &mut pending {
                Some((kind, text)) if *kind == thinking => text.push_str(&delta),
                _ => {
                    if let Some((thinking, text)) = pending.take()
                        && tx.send(Input::Delta { thinking, text }).is_err()
                    {
                        return;
                    }
                    pending = Some((thinking, delta.into_owned()));
                }
            },
            None => {
                if let Some((thinking, text)) = pending.take()
                    && tx.send(Input::Delta { thinking, text }).is_err()
                {
                    return;
                }
                if let Ok(record) = serde_json::from_slice::<Value>(record)
                    && let Some(record) = app::decode(record)
                    && tx.send(Input::Record(record)).is_err()
                {
                    return;
                }
            }
        }
        // Nothing more waiting: what was joined goes before the read that may block.
        if reader.buffer().is_empty()
            && let Some((thinking, text)) = pending.take()
        {
            if tx.send(Input::Delta { thinking, text }).is_err() {
                return;
            }
            // A reply is streaming and the pipe held little (a paced reply; a burst fills
            // reads): the next deltas gather in the pipe for half a frame and are read
            // together, instead of waking this thread for each (issue 44). Other records wait
            // as long at most.
            if reader.get_ref().last.get() < PACED_READ {
                std::thread::sleep(FRAME / 2);
            }
        }
    }
    if let Some((thinking, text)) = pending.take() {
        let _ = tx.send(Input::Delta { thinking, text });
    }
    let _ = tx.send(Input::ServerGone);
}

/// The most the records' reader asks of the pipe at once.
const RECORDS_READ: usize = 16 * 1024;

/// A read of less than this while deltas come is a paced reply's (a few records), not a
/// burst's.
const PACED_READ: usize = 4096;

/// A reader that remembers how much its last read returned.
struct LastRead<R> {
    inner: R,
    last: std::cell::Cell<usize>,
}

impl<R> LastRead<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            last: std::cell::Cell::new(0),
        }
    }
}

impl<R: Read> Read for LastRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buf)?;
        self.last.set(read);
        Ok(read)
    }
}

/// How often the loop looks whether the terminal has gone.
const HANG_UP_LOOK: Duration = Duration::from_millis(500);

/// Whether `fd`'s other end has gone (the terminal window closed, the SSH connection
/// dropped). tau ends on the SIGHUP that comes with it; this covers a hang-up without one,
/// where crossterm's reader would spin on the end of input rather than report it.
fn hung_up(fd: impl std::os::fd::AsFd) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    poll(&mut fds, Some(&now)).is_ok()
        && fds[0]
            .revents()
            .intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL)
}

fn event_loop(
    app: &mut App,
    rx: &mpsc::Receiver<Input>,
    commands: &mut impl Write,
    screen: &mut inline::Screen,
    hung_up: impl Fn() -> bool,
) -> io::Result<()> {
    let mut last_draw = Instant::now() - FRAME;
    let mut last_look = Instant::now();
    let mut title = None;
    loop {
        for command in app.take_commands() {
            if writeln!(commands, "{command}")
                .and_then(|()| commands.flush())
                .is_err()
            {
                return Ok(());
            }
        }
        if app.quit {
            return Ok(());
        }
        outside::tend(app, screen)?;
        if let Some(text) = app.clipboard.take() {
            use base64::Engine as _;
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            let backend = screen.terminal.backend_mut();
            write!(backend, "\x1b]52;c;{encoded}\x07")?;
            backend.flush()?;
        }
        if app.title != title {
            title.clone_from(&app.title);
            if let Some(text) = &title {
                execute!(
                    screen.terminal.backend_mut(),
                    crossterm::terminal::SetTitle(text)
                )?;
            }
        }
        if app.dirty && last_draw.elapsed() >= FRAME {
            screen.draw(app, live_height, render)?;
            app.dirty = false;
            last_draw = Instant::now();
        }
        let wait = if app.dirty {
            FRAME.saturating_sub(last_draw.elapsed())
        } else {
            Duration::from_secs(1)
        };
        if last_look.elapsed() >= HANG_UP_LOOK {
            last_look = Instant::now();
            if hung_up() {
                return Ok(());
            }
        }
        let input = if app.dirty && !wait.is_zero() {
            // A frame is due: what comes until then is drawn with it anyway, so this thread
            // sleeps to it rather than waking for each delta of a paced reply (issue 44).
            std::thread::sleep(wait);
            match rx.try_recv() {
                Ok(input) => input,
                Err(mpsc::TryRecvError::Empty) => continue,
                Err(mpsc::TryRecvError::Disconnected) => return Ok(()),
            }
        } else {
            match rx.recv_timeout(wait) {
                Ok(input) => input,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        };
        // Everything already waiting is taken before the next frame.
        for input in std::iter::once(input).chain(rx.try_iter()) {
            match input {
                Input::Record(record) => app.on_record(record),
                Input::Delta { thinking, text } => app.on_delta(thinking, &text),
                Input::Terminal(Event::Key(key)) => app.on_key(key),
                Input::Terminal(Event::Paste(text)) => app.on_paste(&text),
                Input::Terminal(Event::Resize(width, height)) => {
                    screen.resized(width, height);
                    app.dirty = true;
                }
                Input::Terminal(_) => {}
                Input::ServerGone => return Ok(()),
            }
        }
    }
}

/// Raw mode, bracketed paste and the keyboard's modifier reports while it lives; the terminal
/// as it was after, also when the UI fails.
struct TerminalGuard {
    out: File,
}

impl TerminalGuard {
    fn enter(screen: &File) -> io::Result<Self> {
        let mut out = screen.try_clone()?;
        crossterm::terminal::enable_raw_mode()?;
        if let Err(e) = inline::modes_on(&mut out) {
            let _ = crossterm::terminal::disable_raw_mode();
            return Err(e);
        }
        Ok(Self { out })
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        let _ = inline::modes_off(&mut self.out);
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// The widgets (and the queued messages) and the editor's lines, with the rows they take.
struct Bottom {
    widgets: Vec<Line<'static>>,
    widget_height: u16,
    editor: Vec<Line<'static>>,
    editor_height: u16,
}

impl Bottom {
    fn new(app: &App, width: usize, screen_height: u16) -> Self {
        let editor = editor_lines(app, width.saturating_sub(2));
        let editor_height = (editor.len() as u16).clamp(1, 10) + 1;
        let widgets: Vec<Line<'static>> = app
            .widgets
            .values()
            .flatten()
            .map(|l| Line::from(Span::styled(l.clone(), app.theme.dim)))
            .chain(overlays::queued_lines(app, width))
            .collect();
        let widget_height = (widgets.len() as u16).min(screen_height / 4);
        Self {
            widgets,
            widget_height,
            editor,
            editor_height,
        }
    }

    /// Widgets, status, editor and footer.
    fn height(&self) -> u16 {
        self.widget_height + 1 + self.editor_height + 1
    }
}

/// The rows the live part needs: the blocks still live (with room over them for a dialog or
/// the command list), then widgets, status, editor and footer; at most the screen.
pub fn live_height(app: &mut App, live: &inline::Frame) -> u16 {
    let width = usize::from(live.width);
    let bottom = Bottom::new(app, width, live.screen_height).height();
    let (_, blocks) =
        app.transcript
            .window_from(live.first_live, width, app.view, &app.theme, 0, 0);
    let blocks = blocks + usize::from(live.gap && blocks > 0);
    let dialog = app.dialog.as_ref().map_or(0, |dialog| {
        dialog_lines(dialog, &app.theme, width, live.screen_height).len() + 2
    });
    let overlay = overlays::palette_lines(app, width).len().max(dialog);
    let rows = usize::from(bottom) + blocks.max(overlay);
    rows.min(usize::from(live.screen_height)) as u16
}

/// Draws the live part: the blocks not yet in the scrollback (the end of them when they are
/// taller than the screen), widgets, status, editor, footer, and a dialog over them.
pub fn render(app: &mut App, live: &inline::Frame, frame: &mut ratatui::Frame<'_>) {
    let area = frame.area();
    let width = area.width as usize;
    let Bottom {
        widgets: widget_lines,
        widget_height,
        editor: editor_lines,
        editor_height,
    } = Bottom::new(app, width, live.screen_height);
    let [conversation, widgets, status, editor, footer] = Layout::vertical([
        Constraint::Min(0),
        Constraint::Length(widget_height),
        Constraint::Length(1),
        Constraint::Length(editor_height),
        Constraint::Length(1),
    ])
    .areas(area);

    // The live blocks below the history, their end when they do not fit.
    let height = conversation.height as usize;
    let (mut shown, total) =
        app.transcript
            .window_from(live.first_live, width, app.view, &app.theme, height, 0);
    if live.gap && total > 0 && total < height {
        shown.insert(0, Line::default());
    }
    frame.render_widget(Paragraph::new(shown), conversation);

    frame.render_widget(Paragraph::new(widget_lines), widgets);

    let mut status_spans = Vec::new();
    if app.streaming {
        status_spans.push(Span::styled("● working (Esc to abort)", app.theme.accent));
    } else if app.compacting {
        status_spans.push(Span::styled(
            "● compacting (Esc to abort)",
            app.theme.accent,
        ));
    }
    let queued = app.queued_steering.len() + app.queued_follow_up.len();
    if queued > 0 {
        status_spans.push(Span::styled(format!("  {queued} queued"), app.theme.dim));
    }
    frame.render_widget(Paragraph::new(Line::from(status_spans)), status);

    // The editor: a rule, then the text with a prompt mark.
    let mut shown_editor = vec![Line::from(Span::styled("─".repeat(width), app.theme.dim))];
    let visible_editor = editor_lines.len().saturating_sub(10);
    shown_editor.extend(editor_lines.iter().skip(visible_editor).cloned());
    frame.render_widget(Paragraph::new(shown_editor), editor);
    if app.dialog.is_none() {
        let (row, col) = cursor_position(app, width.saturating_sub(2));
        let row = row.saturating_sub(visible_editor);
        frame.set_cursor_position((editor.x + 2 + col as u16, editor.y + 1 + row as u16));
    }

    frame.render_widget(Paragraph::new(footer_line(app, width)), footer);

    let above_editor = Rect::new(area.x, area.y, area.width, status.y - area.y);
    overlays::render_palette(app, above_editor, frame.buffer_mut());
    if let Some(dialog) = &app.dialog {
        render_dialog(dialog, &app.theme, frame, area);
    }
}

/// The editor's text as lines, with `› ` before the first and room for the cursor.
fn editor_lines(app: &App, width: usize) -> Vec<Line<'static>> {
    let text = app.editor.text();
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let lead = if i == 0 {
            Span::styled("› ", app.theme.accent)
        } else {
            Span::raw("  ")
        };
        for (j, chunk) in chunks(line, width.max(1)).into_iter().enumerate() {
            let lead = if j == 0 {
                lead.clone()
            } else {
                Span::raw("  ")
            };
            out.push(Line::from(vec![lead, Span::raw(chunk)]));
        }
    }
    out
}

/// `line` cut into pieces of `width` cells (the editor wraps by cells, so the cursor maps back).
fn chunks(line: &str, width: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut used = 0;
    for ch in line.chars() {
        let w = unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0);
        if used + w > width {
            out.push(String::new());
            used = 0;
        }
        if let Some(last) = out.last_mut() {
            last.push(ch);
        }
        used += w;
    }
    out
}

/// The cursor's row and column within `editor_lines`.
fn cursor_position(app: &App, width: usize) -> (usize, usize) {
    let before = &app.editor.text()[..app.editor.cursor()];
    let mut row = 0;
    let lines: Vec<&str> = before.split('\n').collect();
    let full_text = app.editor.text();
    for (i, line) in full_text.split('\n').enumerate() {
        if i + 1 >= lines.len() {
            break;
        }
        row += chunks(line, width.max(1)).len();
    }
    let last = lines.last().copied().unwrap_or_default();
    let pieces = chunks(last, width.max(1));
    row += pieces.len() - 1;
    let col = pieces
        .last()
        .map_or(0, |p| unicode_width::UnicodeWidthStr::width(p.as_str()));
    (row, col)
}

fn footer_line(app: &App, width: usize) -> Line<'static> {
    let f = &app.footer;
    let mut left = f.cwd.clone();
    if let Some(name) = &f.session_name {
        left.push_str(&format!(" • {name}"));
    }
    let mut right = f.model.clone();
    if let Some(mode) = f.permission_mode {
        right = format!("{} • {right}", mode.as_str());
    }
    if !f.thinking.is_empty() && f.thinking != "off" {
        right.push_str(&format!(" • {}", f.thinking));
    }
    if let Some(context) = &f.context {
        right.push_str(&format!(" • ctx {context}"));
    }
    if f.cost > 0.0 {
        right.push_str(&format!(" • ${:.3}", f.cost));
    }
    for status in app.statuses.values() {
        right = format!("{status} • {right}");
    }
    let used = unicode_width::UnicodeWidthStr::width(left.as_str())
        + unicode_width::UnicodeWidthStr::width(right.as_str());
    let gap = width.saturating_sub(used).max(1);
    Line::from(vec![
        Span::styled(left, app.theme.footer),
        Span::raw(" ".repeat(gap)),
        Span::styled(right, app.theme.footer),
    ])
}

fn render_dialog(
    dialog: &Dialog,
    theme: &theme::Theme,
    frame: &mut ratatui::Frame<'_>,
    area: Rect,
) {
    let width = area.width.saturating_sub(4).clamp(20, 80);
    let lines = dialog_lines(dialog, theme, area.width as usize, area.height);
    let height = (lines.len() as u16 + 2).min(area.height);
    let rect = Rect {
        x: area.x + (area.width.saturating_sub(width)) / 2,
        y: area.y + (area.height.saturating_sub(height)) / 2,
        width: width.min(area.width),
        height,
    };
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(format!(" {} ", dialog.title), theme.accent));
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}

/// A dialog's lines inside its border, for an area `area_width` wide and `area_height` high (a
/// list longer than that scrolls to keep the chosen option in view).
fn dialog_lines(
    dialog: &Dialog,
    theme: &theme::Theme,
    area_width: usize,
    area_height: u16,
) -> Vec<Line<'static>> {
    let inner_width = area_width.saturating_sub(4).clamp(20, 80).saturating_sub(2);
    let mut lines: Vec<Line<'static>> = Vec::new();
    match &dialog.body {
        DialogBody::Select { options, selected } => {
            let room = area_height.saturating_sub(6) as usize;
            let first = selected.saturating_sub(room.saturating_sub(1));
            for (i, option) in options.iter().enumerate().skip(first).take(room.max(1)) {
                let style = if i == *selected {
                    theme.accent.add_modifier(Modifier::REVERSED)
                } else {
                    Style::default()
                };
                let mark = if i == *selected { "› " } else { "  " };
                lines.push(Line::from(Span::styled(format!("{mark}{option}"), style)));
            }
            lines.push(Line::from(Span::styled(
                "↑↓ choose • Enter select • Esc cancel",
                theme.dim,
            )));
        }
        DialogBody::Confirm { message } => {
            for line in message.lines() {
                lines.extend(wrap::wrap_line(
                    &Line::from(line.to_string()),
                    inner_width,
                    &[],
                ));
            }
            lines.push(Line::from(Span::styled(
                "y yes • n no • Esc cancel",
                theme.dim,
            )));
        }
        DialogBody::Input { editor, multiline } => {
            for line in editor.text().split('\n') {
                lines.extend(chunks(line, inner_width.max(1)).into_iter().map(Line::from));
            }
            let help = if *multiline {
                "Enter new line • Ctrl+S save • Esc cancel"
            } else {
                "Enter submit • Esc cancel"
            };
            lines.push(Line::from(Span::styled(help, theme.dim)));
        }
    }
    lines
}

/// The most of the history file read: its newest entries up to this size. The file keeps
/// only the last [`HISTORY_KEPT`], so only a pasted giant or a planted file is larger.
const HISTORY_CAP: u64 = tau_base::bounded::TEXT_CAP;

/// The saved prompts, oldest first, and a warning when the file is there but is no regular
/// file (a link to a FIFO would otherwise hang the start, one to `/dev/zero` fill memory).
fn read_history(path: &std::path::Path) -> (Vec<String>, Option<String>) {
    use std::io::{Seek, SeekFrom};
    let mut file = match tau_base::bounded::open_regular(path) {
        Ok(file) => file,
        Err(e @ tau_base::bounded::BoundedReadError::NotRegular { .. }) => {
            return (
                Vec::new(),
                Some(format!("prompt history {} not read: {e}", path.display())),
            );
        }
        Err(_) => return (Vec::new(), None),
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let skip = len.saturating_sub(HISTORY_CAP);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(skip)).is_err()
        || file.take(HISTORY_CAP).read_to_end(&mut bytes).is_err()
    {
        return (Vec::new(), None);
    }
    // Read from the middle of the file: the first line is the end of an older entry.
    let whole_lines = match (skip, bytes.iter().position(|&b| b == b'\n')) {
        (0, _) => &bytes[..],
        (_, Some(at)) => &bytes[at + 1..],
        (_, None) => &[][..],
    };
    let Ok(text) = std::str::from_utf8(whole_lines) else {
        return (Vec::new(), None);
    };
    let entries = text
        .lines()
        .filter_map(|l| serde_json::from_str::<String>(l).ok())
        .collect();
    (entries, None)
}

/// Keeps the last entries; written whole to a temporary file and renamed, never half.
const HISTORY_KEPT: usize = 500;

fn write_history(path: &std::path::Path, history: &[String]) {
    let start = history.len().saturating_sub(HISTORY_KEPT);
    let mut text = String::new();
    for entry in &history[start..] {
        if let Ok(line) = serde_json::to_string(entry) {
            text.push_str(&line);
            text.push('\n');
        }
    }
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
        if let Ok(mut file) = tempfile::NamedTempFile::new_in(dir)
            && file.write_all(text.as_bytes()).is_ok()
        {
            let _ = file.persist(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_is_read_from_a_regular_file_only_and_its_newest_part() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        assert_eq!(read_history(&path), (Vec::new(), None));
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        let (entries, warning) = read_history(&path);
        assert!(entries.is_empty());
        assert_eq!(
            warning.as_deref(),
            Some(
                format!(
                    "prompt history {} not read: it is a device, not a regular file",
                    path.display()
                )
                .as_str()
            )
        );
        std::fs::remove_file(&path).unwrap();
        let entry = "x".repeat(1000);
        let count = usize::try_from(HISTORY_CAP).unwrap() / 1000 + 100;
        let entries: Vec<String> = (0..count).map(|i| format!("{i} {entry}")).collect();
        let text: String = entries
            .iter()
            .map(|e| serde_json::to_string(e).unwrap() + "\n")
            .collect();
        std::fs::write(&path, text).unwrap();
        let (read, warning) = read_history(&path);
        assert_eq!(warning, None);
        assert!(
            read.len() < count && read.len() > count - 200,
            "{}",
            read.len()
        );
        assert_eq!(
            read[..],
            entries[count - read.len()..],
            "whole entries, the newest"
        );
    }

    #[test]
    fn a_closed_other_end_is_a_hang_up() {
        let (reader, writer) = std::io::pipe().unwrap();
        assert!(!hung_up(&reader));
        drop(writer);
        assert!(hung_up(&reader));
    }

    #[test]
    fn deltas_read_together_are_joined_in_order_around_other_records() {
        let lines = [
            r#"{"type":"message_update","usage":{"input":1},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"a"}}"#,
            r#"{"type":"message_update","usage":{"input":1},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"b\n\"c\""}}"#,
            r#"{"type":"message_update","assistantMessageEvent":{"type":"thinking_delta","contentIndex":1,"delta":"hm"}}"#,
            r#"{"type":"message_update","assistantMessageEvent":{"type":"toolcall_start","contentIndex":2}}"#,
            r#"{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"d"}}"#,
            r#"{"type":"message_end","message":{"role":"assistant","content":[],"api":"a","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1}}"#,
        ];
        let input = lines.join("\n") + "\n";
        let (tx, rx) = mpsc::channel();
        read_records(std::io::Cursor::new(input.into_bytes()), &tx);
        let got: Vec<String> = rx
            .try_iter()
            .map(|input| match input {
                Input::Delta { thinking, text } => format!("delta {thinking} {text:?}"),
                Input::Record(record) => {
                    format!("record {}", serde_json::to_value(record).unwrap()["type"])
                }
                Input::ServerGone => "gone".into(),
                Input::Terminal(_) => "key".into(),
            })
            .collect();
        assert_eq!(
            got,
            [
                "delta false \"ab\\n\\\"c\\\"\"",
                "delta true \"hm\"",
                "record \"message_update\"",
                "delta false \"d\"",
                "record \"message_end\"",
                "gone",
            ]
        );
    }

    #[test]
    fn a_line_that_is_no_record_of_the_protocol_is_skipped() {
        let lines = [
            "not json",
            r#"{"type":"no_such_event"}"#,
            r#"{"type":"tool_execution_end","toolCallId":1}"#,
            r#"{"type":"message_update","assistantMessageEvent":{"type":"text_delta"}}"#,
            r#"{"type":"agent_start"}"#,
        ];
        let input = lines.join("\n") + "\n";
        let (tx, rx) = mpsc::channel();
        read_records(std::io::Cursor::new(input.into_bytes()), &tx);
        let got: Vec<String> = rx
            .try_iter()
            .map(|input| match input {
                Input::Record(record) => {
                    format!("record {}", serde_json::to_value(record).unwrap()["type"])
                }
                Input::Delta { .. } => "delta".into(),
                Input::ServerGone => "gone".into(),
                Input::Terminal(_) => "key".into(),
            })
            .collect();
        assert_eq!(got, ["record \"agent_start\"", "gone"]);
    }

    /// The event loop running on a pipe as its terminal.
    struct Running {
        input: mpsc::Sender<Input>,
        event_loop: std::thread::JoinHandle<io::Result<()>>,
        /// The moment each marker reached the pipe.
        seen: mpsc::Receiver<(&'static str, Instant)>,
    }

    /// Starts the event loop in a reply being written, its terminal a pipe watched for
    /// `markers`.
    fn loop_on_a_pipe(markers: &'static [&'static str]) -> Running {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let screen = File::from(std::os::fd::OwnedFd::from(writer));
        let (seen_tx, seen_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let mut buf = [0u8; 1 << 16];
            let mut left: Vec<&str> = markers.to_vec();
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    return;
                }
                text.extend_from_slice(&buf[..n]);
                let now = Instant::now();
                left.retain(|marker| {
                    let found = text.windows(marker.len()).any(|w| w == marker.as_bytes());
                    if found {
                        let _ = seen_tx.send((*marker, now));
                    }
                    !found
                });
            }
        });
        let (tx, rx) = mpsc::channel();
        let running = std::thread::spawn(move || {
            let mut app = App::new(theme::Theme::new(true), "~".into(), Vec::new());
            let mut screen = inline::Screen::new(screen, (80, 24))?;
            event_loop(&mut app, &rx, &mut io::sink(), &mut screen, || false)
        });
        let record =
            |line: &str| Input::Record(app::decode(serde_json::from_str(line).unwrap()).unwrap());
        tx.send(record(r#"{"type":"agent_start"}"#)).unwrap();
        tx.send(record(
            r#"{"type":"message_start","message":{"role":"assistant","content":[],"api":"a","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1}}"#,
        ))
        .unwrap();
        Running {
            input: tx,
            event_loop: running,
            seen: seen_rx,
        }
    }

    #[test]
    fn a_delta_is_drawn_within_a_frame_of_its_arrival_even_while_more_keep_coming() {
        let Running {
            input: tx,
            event_loop: running,
            seen,
        } = loop_on_a_pipe(&["MIDDLE", "THE-END"]);
        let delta = |text: &str| Input::Delta {
            thinking: false,
            text: text.into(),
        };
        // A delta every 2 ms for 400 ms: a frame is not put off until they pause.
        let mut middle = None;
        for i in 0..200 {
            if i == 100 {
                middle = Some(Instant::now());
                tx.send(delta("MIDDLE ")).unwrap();
            } else {
                tx.send(delta(&format!("w{i} "))).unwrap();
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let (marker, at) = seen.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(marker, "MIDDLE");
        let middle = middle.unwrap();
        assert!(
            at - middle < FRAME * 6,
            "drawn {:?} after it came, while deltas kept coming",
            at - middle
        );
        // The last one, sent just after a frame, is drawn the frame after.
        std::thread::sleep(FRAME + Duration::from_millis(2));
        let sent = Instant::now();
        tx.send(delta("THE-END")).unwrap();
        let (marker, at) = seen.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(marker, "THE-END");
        assert!(
            at - sent < FRAME * 6,
            "the last delta was drawn {:?} after it came",
            at - sent
        );
        tx.send(Input::ServerGone).unwrap();
        running.join().unwrap().unwrap();
    }
}
