//! The one-shot modes (`tau -p`, `tau --mode json`): the messages run one after another in one
//! session, then tau exits. They drive the same RPC server as `--mode rpc` through an in-process
//! pipe, so every behaviour of a run (retries, compaction, extensions, the session file) is the
//! one RPC clients get; this module only turns the protocol's records into what pi prints.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, PipeReader, PipeWriter, Write};

use serde_json::{Value, json};
use tau_protocol::ImageContent;

/// What the one-shot run prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The last answer's text (`-p`).
    Text,
    /// Every event, one JSON line each, after the session header (`--mode json`).
    Json,
}

/// One message to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub text: String,
    pub images: Vec<ImageContent>,
}

/// pi's first prompt is piped stdin, then the `@file` texts, then the first message; the other
/// messages follow one by one. tau puts a line break after piped stdin (pi glues its last word
/// to the message, decision T71).
pub fn prompts(
    messages: &[String],
    stdin: Option<String>,
    files: tau_tools::attach::Attachments,
) -> Vec<Prompt> {
    let mut messages = messages.iter().filter(|m| !m.starts_with('@'));
    let mut first = String::new();
    if let Some(piped) = stdin {
        first.push_str(&piped);
        first.push('\n');
    }
    first.push_str(&files.text);
    if let Some(message) = messages.next() {
        first.push_str(message);
    }
    let mut prompts = Vec::new();
    if !first.is_empty() || !files.images.is_empty() {
        prompts.push(Prompt {
            text: first,
            images: files.images,
        });
    }
    prompts.extend(messages.map(|m| Prompt {
        text: m.clone(),
        images: Vec::new(),
    }));
    prompts
}

/// Reads piped stdin whole (trimmed, `None` when empty or a terminal), as pi does before it
/// runs.
pub fn read_piped_stdin() -> Option<String> {
    let stdin = io::stdin();
    if stdin.is_terminal() {
        return None;
    }
    let mut text = String::new();
    io::Read::read_to_string(&mut stdin.lock(), &mut text).ok()?;
    let trimmed = text.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// The driver's view of the run: it writes each prompt to the server, waits for it to end,
/// and prints what the mode prints. Returns the exit code it decided (1 for a failed prompt or,
/// in text mode, a reply that ended in an error).
pub struct Driver {
    pub output: Output,
    pub prompts: Vec<Prompt>,
    /// The session header line, printed first in JSON mode.
    pub header: Option<Value>,
    /// Whether stderr is a terminal: progress lines are shown only then.
    pub progress: bool,
}

enum Waiting {
    Response(String),
    Settled,
}

impl Driver {
    /// Runs on its own thread: `records` is the server's output, `commands` its input.
    pub fn drive(self, records: PipeReader, commands: PipeWriter, stdout: File) -> u8 {
        // On a terminal the model's text must not act as escape sequences; in a file or a
        // pipe it stays byte for byte.
        let terminal = stdout.is_terminal();
        let mut out = io::BufWriter::new(stdout);
        let mut commands = Some(commands);
        let mut exit = 0u8;
        if let (Output::Json, Some(header)) = (self.output, &self.header) {
            let _ = out.write_all(&json_line_for(terminal, header.to_string().as_bytes()));
            let _ = out.write_all(b"\n");
        }
        let mut queue = self.prompts.into_iter().enumerate();
        let mut waiting = None;
        let mut send_next = |commands: &mut Option<PipeWriter>, waiting: &mut Option<Waiting>| {
            match (queue.next(), commands.as_mut()) {
                (Some((i, prompt)), Some(pipe)) => {
                    let id = format!("oneshot-{i}");
                    let mut command = json!({"id": id, "type": "prompt", "message": prompt.text});
                    if !prompt.images.is_empty() {
                        command["images"] = json!(prompt.images);
                    }
                    let sent = writeln!(pipe, "{command}").and_then(|()| pipe.flush());
                    if sent.is_ok() {
                        *waiting = Some(Waiting::Response(id));
                        return;
                    }
                    *commands = None;
                }
                // Nothing more to send: the end of input lets the server finish and exit.
                _ => *commands = None,
            }
            *waiting = None;
        };
        send_next(&mut commands, &mut waiting);
        let mut last: Option<Value> = None;
        for line in BufReader::new(records).split(b'\n') {
            let Ok(line) = line else { break };
            // The stream's bulk: passed through (JSON) or skipped (text) without parsing.
            if line.starts_with(br#"{"type":"message_update""#) {
                if self.output == Output::Json {
                    let _ = out.write_all(&json_line_for(terminal, &line));
                    let _ = out.write_all(b"\n");
                }
                continue;
            }
            let Ok(record) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            let kind = record["type"].as_str().unwrap_or_default();
            match kind {
                "ready" => continue,
                "response" => {
                    if let Some(Waiting::Response(id)) = &waiting
                        && record["id"] == id.as_str()
                    {
                        if record["success"] != true {
                            let error = record["error"].as_str().unwrap_or("the prompt failed");
                            eprintln_line(error);
                            exit = 1;
                            commands = None;
                            waiting = None;
                        } else if record["data"]["disposition"] == "started" {
                            waiting = Some(Waiting::Settled);
                        } else {
                            send_next(&mut commands, &mut waiting);
                        }
                    }
                    continue;
                }
                "extension_error" => {
                    eprintln_line(&format!(
                        "Extension error ({}): {}",
                        record["extensionPath"].as_str().unwrap_or("?"),
                        record["error"].as_str().unwrap_or_default()
                    ));
                    continue;
                }
                "extension_ui_request" => {
                    // No one can answer a dialog here: it gets pi's no-UI answer at once.
                    if let (Some(id), Some(pipe)) = (record["id"].as_str(), commands.as_mut())
                        && matches!(
                            record["method"].as_str(),
                            Some("select" | "confirm" | "input" | "editor")
                        )
                    {
                        let answer =
                            json!({"type": "extension_ui_response", "id": id, "cancelled": true});
                        let _ = writeln!(pipe, "{answer}").and_then(|()| pipe.flush());
                    }
                    continue;
                }
                "message_end" => last = Some(record["message"].clone()),
                "agent_settled" => {
                    if matches!(waiting, Some(Waiting::Settled)) {
                        send_next(&mut commands, &mut waiting);
                    }
                }
                _ => {}
            }
            if self.progress {
                show_progress(&record);
            }
            if self.output == Output::Json {
                let _ = out.write_all(&json_line_for(terminal, &line));
                let _ = out.write_all(b"\n");
            }
        }
        drop(commands);
        if self.output == Output::Text
            && exit == 0
            && let Some(message) = last.filter(|m| m["role"] == "assistant")
        {
            let stop = message["stopReason"].as_str().unwrap_or_default();
            if stop == "error" || stop == "aborted" {
                let text = message["errorMessage"]
                    .as_str()
                    .map_or_else(|| format!("Request {stop}"), str::to_string);
                eprintln_line(&text);
                exit = 1;
            } else {
                for block in message["content"].as_array().into_iter().flatten() {
                    if block["type"] == "text" {
                        let text = block["text"].as_str().unwrap_or_default();
                        let text = if terminal {
                            for_terminal(text, false)
                        } else {
                            Cow::Borrowed(text)
                        };
                        let _ = writeln!(out, "{text}");
                    }
                }
            }
        }
        let _ = out.flush();
        exit
    }
}

/// stderr is for a person, usually at a terminal: what reaches it goes through
/// [`for_terminal`] whether or not it is one.
fn eprintln_line(text: &str) {
    let _ = writeln!(io::stderr().lock(), "{}", for_terminal(text, false));
}

/// Text from the model, a provider, an extension or a project's files, made safe to show on
/// a terminal: control characters (C0, DEL and C1) are written escaped, as `\u{1b}` or `\r`,
/// instead of acting, so no escape sequence in them can set the window title, write the
/// clipboard (OSC 52), move the cursor or erase lines. Line feeds and tabs are kept unless
/// the text must stay on `one_line`.
pub fn for_terminal(text: &str, one_line: bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && (one_line || !matches!(c, '\n' | '\t'));
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A JSON line for a terminal: DEL and the C1 controls, which JSON strings may hold raw, are
/// written as `\u00XX` escapes (the same JSON value; serde already escapes C0). They can only
/// occur inside strings, so the rewrite is byte-wise. Elsewhere the line is left as it is.
fn json_line_for(terminal: bool, line: &[u8]) -> Cow<'_, [u8]> {
    // 0xc2 also starts harmless characters (`©`, `°`): the loop tells them apart.
    if !terminal || !line.iter().any(|&b| b == 0x7f || b == 0xc2) {
        return Cow::Borrowed(line);
    }
    let mut out = Vec::with_capacity(line.len() + 16);
    let mut i = 0;
    while let Some(&byte) = line.get(i) {
        let next = line.get(i + 1).copied();
        match (byte, next) {
            (0x7f, _) => {
                out.extend_from_slice(b"\\u007f");
                i += 1;
            }
            (0xc2, Some(c1 @ 0x80..0xa0)) => {
                out.extend_from_slice(format!("\\u{c1:04x}").as_bytes());
                i += 2;
            }
            _ => {
                out.push(byte);
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

/// One line on stderr for what takes time, for a person watching a terminal.
fn show_progress(record: &Value) {
    if let Some(line) = progress_line(record) {
        eprintln_line(&line);
    }
}

/// The progress line for `record`, if it is one to show.
fn progress_line(record: &Value) -> Option<String> {
    let line = match record["type"].as_str().unwrap_or_default() {
        "tool_execution_start" => {
            let args = record["args"].to_string();
            let args: String = args.chars().take(100).collect();
            format!("» {} {args}", record["toolName"].as_str().unwrap_or("tool"))
        }
        "auto_retry_start" => format!(
            "» retrying ({}/{}) in {} ms: {}",
            record["attempt"],
            record["maxAttempts"],
            record["delayMs"],
            record["errorMessage"].as_str().unwrap_or_default()
        ),
        "compaction_start" => "» compacting the conversation".to_string(),
        _ => return None,
    };
    // A name or an error with a line feed must not forge a line of its own.
    Some(for_terminal(&line, true).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdin_files_and_the_first_message_make_the_first_prompt() {
        let files = tau_tools::attach::Attachments {
            text: "<file name=\"/a\">\nA\n</file>\n".into(),
            images: Vec::new(),
        };
        let messages = ["@a".to_string(), "first".into(), "second".into()];
        let prompts = prompts(&messages, Some("piped".into()), files);
        let texts: Vec<&str> = prompts.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(
            texts,
            ["piped\n<file name=\"/a\">\nA\n</file>\nfirst", "second"]
        );
        assert!(prompts_of(&[]).is_empty());
        assert_eq!(prompts_of(&["one", "two"]).len(), 2);
    }

    #[test]
    fn control_characters_are_shown_escaped_on_a_terminal() {
        // OSC 52 (clipboard), OSC 0 (title), CSI 2K (erase line), a C1 CSI and DEL.
        let hostile = "a\u{1b}]52;c;aGk=\u{7}b\u{1b}]0;title\u{1b}\\c\u{1b}[2K\rd\u{9b}31m\u{7f}e";
        let shown = for_terminal(hostile, false);
        assert_eq!(
            shown,
            "a\\u{1b}]52;c;aGk=\\u{7}b\\u{1b}]0;title\\u{1b}\\c\\u{1b}[2K\\rd\\u{9b}31m\\u{7f}e"
        );
        assert!(!shown.chars().any(char::is_control));
        // Lines and tabs stay, unless the text must be one line.
        assert_eq!(for_terminal("one\n\ttwo", false), "one\n\ttwo");
        assert_eq!(for_terminal("one\n\ttwo", true), "one\\n\\ttwo");
        // Nothing to escape: the text itself, not a copy, and non-ASCII text is untouched.
        assert!(matches!(for_terminal("héllo ©°", true), Cow::Borrowed(_)));
    }

    #[test]
    fn json_lines_for_a_terminal_escape_del_and_c1_and_keep_their_value() {
        let value = json!({"text": "x\u{9b}2J\u{7f}é©\u{1b}"});
        let line = serde_json::to_vec(&value).unwrap_or_default();
        let shown = json_line_for(true, &line);
        assert!(
            !shown
                .windows(2)
                .any(|p| p[0] == 0x7f || p[0] == 0x1b || (p[0] == 0xc2 && p[1] < 0xa0)),
            "{}",
            String::from_utf8_lossy(&shown)
        );
        let back: Value = serde_json::from_slice(&shown).unwrap_or_default();
        assert_eq!(back, value);
        assert!(matches!(json_line_for(false, &line), Cow::Borrowed(_)));
    }

    #[test]
    fn a_progress_line_is_one_line_without_control_characters() {
        let record = json!({"type": "tool_execution_start",
            "toolName": "x\u{1b}]52;c;aGk=\u{7}\nforged line\u{9b}",
            "args": {"a": "\u{85}\u{7f}"}});
        let line = progress_line(&record).unwrap_or_default();
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(line.starts_with("» x\\u{1b}]52;c;aGk=\\u{7}\\nforged line\\u{9b} "));
        assert_eq!(progress_line(&json!({"type": "turn_start"})), None);
    }

    fn prompts_of(messages: &[&str]) -> Vec<Prompt> {
        let messages: Vec<String> = messages.iter().map(|m| m.to_string()).collect();
        prompts(&messages, None, tau_tools::attach::Attachments::default())
    }
}
