//! The interactive session (`tau` on a terminal) through a pseudo-terminal: keys go in as a
//! person types them, and the screen is read back through a terminal emulator (vt100) while
//! tau-mock-llm answers.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use serde_json::json;
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::Dirs;

const WAIT: Duration = Duration::from_secs(20);

/// Lines of scrollback the emulated terminal keeps.
const SCROLLBACK: usize = 10_000;

/// tau in a pseudo-terminal, and what its screen shows.
struct Terminal {
    parser: Arc<Mutex<vt100::Parser>>,
    /// Every byte tau wrote to the terminal.
    output: Arc<Mutex<Vec<u8>>>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    master: Box<dyn MasterPty + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
}

/// What the emulated terminal answers when asked for its background colour.
const DARK: &str = "rgb:0000/0000/0000";
const LIGHT: &str = "rgb:ffff/ffff/ffff";

impl Terminal {
    fn start(dirs: &Dirs, args: &[&str], size: (u16, u16)) -> Self {
        Self::start_on(dirs, args, size, DARK)
    }

    /// Like a real terminal, this one answers the queries of its colours (OSC 10 and 11, with
    /// `background` and its opposite) and of its attributes (DA1).
    fn start_on(dirs: &Dirs, args: &[&str], size: (u16, u16), background: &'static str) -> Self {
        Self::start_with(dirs, args, size, background, &[])
    }

    /// [`Terminal::start_on`] with more variables in tau's environment.
    fn start_with(
        dirs: &Dirs,
        args: &[&str],
        size: (u16, u16),
        background: &'static str,
        env: &[(&str, &std::path::Path)],
    ) -> Self {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: size.1,
                cols: size.0,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("a pseudo-terminal");
        let mut command = CommandBuilder::new(env!("CARGO_BIN_EXE_tau"));
        command.args(args);
        command.cwd(dirs.cwd());
        command.env_clear();
        command.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        command.env("HOME", dirs.home());
        command.env("TAU_AGENT_DIR", dirs.agent_dir());
        command.env("TERM", "xterm-256color");
        for (name, value) in env {
            command.env(name, value);
        }
        let child = pty.slave.spawn_command(command).expect("tau starts");
        drop(pty.slave);
        // A scrollback, as a terminal keeps one: the conversation is written into it.
        let parser = Arc::new(Mutex::new(vt100::Parser::new(
            nonzero(size.1),
            nonzero(size.0),
            SCROLLBACK,
        )));
        let output = Arc::new(Mutex::new(Vec::new()));
        let written = Arc::clone(&output);
        let mut reader = pty
            .master
            .try_clone_reader()
            .expect("the terminal's output");
        let screen = Arc::clone(&parser);
        let writer: Arc<Mutex<Box<dyn Write + Send>>> = Arc::new(Mutex::new(
            pty.master.take_writer().expect("the terminal's input"),
        ));
        let answers = Arc::clone(&writer);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let chunk = &buf[..n];
                screen.lock().unwrap().process(chunk);
                written.lock().unwrap().extend_from_slice(chunk);
                let asked = |query: &[u8]| chunk.windows(query.len()).any(|w| w == query);
                let mut answer = Vec::new();
                if asked(b"\x1b]10;?") {
                    let foreground = if background == DARK { LIGHT } else { DARK };
                    answer.extend_from_slice(format!("\x1b]10;{foreground}\x1b\\").as_bytes());
                }
                if asked(b"\x1b]11;?") {
                    answer.extend_from_slice(format!("\x1b]11;{background}\x1b\\").as_bytes());
                }
                if asked(b"\x1b[c") {
                    answer.extend_from_slice(b"\x1b[?62;22c");
                }
                if !answer.is_empty() {
                    let mut writer = answers.lock().unwrap();
                    let _ = writer.write_all(&answer);
                    let _ = writer.flush();
                }
            }
        });
        Self {
            parser,
            output,
            writer,
            master: pty.master,
            child,
        }
    }

    /// Every line the terminal holds, its scrollback's first, trailing blanks cut.
    fn history(&self) -> Vec<String> {
        let mut parser = self.parser.lock().unwrap();
        let screen = parser.screen_mut();
        let cols = screen.size().1.get();
        screen.set_scrollback(usize::MAX);
        let back = screen.scrollback();
        let mut lines = Vec::new();
        // Each step back shows one more line of the scrollback at the top.
        for offset in (1..=back).rev() {
            screen.set_scrollback(offset);
            lines.push(screen.rows(0, cols).next().unwrap_or_default());
        }
        screen.set_scrollback(0);
        lines.extend(screen.rows(0, cols));
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
        lines
    }

    /// The conversation shown now: the lines after the rule that ends a replaced one (if
    /// any) and before the editor's rule.
    fn conversation(&self) -> Vec<String> {
        let lines = self.history();
        let rules: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].len() > 20 && lines[i].chars().all(|c| c == '─'))
            .collect();
        let end = rules.last().copied().unwrap_or(lines.len());
        let start = rules.iter().rev().nth(1).map_or(0, |&i| i + 1);
        lines[start..end].to_vec()
    }

    /// The row of the terminal's cursor.
    fn cursor_row(&self) -> u16 {
        self.parser.lock().unwrap().screen().cursor_position().0
    }

    /// Waits until the conversation shown passes `check`; returns it.
    fn wait_for_conversation(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let shown = self.conversation().join("\n");
            if check(&shown) {
                return shown;
            }
            assert!(
                start.elapsed() < WAIT,
                "the conversation never showed {what}:\n{shown}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wrote(&self, bytes: &str) -> bool {
        let output = self.output.lock().unwrap();
        output.windows(bytes.len()).any(|w| w == bytes.as_bytes())
    }

    fn contents(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    /// Waits until the screen shows `text`; returns the screen.
    fn wait_for(&self, text: &str) -> String {
        self.wait_until(text, |screen| screen.contains(text))
    }

    /// Waits until the screen passes `check` (a frame may be read half drawn, so everything
    /// asserted about one frame is waited for); returns the screen.
    fn wait_until(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.contents();
            if check(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < WAIT,
                "the screen never showed {what}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn keys(&mut self, keys: &str) {
        let mut writer = self.writer.lock().unwrap();
        writer.write_all(keys.as_bytes()).unwrap();
        writer.flush().unwrap();
    }

    /// Types `text` and presses Enter.
    fn submit(&mut self, text: &str) {
        self.keys(text);
        // The text and the Enter as two reads, as from a person: a paste would be one.
        std::thread::sleep(Duration::from_millis(50));
        self.keys("\r");
    }

    /// The row that contains `text`, and the cell where it starts.
    fn find(&self, text: &str) -> Option<(u16, u16)> {
        let parser = self.parser.lock().unwrap();
        let screen = parser.screen();
        let (rows, cols) = screen.size();
        for row in 0..rows.get() {
            let line = screen.contents_between(row, 0, row, cols.get());
            if let Some(byte) = line.find(text) {
                return Some((row, line[..byte].chars().count() as u16));
            }
        }
        None
    }

    fn exits_within(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

fn nonzero(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap()
}

fn dirs_with_models(mock: &BackgroundMock) -> Dirs {
    let dirs = Dirs::new();
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "mock-1", "contextWindow": 100000, "maxTokens": 4096},
                   {"id": "mock-2", "contextWindow": 200000, "maxTokens": 4096, "reasoning": true}],
    }}});
    std::fs::write(dirs.agent_dir().join("models.json"), models.to_string()).unwrap();
    std::fs::write(
        dirs.agent_dir().join("settings.json"),
        // A background named in the settings: tau does not ask the terminal, whose answer,
        // late on a loaded machine, would arrive as typed keys.
        r#"{"retry": {"enabled": false}, "theme": "dark"}"#,
    )
    .unwrap();
    dirs
}

#[test]
fn a_prompt_streams_its_answer_as_rendered_markdown() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().text_chunks([
        "## Plan\n\n",
        "Some **bold** words and `code`.\n\n",
        "- one\n- two\n",
    ]));
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (80, 24));
    term.wait_for("mock/mock-1");
    term.submit("make a plan");
    let screen = term.wait_for("• two");
    assert!(screen.contains("› make a plan"), "{screen}");
    assert!(screen.contains("## Plan"), "{screen}");
    assert!(
        screen.contains("Some bold words and code."),
        "the Markdown marks are rendered, not shown:\n{screen}"
    );
    let (row, col) = term.find("bold").unwrap();
    let parser = term.parser.lock().unwrap();
    assert!(
        parser.screen().cell(row, col).unwrap().bold(),
        "bold text is bold"
    );
    drop(parser);
    // The request carried what was typed.
    let body = &mock.requests()[0].body;
    assert!(body.to_string().contains("make a plan"));
}

#[test]
fn a_tool_call_shows_its_arguments_and_diff() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call(
        "call_1",
        "edit",
        json!({"path": "notes.txt", "edits": [{"oldText": "old line", "newText": "new line"}]}),
    ));
    mock.push(Reply::text("Edited."));
    let dirs = dirs_with_models(&mock);
    std::fs::write(dirs.cwd().join("notes.txt"), "first\nold line\nlast\n").unwrap();
    let mut term = Terminal::start(&dirs, &[], (80, 24));
    term.wait_for("mock/mock-1");
    term.submit("edit the notes");
    let screen = term.wait_for("Edited.");
    assert!(screen.contains("● edit notes.txt"), "{screen}");
    let removed = screen
        .lines()
        .find(|l| l.contains("old line"))
        .unwrap_or_default();
    let added = screen
        .lines()
        .find(|l| l.contains("new line"))
        .unwrap_or_default();
    assert!(removed.trim_start().starts_with('-'), "{screen}");
    assert!(added.trim_start().starts_with('+'), "{screen}");
    assert_eq!(
        std::fs::read_to_string(dirs.cwd().join("notes.txt")).unwrap(),
        "first\nnew line\nlast\n"
    );
}

#[test]
fn bash_output_is_shown_as_it_streams() {
    let mock = MockServer::start_background().unwrap();
    // The command prints, then waits for the test to let it go on.
    mock.push(Reply::new().tool_call(
        "call_1",
        "bash",
        json!({"command": "printf 'out%s\\n' -one; while [ ! -f go ]; do sleep 0.05; done; printf 'out%s\\n' -two"}),
    ));
    mock.push(Reply::text("Ran."));
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (80, 24));
    term.wait_for("mock/mock-1");
    term.submit("run it");
    // (The command line shows `out%s`, never the printed words.)
    let screen = term.wait_for("out-one");
    assert!(!screen.contains("out-two"), "{screen}");
    assert!(
        screen.contains("◌ bash"),
        "the call is shown running:\n{screen}"
    );
    std::fs::write(dirs.cwd().join("go"), "").unwrap();
    let screen = term.wait_for("Ran.");
    assert!(screen.contains("out-two"), "{screen}");
}

#[test]
fn esc_aborts_the_reply_and_enter_steers_it() {
    let mock = MockServer::start_background().unwrap();
    let chunks: Vec<String> = (0..200).map(|i| format!("word{i} ")).collect();
    mock.push(Reply::new().text_chunks(chunks.clone()).chunk_delay_ms(30));
    mock.push(Reply::new().text_chunks(chunks).chunk_delay_ms(30));
    mock.push(Reply::text("Steered answer."));
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (80, 24));
    term.wait_for("mock/mock-1");
    term.submit("talk");
    term.wait_for("word3 ");
    term.keys("\x1b");
    term.wait_for("Error: aborted");
    assert!(!term.contents().contains("word199"), "the reply stopped");

    // Enter while a reply streams sends a steering message, delivered after it.
    term.submit("again");
    term.wait_for("word3 ");
    term.submit("shorter please");
    let screen = term.wait_for("Steered answer.");
    assert!(screen.contains("› shorter please"), "{screen}");
    let last = mock.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("shorter please"),
        "the steering message reached the model"
    );
}

#[test]
fn the_model_picker_switches_the_model() {
    let mock = MockServer::start_background().unwrap();
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (80, 24));
    term.wait_for("mock/mock-1");
    term.submit("/model");
    term.wait_for("↑↓ choose");
    term.keys("\x1b[B");
    std::thread::sleep(Duration::from_millis(50));
    term.keys("\r");
    // A reasoning model: its thinking level is asked next.
    term.wait_for("Thinking level");
    for _ in 0..8 {
        if term.contents().contains("› high") {
            break;
        }
        term.keys("\x1b[B");
        std::thread::sleep(Duration::from_millis(50));
    }
    term.wait_for("› high");
    term.keys("\r");
    // The footer (the row below the editor's) names the new model, its level and its
    // context window.
    let screen = term.wait_for("mock/mock-2 • high • ctx 0/200.0k");
    assert_eq!(
        term.find("mock/mock-2").map(|(row, _)| row),
        Some(term.cursor_row() + 1),
        "{screen}"
    );
    assert!(
        !screen.contains("↑↓ choose"),
        "the picker closed:\n{screen}"
    );
}

#[test]
fn resume_reopens_an_earlier_session_and_shows_it() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("First answer."));
    let dirs = dirs_with_models(&mock);
    {
        let mut term = Terminal::start(&dirs, &[], (80, 24));
        term.wait_for("mock/mock-1");
        term.submit("remember the plan");
        term.wait_for("First answer.");
        term.submit("/quit");
        assert!(term.exits_within(Duration::from_secs(10)), "/quit ends tau");
    }
    let mut term = Terminal::start(&dirs, &["--resume"], (80, 24));
    let picker = term.wait_for("remember the plan");
    assert!(picker.contains("Resume"), "{picker}");
    term.keys("\r");
    let screen = term.wait_for("First answer.");
    assert!(screen.contains("› remember the plan"), "{screen}");
}

/// Two exchanges on the screen: "first question" → "First answer.", "second question" →
/// "Second answer.".
fn two_exchanges(term: &mut Terminal) {
    term.wait_for("mock/mock-1");
    term.submit("first question");
    term.wait_for("First answer.");
    term.submit("second question");
    term.wait_for("Second answer.");
}

#[test]
fn tree_goes_back_to_an_earlier_message_and_the_next_prompt_branches() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("First answer."));
    mock.push(Reply::text("Second answer."));
    mock.push(Reply::text("Third answer."));
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (80, 24));
    two_exchanges(&mut term);

    term.submit("/tree");
    // The current leaf is selected (the last row); the row above is the second question.
    let picker = term.wait_for("› ● assistant: Second answer.");
    assert!(picker.contains("● user: first question"), "{picker}");
    term.keys("\x1b[A");
    term.wait_for("› ● user: second question");
    term.keys("\r");
    term.wait_for("Summarise the branch you leave?");
    term.keys("\r");
    term.wait_for("Moved in the session tree");
    // The message is back in the editor, drawn below the conversation, which is written again
    // into the scrollback after a rule.
    term.wait_for("› second question");
    let shown = term.wait_for_conversation("the branch up to the first answer", |shown| {
        shown.contains("First answer.") && shown.contains("Moved in the session tree")
    });
    assert!(!shown.contains("Second answer."), "{shown}");

    // Cleared, a new question starts a branch beside the old one.
    term.keys("\x03");
    term.submit("another question");
    term.wait_for("Third answer.");
    let request = mock.requests().last().unwrap().body.to_string();
    assert!(request.contains("first question") && !request.contains("second question"));
    term.submit("/tree");
    let picker = term.wait_for("└─ ● user: another question");
    assert!(picker.contains("├─   user: second question"), "{picker}");
    term.keys("\x1b");
    term.wait_for("Third answer.");
}

#[test]
fn fork_from_inside_opens_a_new_session_with_the_conversation_before() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("First answer."));
    mock.push(Reply::text("Second answer."));
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (80, 24));
    two_exchanges(&mut term);
    term.submit("/fork");
    term.wait_for("Fork from");
    term.keys("\x1b[B");
    term.keys("\r");
    term.wait_for("Forked into a new session");
    // The forked text is in the editor, drawn below the conversation.
    term.wait_for("› second question");
    let shown = term.wait_for_conversation("the conversation before the fork", |shown| {
        shown.contains("First answer.") && shown.contains("Forked into a new session")
    });
    assert!(!shown.contains("Second answer."), "{shown}");
}

#[test]
fn resume_from_inside_switches_to_an_earlier_session() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("First answer."));
    mock.push(Reply::text("Other answer."));
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (80, 24));
    term.wait_for("mock/mock-1");
    term.submit("remember the plan");
    term.wait_for("First answer.");
    term.submit("/new");
    term.wait_for("New session");
    term.submit("something else");
    term.wait_for("Other answer.");
    term.submit("/resume");
    // The picker lists both sessions, the newer one above.
    let picker = term.wait_until("the picker", |screen| {
        screen
            .lines()
            .any(|l| l.contains('│') && l.contains("remember the plan"))
    });
    let rows: Vec<&str> = picker.lines().filter(|l| l.contains('│')).collect();
    let plan_row = rows.iter().position(|l| l.contains("remember the plan"));
    let other_row = rows.iter().position(|l| l.contains("something else"));
    assert!(
        other_row.is_some() && other_row < plan_row,
        "both listed, newest first:\n{picker}"
    );
    term.keys("\x1b[B");
    term.keys("\r");
    let shown = term.wait_for_conversation("the earlier session", |shown| {
        shown.contains("› remember the plan") && shown.contains("First answer.")
    });
    assert!(!shown.contains("Other answer."), "{shown}");
}

#[test]
fn the_screen_follows_a_resize_and_ctrl_c_twice_quits() {
    let mock = MockServer::start_background().unwrap();
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (100, 30));
    term.wait_for("mock/mock-1");
    let (row, _) = term.find("mock/mock-1").unwrap();
    assert_eq!(row, term.cursor_row() + 1, "the footer is below the editor");
    term.master
        .resize(PtySize {
            rows: 20,
            cols: 60,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    term.parser
        .lock()
        .unwrap()
        .set_size(nonzero(20), nonzero(60));
    let start = Instant::now();
    loop {
        if let Some((row, col)) = term.find("mock/mock-1")
            && row == term.cursor_row() + 1
        {
            assert!(col + "mock/mock-1".len() as u16 <= 60);
            break;
        }
        assert!(
            start.elapsed() < WAIT,
            "no redraw at the new size:\n{}",
            term.contents()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    term.keys("draft");
    term.wait_for("› draft");
    term.keys("\x03");
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !term.contents().contains("› draft"),
        "the first Ctrl+C clears the editor"
    );
    term.keys("\x03");
    term.wait_for("again to quit");
    term.keys("\x03");
    assert!(
        term.exits_within(Duration::from_secs(10)),
        "the second Ctrl+C on an empty editor quits"
    );
}

#[test]
fn an_extension_dialog_is_answered_with_the_keyboard() {
    let mock = MockServer::start_background().unwrap();
    let dirs = dirs_with_models(&mock);
    let extension = format!(
        "{}/tests/fixtures/extensions/acp-dialogs.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut term = Terminal::start(&dirs, &["-e", &extension], (80, 24));
    term.wait_for("mock/mock-1");
    term.submit("/pick");
    term.wait_until("the dialog with its options", |screen| {
        screen.contains("Pick a colour") && screen.contains("red") && screen.contains("blue")
    });
    term.keys("\x1b[B");
    std::thread::sleep(Duration::from_millis(50));
    term.keys("\r");
    // The extension names the session after the answer; the footer shows the name.
    let screen = term.wait_for("pick: green");
    assert!(
        !screen.contains("Pick a colour"),
        "the dialog closed:\n{screen}"
    );
    assert!(
        mock.requests().is_empty(),
        "an extension command is not a prompt for the model"
    );
}

#[test]
fn warnings_from_before_the_screen_are_shown_on_it() {
    let mock = MockServer::start_background().unwrap();
    let dirs = dirs_with_models(&mock);
    std::fs::write(dirs.agent_dir().join("settings.json"), "{ not json").unwrap();
    let term = Terminal::start(&dirs, &[], (100, 24));
    let screen = term.wait_for("mock/mock-1");
    assert!(
        screen.contains("Warning:") && screen.contains("settings.json"),
        "{screen}"
    );
}

#[test]
fn an_untrusted_folder_is_asked_about_before_the_screen_starts() {
    let mock = MockServer::start_background().unwrap();
    let dirs = dirs_with_models(&mock);
    std::fs::create_dir_all(dirs.cwd().join(".pi")).unwrap();
    std::fs::write(
        dirs.cwd().join(".pi/settings.json"),
        r#"{"defaultProvider": "mock", "defaultModel": "mock-2"}"#,
    )
    .unwrap();
    // No: the project's settings stay out, and the screen says so.
    let mut term = Terminal::start(&dirs, &[], (100, 24));
    let question = term.wait_for("[a]lways");
    assert!(question.contains(".pi/settings.json"), "{question}");
    term.keys("n\r");
    let screen = term.wait_for("mock/mock-1");
    assert!(screen.contains("not trusted"), "{screen}");
    term.keys("\x04");
    assert!(term.exits_within(Duration::from_secs(10)));
    drop(term);

    // Always: applied, and remembered, so the next start does not ask.
    let mut term = Terminal::start(&dirs, &[], (100, 24));
    term.wait_for("[a]lways");
    term.keys("a\r");
    term.wait_for("mock/mock-2");
    term.keys("\x04");
    assert!(term.exits_within(Duration::from_secs(10)));
    drop(term);
    let term = Terminal::start(&dirs, &[], (100, 24));
    let screen = term.wait_for("mock/mock-2");
    assert!(!screen.contains("[a]lways"), "{screen}");
}

#[test]
fn an_extension_shortcut_runs_on_its_key_and_tau_keeps_its_own() {
    let mock = MockServer::start_background().unwrap();
    let dirs = dirs_with_models(&mock);
    let extension = format!(
        "{}/tests/fixtures/extensions/shortcut.ts",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut term = Terminal::start(&dirs, &["-e", &extension], (80, 24));
    term.wait_for("mock/mock-1");
    let screen = term.wait_for("shortcut.ts: shortcut ctrl+c not bound");
    assert!(screen.contains("tau's own key"), "{screen}");
    // Ctrl+Alt+K as a terminal sends it: Esc, then Ctrl+K.
    term.keys("\x1b\x0b");
    term.wait_for("Shortcut menu");
    term.keys("\x1b[B");
    std::thread::sleep(Duration::from_millis(50));
    term.keys("\r");
    term.wait_for("shortcut chose beta mode=ui");
    // Ctrl+C stays tau's: it clears the editor.
    term.keys("draft");
    term.wait_for("› draft");
    term.keys("\x03");
    let start = Instant::now();
    while term.contents().contains("› draft") {
        assert!(start.elapsed() < WAIT, "Ctrl+C cleared the editor");
        std::thread::sleep(Duration::from_millis(20));
    }
    term.submit("/hotkeys");
    term.wait_until("the extension's key in /hotkeys", |screen| {
        screen
            .lines()
            .any(|l| l.contains("ctrl+alt+k") && l.contains("shortcut.ts"))
    });
}

#[test]
fn code_blocks_are_highlighted_in_colours_for_the_background() {
    // Dark from the `theme` setting; light from the terminal's answer to tau's question.
    let reply = "```rust\nlet n = 42; // the answer\n```\n";
    for (background, constant) in [(DARK, vt100::Color::Idx(3)), (LIGHT, vt100::Color::Idx(1))] {
        let mock = MockServer::start_background().unwrap();
        mock.push(Reply::text(reply));
        let dirs = dirs_with_models(&mock);
        if background == LIGHT {
            std::fs::write(dirs.agent_dir().join("settings.json"), "{}").unwrap();
        }
        let mut term = Terminal::start_on(&dirs, &[], (80, 24), background);
        term.wait_for("mock/mock-1");
        term.submit("show code");
        term.wait_for("// the answer");
        let colour_of = |text: &str| {
            let (row, col) = term.find(text).unwrap();
            let parser = term.parser.lock().unwrap();
            let cell = parser.screen().cell(row, col).unwrap();
            (cell.fgcolor(), cell.italic())
        };
        assert_eq!(
            colour_of("let").0,
            vt100::Color::Idx(5),
            "a keyword is magenta"
        );
        assert_eq!(colour_of("42").0, constant, "a number, on {background}");
        assert!(colour_of("// the answer").1, "a comment is italic");
    }
}

#[test]
fn a_hang_up_ends_tau_and_keeps_the_conversation() {
    // The terminal going away (its window closed, SSH dropped) comes as SIGHUP: tau leaves the
    // screen, ends the session with what was said saved, and exits.
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("Kept answer."));
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (80, 24));
    term.wait_for("mock/mock-1");
    term.submit("keep this");
    term.wait_for("Kept answer.");
    let pid = term.child.process_id().expect("a pid");
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("a valid pid");
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).expect("signal");
    assert!(
        term.exits_within(Duration::from_secs(10)),
        "SIGHUP ends tau"
    );
    let sessions = walk(&dirs.agent_dir().join("sessions"));
    let saved: String = sessions
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(saved.contains("Kept answer."), "the session was saved");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn a_tool_call_asks_in_ask_mode_and_runs_once_allowed() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call(
        "call_1",
        "bash",
        json!({"command": "echo allowed > made.txt"}),
    ));
    mock.push(Reply::text("Made."));
    let dirs = dirs_with_models(&mock);
    // The user's settings choose the mode the terminal starts in.
    std::fs::write(
        dirs.agent_dir().join("settings.json"),
        r#"{"retry": {"enabled": false}, "theme": "dark", "permissions": {"defaultMode": "ask"}}"#,
    )
    .unwrap();
    let mut term = Terminal::start(&dirs, &[], (100, 24));
    term.wait_for("ask • mock/mock-1");
    term.submit("make it");
    term.wait_until("the permission dialog", |screen| {
        screen.contains("Allow? Run echo allowed > made.txt")
            && screen.contains("Always allow bash(echo) in this session")
    });
    assert!(!dirs.cwd().join("made.txt").exists());
    term.keys("\r");
    term.wait_for("Made.");
    assert_eq!(
        std::fs::read_to_string(dirs.cwd().join("made.txt")).unwrap(),
        "allowed\n"
    );
    // Plan mode from the command line of the session: the footer says so.
    term.submit("/permissions plan");
    term.wait_for("plan • mock/mock-1");
}

#[test]
fn a_first_run_without_a_key_says_what_to_do_and_keeps_the_prompt() {
    // No models.json, no auth.json, no key in the environment.
    let dirs = Dirs::new();
    std::fs::write(
        dirs.agent_dir().join("settings.json"),
        r#"{"theme": "dark"}"#,
    )
    .unwrap();
    let mut term = Terminal::start(&dirs, &[], (100, 30));
    let screen = term.wait_until("the start screen and the warning", |screen| {
        screen.contains(&format!("tau {}", env!("CARGO_PKG_VERSION")))
            && screen.contains("no model can answer yet")
            && screen.contains("/login")
    });
    assert!(screen.contains("ANTHROPIC_API_KEY"), "{screen}");
    assert!(screen.contains("auth.json"), "{screen}");
    assert!(screen.contains("tau-mock-llm"), "{screen}");
    assert!(screen.contains("Esc"), "the main keys are named:\n{screen}");
    term.submit("hello there");
    let screen = term.wait_for("Not sent: No API key found");
    // The prompt is back in the editor, not lost.
    let editor_row = term.find("hello there").expect("the text is on screen");
    let notice_row = term.find("Not sent").expect("the notice");
    assert!(
        editor_row.0 > notice_row.0,
        "the text is in the editor below:\n{screen}"
    );
}

#[test]
fn a_slash_lists_the_commands_and_an_unknown_one_is_refused() {
    let mock = MockServer::start_background().unwrap();
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (100, 30));
    term.wait_for("mock/mock-1");
    term.keys("/");
    let screen = term.wait_for("↑↓ move • Tab complete");
    assert!(screen.contains("/settings"), "{screen}");
    // Narrowed as the name is typed.
    term.keys("logi");
    term.wait_until("the list narrowed to /login", |screen| {
        screen.contains("store a provider's API key") && !screen.contains("/settings")
    });
    term.keys("\x1b");
    term.wait_until("the list closed", |screen| {
        !screen.contains("store a provider's API key") && screen.contains("› /logi")
    });
    // Ctrl+C empties the editor; a name no command has is not sent to the model.
    term.keys("\x03");
    term.submit("/frobnicate the widget");
    let screen = term.wait_for("Unknown command /frobnicate");
    assert!(
        screen.contains("› /frobnicate the widget"),
        "kept in the editor:\n{screen}"
    );
    assert!(mock.requests().is_empty(), "nothing reached the model");
}

#[test]
fn login_stores_the_key_in_auth_json_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let mock = MockServer::start_background().unwrap();
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (100, 30));
    term.wait_for("mock/mock-1");
    term.submit("/login");
    term.wait_for("Store an API key for");
    term.keys("\r");
    term.wait_for("API key for mock");
    term.keys("sk-test-secret");
    let screen = term.wait_for("••••••••••••••");
    assert!(
        !screen.contains("sk-test"),
        "the key is never shown:\n{screen}"
    );
    term.keys("\r");
    let screen = term.wait_for("Saved the API key for mock");
    assert!(!screen.contains("sk-test"), "{screen}");
    let path = dirs.agent_dir().join("auth.json");
    let auth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        auth,
        json!({"mock": {"type": "api_key", "key": "sk-test-secret"}})
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
}

#[test]
fn queued_messages_are_shown_and_alt_up_takes_them_back() {
    let mock = MockServer::start_background().unwrap();
    let chunks: Vec<String> = (0..300).map(|i| format!("word{i} ")).collect();
    mock.push(Reply::new().text_chunks(chunks).chunk_delay_ms(30));
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (100, 30));
    term.wait_for("mock/mock-1");
    term.submit("talk");
    term.wait_for("word3 ");
    term.submit("use tabs instead");
    term.keys("then run the tests");
    std::thread::sleep(Duration::from_millis(50));
    term.keys("\x1b\r");
    let screen = term.wait_until("both queued messages", |screen| {
        screen.contains("Steering: use tabs instead")
            && screen.contains("Follow-up: then run the tests")
    });
    assert!(screen.contains("Alt+Up"), "{screen}");
    term.keys("\x1b[1;3A");
    let screen = term.wait_until("the messages back in the editor", |screen| {
        !screen.contains("Steering:") && screen.contains("› use tabs instead")
    });
    assert!(screen.contains("then run the tests"), "{screen}");
    term.keys("\x1b");
    term.wait_for("Error: aborted");
    assert_eq!(
        mock.requests().len(),
        1,
        "the queued messages never went out"
    );
}

#[test]
fn ctrl_g_edits_the_message_in_the_editor_the_environment_names() {
    use std::os::unix::fs::PermissionsExt;
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("Edited message received."));
    let dirs = dirs_with_models(&mock);
    // An "editor" that adds a line to the file it is given, as a person would.
    let script = dirs.home().join("add-line.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf 'written in the editor\\n' >> \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut term =
        Terminal::start_with(&dirs, &[], (100, 30), DARK, &[("EDITOR", script.as_path())]);
    term.wait_for("mock/mock-1");
    term.keys("draft, ");
    term.wait_for("› draft,");
    term.keys("\x07");
    term.wait_for("› draft, written in the editor");
    term.keys("\r");
    term.wait_for("Edited message received.");
    let body = mock.requests()[0].body.to_string();
    assert!(body.contains("draft, written in the editor"), "{body}");
}

/// The lines of `history` that are one of `wanted`, in their order there.
fn found<'a>(history: &'a [String], wanted: &[String]) -> Vec<&'a str> {
    history
        .iter()
        .map(|l| l.trim_end())
        .filter(|l| wanted.iter().any(|w| w == l))
        .collect()
}

#[test]
fn finished_messages_go_into_the_scrollback_and_stay_after_the_exit() {
    let mock = MockServer::start_background().unwrap();
    for i in 1..=4 {
        mock.push(Reply::text(format!("Answer number {i}.")));
    }
    let dirs = dirs_with_models(&mock);
    // A short screen: the conversation outgrows it.
    let mut term = Terminal::start(&dirs, &[], (60, 10));
    term.wait_for("mock/mock-1");
    assert!(!term.wrote("\x1b[?1049h"), "no alternate screen");
    let expected: Vec<String> = (1..=4)
        .flat_map(|i| {
            [
                format!("› question number {i}"),
                format!("Answer number {i}."),
            ]
        })
        .collect();
    for i in 1..=4 {
        term.submit(&format!("question number {i}"));
        term.wait_for(&format!("Answer number {i}."));
    }
    // Each message once, in order, the first ones above the screen in the scrollback.
    term.wait_until("the last answer written", |_| {
        found(&term.history(), &expected) == expected
    });
    assert!(
        !term.contents().contains("question number 1"),
        "{}",
        term.contents()
    );
    assert!(term.contents().contains("mock/mock-1"));

    term.submit("/quit");
    assert!(term.exits_within(Duration::from_secs(10)), "/quit ends tau");
    // After the exit the conversation stays, the live part is gone, and the cursor waits
    // below the last answer for the shell's prompt.
    let screen = term.wait_until("the live part cleared", |s| !s.contains("mock/mock-1"));
    let history = term.history();
    assert_eq!(found(&history, &expected), expected, "{history:#?}");
    assert_eq!(
        history.last().map(|l| l.trim_end()),
        Some("Answer number 4."),
        "{screen}"
    );
    let (row, _) = term.find("Answer number 4.").unwrap();
    assert_eq!(term.cursor_row(), row + 1, "{screen}");
}

#[test]
fn a_reply_longer_than_the_screen_streams_at_the_bottom_and_is_whole_in_the_scrollback() {
    let mock = MockServer::start_background().unwrap();
    let chunks: Vec<String> = (1..=60)
        .map(|i| format!("Line {i} of the reply.\n\n"))
        .collect();
    mock.push(Reply::new().text_chunks(chunks).chunk_delay_ms(25));
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (60, 15));
    term.wait_for("mock/mock-1");
    term.submit("a long one");
    // While it streams, its latest lines are on the screen, above the editor.
    let screen = term.wait_for("Line 30 of the reply.");
    assert!(screen.contains("working"), "{screen}");
    assert!(!screen.contains("Line 1 of"), "{screen}");
    term.wait_for("Line 60 of the reply.");
    term.wait_until("the end of the run", |s| !s.contains("working"));
    // Then all of it is in the scrollback, once.
    let expected: Vec<String> = (1..=60)
        .map(|i| format!("Line {i} of the reply."))
        .collect();
    term.wait_until("the whole reply in the scrollback", |_| {
        found(&term.history(), &expected) == expected
    });
    let history = term.history();
    let reply = history
        .iter()
        .position(|l| l.starts_with("Line 1 of"))
        .unwrap();
    assert_eq!(history[reply - 2].trim_end(), "› a long one");
}

#[test]
fn a_new_width_writes_the_conversation_again_and_a_new_height_keeps_it() {
    let mock = MockServer::start_background().unwrap();
    let answer = "This answer is long enough to be wrapped again once the terminal is made \
                  narrower than it is now.";
    mock.push(Reply::text(answer));
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (100, 20));
    term.wait_for("mock/mock-1");
    term.submit("wrap this");
    term.wait_for("narrower than it is now.");
    let resize = |term: &Terminal, cols: u16, rows: u16| {
        term.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        term.parser
            .lock()
            .unwrap()
            .set_size(nonzero(rows), nonzero(cols));
    };
    let joined = |term: &Terminal| {
        term.history()
            .iter()
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join(" ")
    };
    // The emulated terminal cuts its lines at the new width (as xterm does): the answer is
    // whole again only because tau writes it again, wrapped at 50 columns.
    resize(&term, 50, 20);
    term.wait_until("the answer whole at 50 columns", |_| {
        joined(&term).matches(answer).count() == 1
    });
    let history = term.history();
    assert!(history.iter().all(|l| l.chars().count() <= 50));
    assert_eq!(
        history.iter().filter(|l| l.contains("› wrap this")).count(),
        1,
        "{history:#?}"
    );
    let clears = |term: &Terminal| {
        let output = term.output.lock().unwrap();
        output.windows(4).filter(|w| w == b"\x1b[3J").count()
    };
    let cleared = clears(&term);
    assert_eq!(cleared, 1, "the scrollback was cleared for the new width");

    // A new height only: the conversation stays as it is, the live part below it.
    resize(&term, 50, 12);
    term.keys("x");
    term.wait_for("› x");
    assert_eq!(clears(&term), cleared, "nothing written again");
    assert_eq!(joined(&term).matches(answer).count(), 1);
    // The footer may come a frame after the editor's line.
    let deadline = Instant::now() + Duration::from_secs(10);
    while term
        .find("mock/mock-1")
        .is_none_or(|(row, _)| row != term.cursor_row() + 1)
    {
        assert!(
            Instant::now() < deadline,
            "no footer below the editor:\n{}",
            term.contents()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_new_session_ends_the_old_conversation_with_a_rule_in_the_scrollback() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("Old answer."));
    mock.push(Reply::text("New answer."));
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (70, 20));
    term.wait_for("mock/mock-1");
    term.submit("old question");
    term.wait_for("Old answer.");
    term.submit("/new");
    term.wait_for("New session");
    term.submit("new question");
    term.wait_for("New answer.");
    let rule = "─".repeat(70);
    let expected: Vec<String> = [
        "› old question",
        "Old answer.",
        &rule,
        "New session",
        "› new question",
        "New answer.",
        &rule,
    ]
    .map(String::from)
    .to_vec();
    term.wait_until("the new conversation below a rule", |_| {
        found(&term.history(), &expected) == expected
    });
    let shown = term.conversation().join("\n");
    assert!(!shown.contains("Old answer."), "{shown}");
    assert!(shown.contains("New answer."), "{shown}");
}

#[test]
fn shift_enter_breaks_the_line_in_the_kitty_and_the_xterm_forms() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("Got four lines."));
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (80, 24));
    term.wait_for("mock/mock-1");
    // Both ways of reporting modified keys are asked for: the kitty protocol's flags, and
    // xterm's modifyOtherKeys for terminals (and tmux, screen) that do not speak it.
    assert!(term.wrote("\x1b[>1u"), "the kitty flags");
    assert!(term.wrote("\x1b[>4;2m"), "modifyOtherKeys");
    // Shift+Enter as kitty sends it, as xterm's modifyOtherKeys does, then Ctrl+J.
    for (text, new_line) in [
        ("first", "\x1b[13;2u"),
        ("second", "\x1b[27;2;13~"),
        ("third", "\n"),
    ] {
        term.keys(text);
        std::thread::sleep(Duration::from_millis(50));
        term.keys(new_line);
        std::thread::sleep(Duration::from_millis(50));
    }
    term.keys("fourth");
    term.wait_until("four lines in the editor", |s| {
        s.contains("› first")
            && s.contains("  second")
            && s.contains("  third")
            && s.contains("  fourth")
    });
    assert!(mock.requests().is_empty(), "nothing was sent");
    std::thread::sleep(Duration::from_millis(50));
    term.keys("\r");
    term.wait_for("Got four lines.");
    let body = mock.requests()[0].body.to_string();
    assert!(body.contains(r"first\nsecond\nthird\nfourth"), "{body}");
    term.submit("/quit");
    assert!(term.exits_within(Duration::from_secs(10)));
    term.wait_until("the modes reset", |_| term.wrote("\x1b[>4;0m"));
}

/// tau in a tmux server of its own (without the user's configuration), when tmux is installed.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(test: &str, dirs: &Dirs, size: (u16, u16)) -> Option<Self> {
        if std::process::Command::new("tmux")
            .arg("-V")
            .output()
            .is_err()
        {
            eprintln!("{test}: skipped, tmux is not installed");
            return None;
        }
        let tmux = Self {
            socket: format!("tau-test-{}-{test}", std::process::id()),
        };
        let agent_dir = format!("TAU_AGENT_DIR={}", dirs.agent_dir().display());
        let home = format!("HOME={}", dirs.home().display());
        let started = tmux.run(&[
            "new-session",
            "-d",
            "-x",
            &size.0.to_string(),
            "-y",
            &size.1.to_string(),
            "-c",
            &dirs.cwd().display().to_string(),
            "-e",
            &agent_dir,
            "-e",
            &home,
            env!("CARGO_BIN_EXE_tau"),
        ]);
        assert!(started.status.success(), "{started:?}");
        Some(tmux)
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap()
    }

    /// The pane's screen; with `history`, its scrollback above.
    fn pane(&self, history: bool) -> String {
        let args: &[&str] = if history {
            &["capture-pane", "-p", "-S", "-"]
        } else {
            &["capture-pane", "-p"]
        };
        String::from_utf8_lossy(&self.run(args).stdout).into_owned()
    }

    fn wait(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.pane(false);
            if check(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < WAIT,
                "tmux never showed {what}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

#[test]
fn shift_enter_breaks_the_line_inside_tmux() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("Two lines received."));
    let dirs = dirs_with_models(&mock);
    let Some(tmux) = Tmux::start("shift_enter_breaks_the_line_inside_tmux", &dirs, (100, 30))
    else {
        return;
    };
    tmux.wait("the footer", |s| s.contains("mock/mock-1"));
    tmux.run(&["send-keys", "-l", "first"]);
    tmux.run(&["send-keys", "S-Enter"]);
    tmux.run(&["send-keys", "-l", "second"]);
    tmux.wait("two lines in the editor", |s| {
        s.contains("› first") && s.contains("  second")
    });
    assert!(mock.requests().is_empty(), "Shift+Enter sent nothing");
    tmux.run(&["send-keys", "Enter"]);
    tmux.wait("the answer", |s| s.contains("Two lines received."));
    let body = mock.requests()[0].body.to_string();
    assert!(body.contains(r"first\nsecond"), "{body}");
}

#[test]
fn a_reply_longer_than_the_screen_is_in_tmuxs_scrollback_once() {
    let mock = MockServer::start_background().unwrap();
    let chunks: Vec<String> = (1..=40)
        .map(|i| format!("Row {i} of the reply.\n\n"))
        .collect();
    mock.push(Reply::new().text_chunks(chunks).chunk_delay_ms(10));
    let dirs = dirs_with_models(&mock);
    let Some(tmux) = Tmux::start(
        "a_reply_longer_than_the_screen_is_in_tmuxs_scrollback_once",
        &dirs,
        (60, 15),
    ) else {
        return;
    };
    tmux.wait("the footer", |s| s.contains("mock/mock-1"));
    tmux.run(&["send-keys", "-l", "a long one"]);
    tmux.run(&["send-keys", "Enter"]);
    tmux.wait("the end of the run", |s| {
        s.contains("Row 40 of the reply.") && !s.contains("working")
    });
    // tmux keeps a cleared screen in its scrollback: the live rows, cleared as the reply
    // went into the scrollback, must not have been.
    let history = tmux.pane(true);
    for i in 1..=40 {
        let row = format!("Row {i} of the reply.");
        assert_eq!(
            history.lines().filter(|l| l.trim_end() == row).count(),
            1,
            "{row}:\n{history}"
        );
    }
    assert_eq!(history.matches("● working").count(), 0, "{history}");
}

#[test]
fn ctrl_o_writes_the_conversation_again_with_the_output_expanded() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("call_1", "bash", json!({"command": "seq 1 20"})));
    mock.push(Reply::text("Counted."));
    let dirs = dirs_with_models(&mock);
    let mut term = Terminal::start(&dirs, &[], (80, 30));
    term.wait_for("mock/mock-1");
    term.submit("count");
    term.wait_for("Counted.");
    let numbers: Vec<String> = (1..=20).map(|i| format!("  {i}")).collect();
    term.wait_until("the collapsed output in the scrollback", |_| {
        let history = term.history();
        history.iter().any(|l| l.contains("12 more lines (Ctrl+O"))
            && found(&history, &numbers) == numbers[12..]
    });
    // Written once already: the whole conversation is written again, expanded.
    term.keys("\x0f");
    term.wait_until("the expanded output in the scrollback", |_| {
        found(&term.history(), &numbers) == numbers
    });
    let history = term.history();
    assert!(
        !history.iter().any(|l| l.contains("more lines (Ctrl+O")),
        "{history:#?}"
    );
    assert_eq!(
        history.iter().filter(|l| l.contains("› count")).count(),
        1,
        "{history:#?}"
    );
}
