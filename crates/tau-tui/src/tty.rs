//! The terminal's input, read and decoded here rather than by crossterm's reader: crossterm
//! drops the form xterm's modifyOtherKeys gives a modified key (`ESC [ 27 ; mod ; code ~`),
//! which is how Shift+Enter reaches a program inside tmux, screen and xterm, where the kitty
//! keyboard protocol is not spoken. Everything else decodes as crossterm decodes it, into
//! crossterm's own events, so the rest of the UI does not know the difference. A resize
//! arrives as `Event::Resize` through a SIGWINCH pipe polled with the terminal.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IsTerminal};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// How long an unfinished escape sequence waits for its end before it is taken as typed: a
/// terminal writes a sequence whole, so only an Esc pressed alone (or a sequence split by a
/// slow link) waits this long.
const SEQUENCE_WAIT: Duration = Duration::from_millis(50);

/// The next terminal event, waiting as long as it takes (crossterm's `event::read`).
pub fn read() -> io::Result<Event> {
    loop {
        if poll(Duration::from_secs(3600))? {
            let mut reader = reader()?;
            if let Some(event) = reader.as_mut().and_then(|r| r.queue.pop_front()) {
                return Ok(event);
            }
        }
    }
}

/// Whether an event is ready, waiting at most `timeout` for one (crossterm's `event::poll`).
/// An error is the terminal gone (its end of input, a hang-up).
pub fn poll(timeout: Duration) -> io::Result<bool> {
    let mut guard = reader()?;
    let Some(reader) = guard.as_mut() else {
        return Err(io::Error::other("no terminal to read"));
    };
    let deadline = Instant::now() + timeout;
    loop {
        if !reader.queue.is_empty() {
            return Ok(true);
        }
        let now = Instant::now();
        if now >= deadline && !reader.decoder.waiting() {
            return Ok(false);
        }
        let wait = if reader.decoder.waiting() {
            SEQUENCE_WAIT
        } else {
            deadline - now
        };
        reader.wait(wait)?;
    }
}

static READER: Mutex<Option<Reader>> = Mutex::new(None);

fn reader() -> io::Result<MutexGuard<'static, Option<Reader>>> {
    let mut guard = READER.lock().unwrap_or_else(PoisonError::into_inner);
    if guard.is_none() {
        *guard = Some(Reader::open()?);
    }
    Ok(guard)
}

enum Tty {
    Stdin(io::Stdin),
    Device(File),
}

impl Tty {
    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Self::Stdin(stdin) => stdin.as_fd(),
            Self::Device(file) => file.as_fd(),
        }
    }
}

struct Reader {
    tty: Tty,
    /// Written to on SIGWINCH; `None` when the handler could not be installed (a resize is
    /// then not seen until the next key).
    resized: Option<UnixStream>,
    decoder: Decoder,
    queue: VecDeque<Event>,
}

impl Reader {
    fn open() -> io::Result<Self> {
        // The same terminal crossterm's raw mode is set on: stdin when it is one.
        let stdin = io::stdin();
        let tty = if stdin.is_terminal() {
            Tty::Stdin(stdin)
        } else {
            Tty::Device(File::open("/dev/tty")?)
        };
        let resized = UnixStream::pair().ok().and_then(|(read, write)| {
            read.set_nonblocking(true).ok()?;
            signal_hook::low_level::pipe::register(signal_hook::consts::SIGWINCH, write).ok()?;
            Some(read)
        });
        Ok(Self {
            tty,
            resized,
            decoder: Decoder::default(),
            queue: VecDeque::new(),
        })
    }

    /// Waits up to `timeout` for input and decodes what came; an unfinished sequence still
    /// unfinished after the wait is taken as typed.
    fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let tty = self.tty.fd();
        let mut fds = vec![PollFd::new(&tty, PollFlags::IN)];
        if let Some(resized) = &self.resized {
            fds.push(PollFd::new(resized, PollFlags::IN));
        }
        let timeout = Timespec {
            tv_sec: timeout.as_secs().try_into().unwrap_or(i64::MAX),
            tv_nsec: timeout.subsec_nanos().into(),
        };
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let tty_ready = fds[0].revents();
        let resize = fds.get(1).is_some_and(|f| !f.revents().is_empty());
        drop(fds);
        if resize {
            let mut sink = [0u8; 64];
            if let Some(mut resized) = self.resized.as_ref() {
                while matches!(io::Read::read(&mut resized, &mut sink), Ok(n) if n > 0) {}
            }
            if let Ok((width, height)) = crossterm::terminal::size() {
                self.queue.push_back(Event::Resize(width, height));
            }
        }
        if tty_ready.contains(PollFlags::IN) {
            let mut buf = [0u8; 8192];
            let n = match rustix::io::read(self.tty.fd(), &mut buf) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => n,
                Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            // A full buffer means more is waiting: an ESC at its end starts a sequence.
            let events = self.decoder.feed(&buf[..n], n == buf.len());
            self.queue.extend(events);
        } else if tty_ready.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL) {
            return Err(io::ErrorKind::UnexpectedEof.into());
        } else if !resize && self.decoder.waiting() {
            let events = self.decoder.flush();
            self.queue.extend(events);
        }
        Ok(())
    }
}

/// Turns the terminal's bytes into key, paste and resize events.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Bytes of an event not yet complete.
    pending: Vec<u8>,
    /// The text of a bracketed paste under way.
    paste: Option<Vec<u8>>,
}

/// The end of a bracketed paste.
const PASTE_END: &[u8] = b"\x1b[201~";

enum Step {
    /// An event and the bytes it took.
    Event(Event, usize),
    /// Bytes that are no event (an answer to a query, a mouse report) and are dropped.
    Skip(usize),
    /// A bracketed paste starts after these bytes.
    PasteStart(usize),
    /// The bytes so far begin an event that is not complete.
    Incomplete,
}

impl Decoder {
    /// Whether bytes wait for the rest of their sequence.
    pub fn waiting(&self) -> bool {
        !self.pending.is_empty() && self.paste.is_none()
    }

    /// The events `bytes` complete. With `more` set, further input is known to be waiting, so
    /// an ESC at the end is the start of a sequence rather than the Esc key.
    pub fn feed(&mut self, bytes: &[u8], more: bool) -> Vec<Event> {
        let mut out = Vec::new();
        self.pending.extend_from_slice(bytes);
        let mut at = 0;
        loop {
            if let Some(paste) = &mut self.paste {
                // The end may have been split between two reads: look from before the join.
                let from = paste.len().saturating_sub(PASTE_END.len());
                paste.extend_from_slice(&self.pending[at..]);
                at = self.pending.len();
                let Some(end) = find(&paste[from..], PASTE_END).map(|i| from + i) else {
                    break;
                };
                let rest = paste.split_off(end + PASTE_END.len());
                paste.truncate(end);
                let text = String::from_utf8_lossy(paste).into_owned();
                self.paste = None;
                out.push(Event::Paste(text));
                self.pending = rest;
                at = 0;
                continue;
            }
            if at >= self.pending.len() {
                break;
            }
            match step(&self.pending[at..], more) {
                Step::Event(event, used) => {
                    out.push(event);
                    at += used;
                }
                Step::Skip(used) => at += used,
                Step::PasteStart(used) => {
                    at += used;
                    self.paste = Some(Vec::new());
                }
                Step::Incomplete => break,
            }
        }
        self.pending.drain(..at.min(self.pending.len()));
        out
    }

    /// What waits unfinished, taken as typed: a lone ESC is the Esc key; anything after it
    /// is decoded again on its own.
    pub fn flush(&mut self) -> Vec<Event> {
        if self.paste.is_some() || self.pending.is_empty() {
            return Vec::new();
        }
        let pending = std::mem::take(&mut self.pending);
        let mut out = Vec::new();
        if pending[0] == 0x1b {
            out.push(key(KeyCode::Esc, KeyModifiers::NONE));
            out.extend(self.feed(&pending[1..], false));
        } else {
            // An unfinished UTF-8 character: dropped.
            out.extend(self.feed(&pending[1..], false));
        }
        out
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn key(code: KeyCode, modifiers: KeyModifiers) -> Event {
    Event::Key(KeyEvent::new(code, modifiers))
}

/// One event from the start of `b`.
fn step(b: &[u8], more: bool) -> Step {
    if b[0] != 0x1b {
        return plain(b);
    }
    let Some(&second) = b.get(1) else {
        return if more {
            Step::Incomplete
        } else {
            Step::Event(key(KeyCode::Esc, KeyModifiers::NONE), 1)
        };
    };
    match second {
        b'[' => csi(b),
        b'O' => match b.get(2) {
            None if more => Step::Incomplete,
            Some(&c @ (b'A' | b'B' | b'C' | b'D' | b'H' | b'F' | b'P' | b'Q' | b'R' | b'S')) => {
                Step::Event(key(cursor_key(c), KeyModifiers::NONE), 3)
            }
            _ => Step::Event(
                key(KeyCode::Char('O'), KeyModifiers::ALT | KeyModifiers::SHIFT),
                2,
            ),
        },
        // An answer to a colour query that came late: up to BEL or ST.
        b']' => {
            let end = b.iter().enumerate().skip(2).find_map(|(i, &c)| match c {
                0x07 => Some(i + 1),
                b'\\' if b[i - 1] == 0x1b => Some(i + 1),
                _ => None,
            });
            end.map_or(Step::Incomplete, Step::Skip)
        }
        // Esc pressed twice: the first is the key, the second decoded after it.
        0x1b => Step::Event(key(KeyCode::Esc, KeyModifiers::NONE), 1),
        _ => match plain(&b[1..]) {
            Step::Event(Event::Key(mut k), used) => {
                k.modifiers |= KeyModifiers::ALT;
                Step::Event(Event::Key(k), used + 1)
            }
            Step::Incomplete => Step::Incomplete,
            _ => Step::Skip(2),
        },
    }
}

/// A byte that is not ESC: a control key or a UTF-8 character.
fn plain(b: &[u8]) -> Step {
    let ctrl = KeyModifiers::CONTROL;
    let event = match b[0] {
        b'\r' => key(KeyCode::Enter, KeyModifiers::NONE),
        // In raw mode a line feed is Ctrl+J, which the editor takes as a new line.
        b'\n' => key(KeyCode::Char('j'), ctrl),
        b'\t' => key(KeyCode::Tab, KeyModifiers::NONE),
        0x7f => key(KeyCode::Backspace, KeyModifiers::NONE),
        0 => key(KeyCode::Char(' '), ctrl),
        c @ 0x01..=0x1a => key(KeyCode::Char((c - 1 + b'a') as char), ctrl),
        c @ 0x1c..=0x1f => key(KeyCode::Char((c - 0x1c + b'4') as char), ctrl),
        c => {
            let len = match c {
                0x00..=0x7f => 1,
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf7 => 4,
                _ => return Step::Skip(1),
            };
            if b.len() < len {
                return Step::Incomplete;
            }
            let Some(ch) = std::str::from_utf8(&b[..len])
                .ok()
                .and_then(|s| s.chars().next())
            else {
                return Step::Skip(1);
            };
            return Step::Event(char_key(ch, KeyModifiers::NONE), len);
        }
    };
    Step::Event(event, 1)
}

/// A character typed, as crossterm reports it: an upper-case letter carries Shift.
fn char_key(ch: char, mut modifiers: KeyModifiers) -> Event {
    if ch.is_uppercase() {
        modifiers |= KeyModifiers::SHIFT;
    }
    key(KeyCode::Char(ch), modifiers)
}

fn cursor_key(final_byte: u8) -> KeyCode {
    match final_byte {
        b'A' => KeyCode::Up,
        b'B' => KeyCode::Down,
        b'C' => KeyCode::Right,
        b'D' => KeyCode::Left,
        b'H' => KeyCode::Home,
        b'F' => KeyCode::End,
        b'P' => KeyCode::F(1),
        b'Q' => KeyCode::F(2),
        b'R' => KeyCode::F(3),
        _ => KeyCode::F(4),
    }
}

/// xterm's modifier parameter (1 + a bit per modifier).
fn modifiers(param: u32) -> KeyModifiers {
    let bits = param.saturating_sub(1);
    let mut m = KeyModifiers::empty();
    for (bit, modifier) in [
        (1, KeyModifiers::SHIFT),
        (2, KeyModifiers::ALT),
        (4, KeyModifiers::CONTROL),
        (8, KeyModifiers::SUPER),
        (16, KeyModifiers::HYPER),
        (32, KeyModifiers::META),
    ] {
        if bits & bit != 0 {
            m |= modifier;
        }
    }
    m
}

/// A control sequence (`ESC [` params final).
fn csi(b: &[u8]) -> Step {
    let Some(end) = b.iter().skip(2).position(|c| (0x40..=0x7e).contains(c)) else {
        // Parameters and intermediates only so far.
        return if b[2..].iter().all(|c| (0x20..=0x3f).contains(c)) {
            Step::Incomplete
        } else {
            Step::Skip(b.len())
        };
    };
    let end = end + 2;
    let used = end + 1;
    let params = &b[2..end];
    let final_byte = b[end];
    // Answers to queries (`?`: device attributes, keyboard flags), mouse reports (`<`).
    if params
        .first()
        .is_some_and(|c| matches!(c, b'?' | b'<' | b'>' | b'='))
    {
        return Step::Skip(used);
    }
    let Ok(params) = std::str::from_utf8(params) else {
        return Step::Skip(used);
    };
    // Each parameter may carry sub-parameters after `:`; the first is the value.
    let fields: Vec<Vec<u32>> = params
        .split(';')
        .map(|p| p.split(':').map(|s| s.parse().unwrap_or(0)).collect())
        .collect();
    let field = |i: usize, j: usize| fields.get(i).and_then(|f| f.get(j)).copied();
    let mods = modifiers(field(1, 0).unwrap_or(1));
    let event = match final_byte {
        b'A' | b'B' | b'C' | b'D' | b'H' | b'F' | b'P' | b'Q' | b'S' => {
            key(cursor_key(final_byte), mods)
        }
        // F3 with modifiers; a cursor position report (never asked for) otherwise.
        b'R' if field(0, 0) == Some(1) && fields.len() == 2 => key(KeyCode::F(3), mods),
        b'Z' => key(KeyCode::BackTab, KeyModifiers::SHIFT),
        b'~' => match field(0, 0).unwrap_or(0) {
            200 => return Step::PasteStart(used),
            // xterm's modifyOtherKeys: `27 ; modifiers ; character`.
            27 => {
                let Some(code) = field(2, 0) else {
                    return Step::Skip(used);
                };
                match code_key(code, mods) {
                    Some(event) => event,
                    None => return Step::Skip(used),
                }
            }
            n => {
                let code = match n {
                    1 | 7 => KeyCode::Home,
                    2 => KeyCode::Insert,
                    3 => KeyCode::Delete,
                    4 | 8 => KeyCode::End,
                    5 => KeyCode::PageUp,
                    6 => KeyCode::PageDown,
                    11..=15 => KeyCode::F((n - 10) as u8),
                    17..=21 => KeyCode::F((n - 11) as u8),
                    23..=26 => KeyCode::F((n - 12) as u8),
                    28 | 29 => KeyCode::F((n - 15) as u8),
                    31..=34 => KeyCode::F((n - 17) as u8),
                    _ => return Step::Skip(used),
                };
                key(code, mods)
            }
        },
        // The kitty keyboard protocol: `code ; modifiers[:event type] u`.
        b'u' => {
            // A key's release is reported only on request; none is made, but it is no press.
            if field(1, 1) == Some(3) {
                return Step::Skip(used);
            }
            match field(0, 0).and_then(|code| code_key(code, mods)) {
                Some(Event::Key(mut k)) => {
                    if field(1, 1) == Some(2) {
                        k.kind = KeyEventKind::Repeat;
                    }
                    Event::Key(k)
                }
                _ => return Step::Skip(used),
            }
        }
        _ => return Step::Skip(used),
    };
    Step::Event(event, used)
}

/// The key of a Unicode code point or a kitty functional-key number, with `mods`.
fn code_key(code: u32, mods: KeyModifiers) -> Option<Event> {
    let code = match code {
        13 | 57414 => KeyCode::Enter,
        9 if mods.contains(KeyModifiers::SHIFT) => KeyCode::BackTab,
        9 => KeyCode::Tab,
        27 => KeyCode::Esc,
        8 | 127 => KeyCode::Backspace,
        57399..=57408 => KeyCode::Char(char::from_digit(code - 57399, 10)?),
        57409 => KeyCode::Char('.'),
        57410 => KeyCode::Char('/'),
        57411 => KeyCode::Char('*'),
        57412 => KeyCode::Char('-'),
        57413 => KeyCode::Char('+'),
        57415 => KeyCode::Char('='),
        57417 => KeyCode::Left,
        57418 => KeyCode::Right,
        57419 => KeyCode::Up,
        57420 => KeyCode::Down,
        57421 => KeyCode::PageUp,
        57422 => KeyCode::PageDown,
        57423 => KeyCode::Home,
        57424 => KeyCode::End,
        57425 => KeyCode::Insert,
        57426 => KeyCode::Delete,
        57376..=57398 => KeyCode::F((code - 57376 + 13) as u8),
        // Other private-use numbers: lock keys, media keys, modifiers alone.
        57344..=63743 => return None,
        _ => return Some(char_key(char::from_u32(code)?, mods)),
    };
    Some(key(code, mods))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(bytes: &[u8]) -> Vec<String> {
        let mut decoder = Decoder::default();
        let mut events = decoder.feed(bytes, false);
        events.extend(decoder.flush());
        events.iter().map(describe).collect()
    }

    fn describe(event: &Event) -> String {
        match event {
            Event::Key(k) => format!("{:?} {:?}", k.code, k.modifiers),
            Event::Paste(text) => format!("paste {text:?}"),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn shift_enter_is_read_in_the_kitty_and_the_xterm_forms_and_enter_stays_enter() {
        let shift_enter = "Enter KeyModifiers(SHIFT)";
        assert_eq!(keys(b"\x1b[13;2u"), [shift_enter]);
        assert_eq!(keys(b"\x1b[27;2;13~"), [shift_enter]);
        assert_eq!(keys(b"\r"), ["Enter KeyModifiers(0x0)"]);
        // Alt+Enter, the follow-up, in the legacy, xterm and kitty forms.
        let alt_enter = "Enter KeyModifiers(ALT)";
        assert_eq!(keys(b"\x1b\r"), [alt_enter]);
        assert_eq!(keys(b"\x1b[27;3;13~"), [alt_enter]);
        assert_eq!(keys(b"\x1b[13;3u"), [alt_enter]);
        // Ctrl+J, the other new line; Ctrl+C as modifyOtherKeys level 2 sends it.
        assert_eq!(keys(b"\n"), ["Char('j') KeyModifiers(CONTROL)"]);
        assert_eq!(keys(b"\x1b[27;5;99~"), ["Char('c') KeyModifiers(CONTROL)"]);
        assert_eq!(keys(b"\x1b[27;5;106~"), ["Char('j') KeyModifiers(CONTROL)"]);
    }

    #[test]
    fn keys_decode_as_crossterm_decodes_them() {
        assert_eq!(
            keys("aÉ€\x03\x7f\t\x1b[Z".as_bytes()),
            [
                "Char('a') KeyModifiers(0x0)",
                "Char('É') KeyModifiers(SHIFT)",
                "Char('€') KeyModifiers(0x0)",
                "Char('c') KeyModifiers(CONTROL)",
                "Backspace KeyModifiers(0x0)",
                "Tab KeyModifiers(0x0)",
                "BackTab KeyModifiers(SHIFT)",
            ]
        );
        assert_eq!(
            keys(b"\x1b[A\x1bOB\x1b[1;5C\x1b[5~\x1b[3;2~\x1b[15~\x1bOP"),
            [
                "Up KeyModifiers(0x0)",
                "Down KeyModifiers(0x0)",
                "Right KeyModifiers(CONTROL)",
                "PageUp KeyModifiers(0x0)",
                "Delete KeyModifiers(SHIFT)",
                "F(5) KeyModifiers(0x0)",
                "F(1) KeyModifiers(0x0)",
            ]
        );
        assert_eq!(
            keys(b"\x1bx\x1b[99;5u\x1b[97;6u"),
            [
                "Char('x') KeyModifiers(ALT)",
                "Char('c') KeyModifiers(CONTROL)",
                "Char('a') KeyModifiers(SHIFT | CONTROL)",
            ]
        );
    }

    #[test]
    fn a_lone_esc_waits_for_the_rest_only_when_more_is_coming() {
        let mut decoder = Decoder::default();
        assert!(decoder.feed(b"\x1b", true).is_empty());
        assert!(decoder.waiting());
        assert_eq!(
            decoder
                .feed(b"[B", false)
                .iter()
                .map(describe)
                .collect::<Vec<_>>(),
            ["Down KeyModifiers(0x0)"]
        );
        assert_eq!(keys(b"\x1b"), ["Esc KeyModifiers(0x0)"]);
        assert_eq!(
            keys(b"\x1b\x1b"),
            ["Esc KeyModifiers(0x0)", "Esc KeyModifiers(0x0)"]
        );
        // A sequence split between reads completes with its second half.
        let mut decoder = Decoder::default();
        assert!(decoder.feed(b"\x1b[27;2", false).is_empty());
        assert_eq!(
            decoder
                .feed(b";13~", false)
                .iter()
                .map(describe)
                .collect::<Vec<_>>(),
            ["Enter KeyModifiers(SHIFT)"]
        );
        // An unfinished one that never completes is taken as typed.
        let mut decoder = Decoder::default();
        assert!(decoder.feed(b"\x1b[", false).is_empty());
        assert_eq!(
            decoder.flush().iter().map(describe).collect::<Vec<_>>(),
            ["Esc KeyModifiers(0x0)", "Char('[') KeyModifiers(0x0)"]
        );
    }

    #[test]
    fn a_bracketed_paste_is_one_event_even_split_across_reads() {
        let mut decoder = Decoder::default();
        let mut events = decoder.feed(b"x\x1b[200~line\r\n\x1b[A", false);
        assert!(decoder.paste.is_some());
        events.extend(decoder.feed(b"more\x1b[20", false));
        events.extend(decoder.feed(b"1~y", false));
        assert_eq!(
            events.iter().map(describe).collect::<Vec<_>>(),
            [
                "Char('x') KeyModifiers(0x0)",
                "paste \"line\\r\\n\\u{1b}[Amore\"",
                "Char('y') KeyModifiers(0x0)",
            ]
        );
    }

    #[test]
    fn answers_to_queries_are_no_keys() {
        assert_eq!(
            keys(b"\x1b]11;rgb:0000/0000/0000\x1b\\\x1b[?62;22c\x1b[?1u\x1b[12;40Rz"),
            ["Char('z') KeyModifiers(0x0)"]
        );
        assert_eq!(
            keys(b"\x1b]10;rgb:ffff/ffff/ffff\x07"),
            Vec::<String>::new()
        );
    }
}
