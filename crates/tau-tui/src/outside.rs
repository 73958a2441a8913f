//! What the App asks of the terminal ([`App::request`]), carried out by the event loop between
//! two frames: the screen left for `$VISUAL`/`$EDITOR` (Ctrl+G) or for a stop (Ctrl+Z) and
//! taken back after, an image read from the clipboard (Ctrl+V), `/share`'s gist made by `gh`
//! on a thread of its own. While the screen is left, the key reader is held at its gate
//! ([`read_event`]), so that every key typed goes to the editor and none to tau.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, mpsc};
use std::time::Duration;

use crossterm::event::Event;

use crate::app::{App, IMAGE_CAP, Request};
use crate::inline::Screen;
use crate::transcript::NoticeKind;

/// Whether the key reader may read, and whether it is reading now.
struct Gate {
    held: bool,
    reading: bool,
}

static GATE: Mutex<Gate> = Mutex::new(Gate {
    held: false,
    reading: false,
});
static TURN: Condvar = Condvar::new();

/// How long the key reader waits for a key before it looks at its gate again: also the
/// longest a held gate waits for it.
const POLL: Duration = Duration::from_millis(50);

/// How long a clipboard tool may take.
const CLIPBOARD_TIMEOUT: Duration = Duration::from_secs(5);

/// Messages of `/share`'s thread, for the App.
static SAID: Mutex<Vec<(String, NoticeKind)>> = Mutex::new(Vec::new());

fn gate() -> MutexGuard<'static, Gate> {
    GATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The next terminal event, as `tty::read` gives it, except while the screen is
/// lent to another program: then nothing is read until it is taken back.
pub fn read_event() -> io::Result<Event> {
    loop {
        {
            let mut gate = gate();
            while gate.held {
                gate = TURN.wait(gate).unwrap_or_else(PoisonError::into_inner);
            }
            gate.reading = true;
        }
        let ready = crate::tty::poll(POLL);
        let held = {
            let mut gate = gate();
            gate.reading = false;
            TURN.notify_all();
            gate.held
        };
        // A key read before the gate closed stays in the reader's queue until it opens.
        if ready? && !held {
            return crate::tty::read();
        }
    }
}

/// Closes the gate and waits until the reader is out of its read.
fn hold() {
    let mut gate = gate();
    gate.held = true;
    while gate.reading {
        gate = TURN.wait(gate).unwrap_or_else(PoisonError::into_inner);
    }
}

fn release() {
    gate().held = false;
    TURN.notify_all();
}

/// Carries out the App's request, if it made one, and passes on what `/share`'s thread has
/// to say. Called once per turn of the event loop.
pub fn tend(app: &mut App, terminal: &mut Screen) -> io::Result<()> {
    let said = std::mem::take(&mut *SAID.lock().unwrap_or_else(PoisonError::into_inner));
    for (text, kind) in said {
        app.tell(text, kind);
    }
    let Some(request) = app.request.take() else {
        return Ok(());
    };
    match request {
        Request::Edit(text) => edit(app, terminal, &text)?,
        Request::Suspend => suspend(terminal)?,
        Request::PasteImage => match clipboard_image() {
            Ok((kind, bytes)) => app.attach_image(kind, &bytes),
            Err(why) => app.tell(why, NoticeKind::Warning),
        },
        Request::Share(html) => share(app, html),
    }
    app.dirty = true;
    Ok(())
}

/// The terminal as the shell had it: the same steps as leaving tau.
pub fn leave(terminal: &mut Screen) -> io::Result<()> {
    terminal.leave()
}

/// The terminal as tau draws on it again, the live part drawn anew below what the other
/// program left.
pub fn enter(terminal: &mut Screen) -> io::Result<()> {
    terminal.enter()
}

/// The editor the user named, as a shell command line (`code --wait` has arguments).
fn editor_command() -> Option<String> {
    ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|value| value.to_string_lossy().trim().to_string())
        .find(|value| !value.is_empty())
}

/// Ctrl+G: `text` in a temporary file, the editor run on it on the terminal, the file read
/// back into the editor when the editor ends well.
fn edit(app: &mut App, terminal: &mut Screen, text: &str) -> io::Result<()> {
    let Some(editor) = editor_command() else {
        app.tell(
            "Ctrl+G opens the message in your editor: set $VISUAL or $EDITOR",
            NoticeKind::Warning,
        );
        return Ok(());
    };
    let prepared = tempfile::Builder::new()
        .prefix("tau-message-")
        .suffix(".md")
        .tempfile()
        .and_then(|mut file| file.write_all(text.as_bytes()).map(|()| file))
        .and_then(|file| {
            let tty = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/tty")?;
            Ok((file, tty))
        });
    let (file, tty) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            app.tell(format!("Ctrl+G: {e}"), NoticeKind::Error);
            return Ok(());
        }
    };
    hold();
    let ran = leave(terminal).and_then(|()| {
        // tau's own stdout and stderr are its log while the screen is in use: the editor gets
        // the terminal itself. `$1` keeps a path with spaces one argument.
        Command::new("sh")
            .arg("-c")
            .arg(format!("{editor} \"$1\""))
            .arg("sh")
            .arg(file.path())
            .stdin(tty.try_clone()?)
            .stdout(tty.try_clone()?)
            .stderr(tty)
            .status()
    });
    let back = enter(terminal);
    release();
    back?;
    match ran {
        Ok(status) if status.success() => {
            match tau_base::bounded::read_to_string(file.path(), tau_base::bounded::TEXT_CAP) {
                Ok(edited) => app.edited(&edited),
                Err(e) => app.tell(
                    format!("The edited message was not read: {e}"),
                    NoticeKind::Error,
                ),
            }
        }
        Ok(status) => app.tell(
            format!("{editor} ended with {status}: the message is as it was"),
            NoticeKind::Warning,
        ),
        Err(e) => app.tell(format!("{editor} did not run: {e}"), NoticeKind::Error),
    }
    Ok(())
}

/// Ctrl+Z: the terminal given back, then the whole process group stopped (the shell's job),
/// and the screen taken again once the shell continues it (`fg`).
fn suspend(terminal: &mut Screen) -> io::Result<()> {
    leave(terminal)?;
    // The signal stops the process when a thread takes it, which may be another thread a
    // moment after this call returns: the pause keeps this one from taking the terminal back
    // first. In a group without a shell's job control the signal is discarded, and the screen
    // comes back at once.
    let _ = rustix::process::kill_current_process_group(rustix::process::Signal::TSTP);
    std::thread::sleep(Duration::from_millis(100));
    enter(terminal)
}

/// Whether `program` is an executable file in a folder of `$PATH`.
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// What `program` writes to stdout, when it ends well within the clipboard's time and writes
/// no more than an image may hold.
fn captured(program: &str, args: &[&str]) -> Option<Vec<u8>> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let stdout = child.stdout.take()?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let read = stdout.take(IMAGE_CAP + 1).read_to_end(&mut bytes);
        let _ = tx.send(read.map(|_| bytes));
    });
    let read = rx.recv_timeout(CLIPBOARD_TIMEOUT);
    if read.is_err() {
        let _ = child.kill();
    }
    let status = child.wait().ok()?;
    let bytes = read.ok()?.ok()?;
    (status.success() && bytes.len() as u64 <= IMAGE_CAP).then_some(bytes)
}

/// The image types a prompt carries, as clipboards name them, best first.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/webp", "image/gif"];

/// Ctrl+V: the clipboard's image and its type, through `wl-paste` on Wayland or `xclip` on X11.
fn clipboard_image() -> Result<(&'static str, Vec<u8>), String> {
    // The program and the arguments that list the clipboard's types, then those that read one
    // type (`{}` stands for it).
    let (program, list, read): (&str, &[&str], &[&str]) =
        if std::env::var_os("WAYLAND_DISPLAY").is_some() && on_path("wl-paste") {
            (
                "wl-paste",
                &["--list-types"],
                &["--no-newline", "--type", "{}"],
            )
        } else if std::env::var_os("DISPLAY").is_some() && on_path("xclip") {
            (
                "xclip",
                &["-selection", "clipboard", "-t", "TARGETS", "-o"],
                &["-selection", "clipboard", "-t", "{}", "-o"],
            )
        } else {
            return Err(
                "Ctrl+V reads images from the clipboard with wl-paste (Wayland) or xclip \
                 (X11), and neither is available here: paste the image file's path instead"
                    .into(),
            );
        };
    let types = captured(program, list).unwrap_or_default();
    let types = String::from_utf8_lossy(&types);
    let offered: Vec<&str> = types.lines().map(str::trim).collect();
    let Some(kind) = IMAGE_TYPES.iter().find(|kind| offered.contains(kind)) else {
        return Err("The clipboard holds no image (PNG, JPEG, WebP or GIF)".into());
    };
    let args: Vec<&str> = read
        .iter()
        .map(|arg| if *arg == "{}" { *kind } else { *arg })
        .collect();
    match captured(program, &args) {
        Some(bytes) if !bytes.is_empty() => Ok((kind, bytes)),
        _ => Err(format!(
            "The clipboard's image could not be read (or is over {} MB)",
            IMAGE_CAP >> 20
        )),
    }
}

fn say(text: String, kind: NoticeKind) {
    SAID.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((text, kind));
}

/// `/share`: the exported page in a secret gist, made by `gh` on a thread of its own (it
/// takes the network's time); the page is deleted afterwards.
fn share(app: &mut App, html: PathBuf) {
    if !on_path("gh") {
        app.tell(
            format!(
                "/share makes a secret gist with the GitHub CLI (gh), which is not installed \
                 (https://cli.github.com). The session is exported to {}",
                html.display()
            ),
            NoticeKind::Warning,
        );
        return;
    }
    app.tell("Creating a secret gist…", NoticeKind::Info);
    let spawned = std::thread::Builder::new()
        .name("tau-tui-share".into())
        .spawn(move || {
            let made = Command::new("gh")
                .args(["gist", "create", "--public=false", "--desc", "tau session"])
                .arg(&html)
                .stdin(Stdio::null())
                .output();
            remove_export(&html);
            match made {
                Ok(out) if out.status.success() => say(
                    format!(
                        "Shared as a secret gist: {}",
                        String::from_utf8_lossy(&out.stdout).trim()
                    ),
                    NoticeKind::Info,
                ),
                Ok(out) => say(
                    format!(
                        "gh gist create failed: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ),
                    NoticeKind::Error,
                ),
                Err(e) => say(format!("gh did not run: {e}"), NoticeKind::Error),
            }
        });
    if let Err(e) = spawned {
        app.tell(format!("/share: {e}"), NoticeKind::Error);
    }
}

/// The exported page and the temporary folder made for it.
fn remove_export(html: &Path) {
    let _ = std::fs::remove_file(html);
    if let Some(dir) = html.parent() {
        let _ = std::fs::remove_dir(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_gate_waits_for_the_reader_and_stops_it_until_released() {
        {
            let mut gate = gate();
            gate.reading = true;
        }
        let held = std::thread::spawn(|| {
            hold();
            gate().held
        });
        std::thread::sleep(Duration::from_millis(30));
        assert!(!held.is_finished(), "hold waits while a read is under way");
        {
            let mut gate = gate();
            gate.reading = false;
            TURN.notify_all();
        }
        assert!(held.join().unwrap());
        release();
        assert!(!gate().held);
    }

    #[test]
    fn only_executables_on_the_path_count() {
        assert!(on_path("sh"));
        assert!(!on_path("tau-no-such-program"));
    }
}
