//! The HTML export of a session (`export_html`): one standalone page that reads offline and
//! without scripting. The active branch is rendered here, server-side; the raw session data
//! (header, whole entry tree, leaf, system prompt, tools) rides along as escaped JSON so that
//! tools can pull it back out. Works on plain JSON values so it needs no session store.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::{AgentSession, SessionError};

/// Page skeleton with `{{title}}`, `{{body}}` and `{{data}}` holes, each filled once.
const TEMPLATE: &str = include_str!("export_html/template.html");

/// A tool that was active in the session, as listed on the page and in the embedded data.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ExportTool<'a> {
    pub name: &'a str,
    pub description: &'a str,
    /// JSON schema of the tool's arguments.
    pub parameters: &'a Value,
}

/// Everything the page shows. Entries are the session file's lines after the header, in
/// file order, the whole tree.
#[derive(Debug, Clone, Copy)]
pub struct ExportInput<'a> {
    pub header: &'a Value,
    pub entries: &'a [Value],
    /// `None` is pi's null leaf (navigated back before the first entry): nothing is active.
    pub leaf_id: Option<&'a str>,
    pub system_prompt: Option<&'a str>,
    pub tools: &'a [ExportTool<'a>],
    pub session_name: Option<&'a str>,
}

/// Shape of the `session-data` JSON; key names follow pi's export so readers of either work.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EmbeddedData<'a> {
    header: &'a Value,
    entries: &'a [Value],
    leaf_id: Option<&'a str>,
    system_prompt: Option<&'a str>,
    tools: &'a [ExportTool<'a>],
    session_name: Option<&'a str>,
}

/// pi's default export name, `pi-session-<session file basename without .jsonl>.html`; kept
/// so scripts written against pi find the file.
pub fn default_export_file_name(session_file: &Path) -> String {
    let base = session_file
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    let stem = base.strip_suffix(".jsonl").unwrap_or(&base);
    format!("pi-session-{stem}.html")
}

/// Renders the whole page. Linear in the size of the session.
pub fn render_session_html(input: &ExportInput<'_>) -> String {
    let data = serde_json::to_string(&EmbeddedData {
        header: input.header,
        entries: input.entries,
        leaf_id: input.leaf_id,
        system_prompt: input.system_prompt,
        tools: input.tools,
        session_name: input.session_name,
    })
    // Serialising `Value`s cannot fail (all map keys are strings); `null` keeps the page valid.
    .unwrap_or_else(|_| "null".to_owned());

    // The rendered conversation is roughly as large as the JSON it came from.
    let mut out = String::with_capacity(TEMPLATE.len() + data.len() * 2 + 4096);
    let mut rest = TEMPLATE;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            rest = &rest[start..];
            break;
        };
        match &after[..end] {
            "title" => escape_html(&mut out, &page_title(input)),
            "body" => render_body(&mut out, input),
            "data" => escape_json_for_script(&mut out, &data),
            other => {
                out.push_str("{{");
                out.push_str(other);
                out.push_str("}}");
            }
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

fn page_title(input: &ExportInput<'_>) -> String {
    if let Some(name) = input.session_name.map(str::trim).filter(|n| !n.is_empty()) {
        return name.to_owned();
    }
    match str_field(input.header, "id") {
        Some(id) => format!("Session {id}"),
        None => "Session".to_owned(),
    }
}

/// Escapes the five characters that can start or end markup or an attribute value.
fn escape_html(out: &mut String, text: &str) {
    let mut last = 0;
    for (i, byte) in text.bytes().enumerate() {
        let replacement = match byte {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            b'\'' => "&#39;",
            _ => continue,
        };
        out.push_str(&text[last..i]);
        out.push_str(replacement);
        last = i + 1;
    }
    out.push_str(&text[last..]);
}

/// Makes JSON safe inside a `<script>` element: `</script>` and `<!--` can no longer appear,
/// and U+2028/U+2029 are escaped for readers that treat the text as JavaScript. These
/// characters only occur inside JSON strings, where `\uXXXX` means the same thing.
fn escape_json_for_script(out: &mut String, json: &str) {
    let mut last = 0;
    for (i, ch) in json.char_indices() {
        let replacement = match ch {
            '<' => "\\u003c",
            '>' => "\\u003e",
            '&' => "\\u0026",
            '\u{2028}' => "\\u2028",
            '\u{2029}' => "\\u2029",
            _ => continue,
        };
        out.push_str(&json[last..i]);
        out.push_str(replacement);
        last = i + ch.len_utf8();
    }
    out.push_str(&json[last..]);
}

fn str_field<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value.get(key).and_then(Value::as_str)
}

fn pretty_json(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// The entries from the root to the leaf, and how many entries lie elsewhere in the tree.
struct Branch<'e> {
    path: Vec<&'e Value>,
    off_branch: usize,
    leaf_missing: bool,
}

fn active_branch<'e>(entries: &'e [Value], leaf_id: Option<&str>) -> Branch<'e> {
    let mut by_id: HashMap<&str, &Value> = HashMap::with_capacity(entries.len());
    for entry in entries {
        if let Some(id) = str_field(entry, "id") {
            by_id.insert(id, entry);
        }
    }
    let leaf_missing = leaf_id.is_some_and(|leaf| !by_id.contains_key(leaf));
    let mut path = Vec::new();
    // A damaged file could link entries in a loop; stop at the first repeat.
    let mut seen = HashSet::new();
    let mut current = leaf_id;
    while let Some(id) = current {
        let Some(entry) = by_id.get(id) else { break };
        if !seen.insert(id) {
            break;
        }
        path.push(*entry);
        current = str_field(entry, "parentId");
    }
    path.reverse();
    Branch {
        off_branch: entries.len().saturating_sub(path.len()),
        path,
        leaf_missing,
    }
}

fn render_body(out: &mut String, input: &ExportInput<'_>) {
    out.push_str("<h1>");
    escape_html(out, &page_title(input));
    out.push_str("</h1>\n<dl class=\"meta\">\n");
    let header = input.header;
    for (label, key) in [
        ("Session", "id"),
        ("Created", "timestamp"),
        ("Directory", "cwd"),
        ("Forked from", "parentSession"),
    ] {
        if let Some(value) = str_field(header, key) {
            meta_row(out, label, value);
        }
    }
    if let Some(leaf) = input.leaf_id {
        meta_row(out, "Leaf entry", leaf);
    }
    out.push_str("</dl>\n");

    if let Some(prompt) = input.system_prompt {
        out.push_str("<details class=\"panel\"><summary>System prompt</summary>\n<pre>");
        escape_html(out, prompt);
        out.push_str("</pre>\n</details>\n");
    }
    render_tools(out, input.tools);
    // Filled with buttons by the inline script; stays empty without scripting.
    out.push_str("<div id=\"controls\" class=\"controls\"></div>\n");

    let branch = active_branch(input.entries, input.leaf_id);
    if branch.leaf_missing {
        out.push_str("<p class=\"branch-note\">The leaf entry is not in the file, so no branch is active.</p>\n");
    }
    if branch.off_branch > 0 {
        let (count, verb) = if branch.off_branch == 1 {
            ("1 entry".to_owned(), "is")
        } else {
            (format!("{} entries", branch.off_branch), "are")
        };
        let _ = writeln!(
            out,
            "<p class=\"branch-note\" id=\"other-branches\" data-count=\"{}\">{count} {verb} on other branches and not shown; the embedded session data holds the whole tree.</p>",
            branch.off_branch
        );
    }
    out.push_str("<section class=\"conversation\">\n");
    if branch.path.is_empty() {
        out.push_str("<p class=\"empty\">No entries on the active branch.</p>\n");
    }
    for entry in &branch.path {
        render_entry(out, entry);
    }
    out.push_str("</section>\n");
}

fn meta_row(out: &mut String, label: &str, value: &str) {
    out.push_str("<dt>");
    out.push_str(label);
    out.push_str("</dt><dd>");
    escape_html(out, value);
    out.push_str("</dd>\n");
}

fn render_tools(out: &mut String, tools: &[ExportTool<'_>]) {
    let _ = writeln!(
        out,
        "<details class=\"panel\"><summary>Tools ({})</summary>",
        tools.len()
    );
    if tools.is_empty() {
        out.push_str("<p class=\"empty\">No tools were active.</p>\n");
    }
    for tool in tools {
        out.push_str("<details class=\"tool-def\"><summary class=\"mono\">");
        escape_html(out, tool.name);
        out.push_str("</summary>\n<div class=\"text\">");
        escape_html(out, tool.description);
        out.push_str("</div>\n<pre><code>");
        escape_html(out, &pretty_json(tool.parameters));
        out.push_str("</code></pre>\n</details>\n");
    }
    out.push_str("</details>\n");
}

/// Opens an `<article>` for one entry; `class` is always one of our own words.
fn open_article(out: &mut String, entry: &Value, class: &str, role: &str) {
    out.push_str("<article class=\"entry ");
    out.push_str(class);
    out.push('"');
    if let Some(id) = str_field(entry, "id") {
        out.push_str(" id=\"entry-");
        escape_html(out, id);
        out.push('"');
    }
    out.push_str(">\n<header><span class=\"role\">");
    escape_html(out, role);
    out.push_str("</span>");
    push_time(out, entry);
    out.push_str("</header>\n");
}

fn push_time(out: &mut String, entry: &Value) {
    if let Some(ts) = str_field(entry, "timestamp") {
        out.push_str("<time>");
        escape_html(out, ts);
        out.push_str("</time>");
    }
}

/// A one-line remark for entries that change settings rather than say something.
fn note(out: &mut String, entry: &Value, label: &str, value: &str) {
    out.push_str("<p class=\"note\"><b>");
    escape_html(out, label);
    out.push_str("</b> ");
    escape_html(out, value);
    out.push(' ');
    push_time(out, entry);
    out.push_str("</p>\n");
}

fn render_entry(out: &mut String, entry: &Value) {
    let kind = str_field(entry, "type").unwrap_or("");
    match kind {
        "message" => match entry.get("message") {
            Some(message) => render_message(out, entry, message),
            None => note(out, entry, "Message", "(empty)"),
        },
        "model_change" => {
            let provider = str_field(entry, "provider").unwrap_or("?");
            let model = str_field(entry, "modelId").unwrap_or("?");
            note(out, entry, "Model", &format!("{provider}/{model}"));
        }
        "thinking_level_change" => {
            let level = str_field(entry, "thinkingLevel").unwrap_or("?");
            note(out, entry, "Thinking level", level);
        }
        "compaction" => render_compaction(out, entry),
        "branch_summary" => {
            let from = str_field(entry, "fromId").unwrap_or("?");
            render_summary(
                out,
                entry,
                "Branch summary",
                &format!(
                    "Summary of the branch this conversation came back from (it left at {from})."
                ),
                str_field(entry, "summary").unwrap_or(""),
            );
        }
        "custom_message" => render_custom(out, entry, entry),
        "custom" => {
            let custom_type = str_field(entry, "customType").unwrap_or("?");
            note(out, entry, "Extension data", custom_type);
        }
        "label" => {
            let target = str_field(entry, "targetId").unwrap_or("?");
            match str_field(entry, "label").filter(|l| !l.is_empty()) {
                Some(label) => note(out, entry, "Label", &format!("{label} on {target}")),
                None => note(out, entry, "Label cleared", &format!("on {target}")),
            }
        }
        "session_info" => match str_field(entry, "name").filter(|n| !n.is_empty()) {
            Some(name) => note(out, entry, "Session name", name),
            None => note(out, entry, "Session name", "cleared"),
        },
        other => note(out, entry, "Entry", other),
    }
}

fn render_message(out: &mut String, entry: &Value, message: &Value) {
    match str_field(message, "role").unwrap_or("") {
        "user" => {
            open_article(out, entry, "user", "User");
            render_user_content(out, message.get("content"));
            out.push_str("</article>\n");
        }
        "assistant" => render_assistant(out, entry, message),
        "toolResult" => render_tool_result(out, entry, message),
        "bashExecution" => render_bash(out, entry, message),
        "custom" => render_custom(out, entry, message),
        "compactionSummary" => {
            let tokens = message.get("tokensBefore").and_then(Value::as_u64);
            render_summary(
                out,
                entry,
                "Compaction",
                &compaction_line(tokens),
                str_field(message, "summary").unwrap_or(""),
            );
        }
        "branchSummary" => render_summary(
            out,
            entry,
            "Branch summary",
            "Summary of the branch this conversation came back from.",
            str_field(message, "summary").unwrap_or(""),
        ),
        other => note(out, entry, "Message with role", other),
    }
}

/// User content is either a bare string or an array of text and image blocks.
fn render_user_content(out: &mut String, content: Option<&Value>) {
    match content {
        Some(Value::String(text)) => render_text(out, text),
        Some(Value::Array(blocks)) => {
            for block in blocks {
                match str_field(block, "type") {
                    Some("text") => render_text(out, str_field(block, "text").unwrap_or("")),
                    Some("image") => render_image(out, block),
                    other => unknown_block(out, other),
                }
            }
        }
        _ => {}
    }
}

fn unknown_block(out: &mut String, kind: Option<&str>) {
    out.push_str("<p class=\"empty\">Content block of type ");
    escape_html(out, kind.unwrap_or("?"));
    out.push_str("</p>\n");
}

fn render_assistant(out: &mut String, entry: &Value, message: &Value) {
    let stop = str_field(message, "stopReason").unwrap_or("");
    let failed = matches!(stop, "error" | "aborted");
    let class = if failed {
        "assistant failed"
    } else {
        "assistant"
    };
    open_article(out, entry, class, "Assistant");
    if let Some(Value::Array(blocks)) = message.get("content") {
        for block in blocks {
            match str_field(block, "type") {
                Some("text") => render_text(out, str_field(block, "text").unwrap_or("")),
                Some("thinking") => render_thinking(out, block),
                Some("toolCall") => render_tool_call(out, block),
                Some("image") => render_image(out, block),
                other => unknown_block(out, other),
            }
        }
    }
    if failed {
        out.push_str("<div class=\"error-box\"><strong>");
        out.push_str(if stop == "error" { "Error" } else { "Aborted" });
        out.push_str("</strong>");
        if let Some(error) = str_field(message, "errorMessage") {
            out.push_str(": ");
            escape_html(out, error);
        }
        out.push_str("</div>\n");
    } else if stop == "length" {
        out.push_str("<p class=\"note\">Stopped at the output length limit.</p>\n");
    }
    render_usage_footer(out, message, stop);
    out.push_str("</article>\n");
}

fn render_thinking(out: &mut String, block: &Value) {
    let redacted = block.get("redacted").and_then(Value::as_bool) == Some(true);
    out.push_str("<details class=\"thinking\"><summary>Thinking</summary>\n");
    if redacted {
        out.push_str("<p class=\"empty\">Redacted by the provider.</p>\n");
    } else {
        out.push_str("<div class=\"text\">");
        escape_html(out, str_field(block, "thinking").unwrap_or(""));
        out.push_str("</div>\n");
    }
    out.push_str("</details>\n");
}

fn render_tool_call(out: &mut String, block: &Value) {
    out.push_str("<div class=\"tool-call\"><span class=\"name\">");
    escape_html(out, str_field(block, "name").unwrap_or("?"));
    out.push_str("</span>");
    if let Some(id) = str_field(block, "id") {
        out.push_str("<span class=\"call-id mono\">");
        escape_html(out, id);
        out.push_str("</span>");
    }
    out.push_str("\n<pre><code>");
    let arguments = block.get("arguments").unwrap_or(&Value::Null);
    escape_html(out, &pretty_json(arguments));
    out.push_str("</code></pre></div>\n");
}

fn render_usage_footer(out: &mut String, message: &Value, stop: &str) {
    out.push_str("<footer class=\"usage\">");
    if let Some(model) = str_field(message, "model") {
        out.push_str("<span>");
        if let Some(provider) = str_field(message, "provider") {
            escape_html(out, provider);
            out.push('/');
        }
        escape_html(out, model);
        out.push_str("</span>");
    }
    if let Some(usage) = message.get("usage") {
        let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        let _ = write!(
            out,
            "<span>{} in, {} out</span>",
            count("input"),
            count("output")
        );
        let (read, written) = (count("cacheRead"), count("cacheWrite"));
        if read > 0 || written > 0 {
            let _ = write!(out, "<span>cache {read} read, {written} written</span>");
        }
        if let Some(cost) = usage
            .get("cost")
            .and_then(|c| c.get("total"))
            .and_then(Value::as_f64)
        {
            let _ = write!(out, "<span>${cost:.4}</span>");
        }
    }
    // A plain finish is the norm; only the other reasons are worth a word.
    if !stop.is_empty() && stop != "stop" {
        out.push_str("<span>stop: ");
        escape_html(out, stop);
        out.push_str("</span>");
    }
    out.push_str("</footer>\n");
}

fn render_tool_result(out: &mut String, entry: &Value, message: &Value) {
    let is_error = message.get("isError").and_then(Value::as_bool) == Some(true);
    let class = if is_error {
        "tool-result failed"
    } else {
        "tool-result"
    };
    open_article(out, entry, class, "Tool result");
    out.push_str("<p><span class=\"name\">");
    escape_html(out, str_field(message, "toolName").unwrap_or("?"));
    out.push_str("</span>");
    if is_error {
        out.push_str(" <strong>failed</strong>");
    }
    out.push_str("</p>\n");
    if let Some(Value::Array(blocks)) = message.get("content") {
        for block in blocks {
            match str_field(block, "type") {
                Some("text") => {
                    out.push_str("<pre>");
                    escape_html(out, str_field(block, "text").unwrap_or(""));
                    out.push_str("</pre>\n");
                }
                Some("image") => render_image(out, block),
                other => unknown_block(out, other),
            }
        }
    }
    out.push_str("</article>\n");
}

fn render_bash(out: &mut String, entry: &Value, message: &Value) {
    let exit_code = message.get("exitCode").and_then(Value::as_i64);
    let cancelled = message.get("cancelled").and_then(Value::as_bool) == Some(true);
    let failed = cancelled || exit_code.is_some_and(|code| code != 0);
    let class = if failed { "bash failed" } else { "bash" };
    open_article(out, entry, class, "Shell");
    out.push_str("<pre class=\"command\">$ ");
    escape_html(out, str_field(message, "command").unwrap_or(""));
    out.push_str("</pre>\n");
    let output = str_field(message, "output").unwrap_or("");
    if output.is_empty() {
        out.push_str("<p class=\"empty\">(no output)</p>\n");
    } else {
        out.push_str("<pre>");
        escape_html(out, output);
        out.push_str("</pre>\n");
    }
    out.push_str("<footer class=\"usage\">");
    if cancelled {
        out.push_str("<span>cancelled</span>");
    }
    if let Some(code) = exit_code {
        let _ = write!(out, "<span>exit code {code}</span>");
    }
    if message.get("truncated").and_then(Value::as_bool) == Some(true) {
        out.push_str("<span>output truncated");
        if let Some(path) = str_field(message, "fullOutputPath") {
            out.push_str("; full output in ");
            escape_html(out, path);
        }
        out.push_str("</span>");
    }
    if message.get("excludeFromContext").and_then(Value::as_bool) == Some(true) {
        out.push_str("<span>not shown to the model</span>");
    }
    out.push_str("</footer>\n</article>\n");
}

/// Extension messages: a `custom_message` entry or a stored message with role `custom`.
fn render_custom(out: &mut String, entry: &Value, message: &Value) {
    let custom_type = str_field(message, "customType").unwrap_or("?");
    open_article(out, entry, "custom", &format!("Extension: {custom_type}"));
    if message.get("display").and_then(Value::as_bool) == Some(false) {
        out.push_str("<p class=\"empty\">Hidden from the user; sent to the model.</p>\n");
    }
    render_user_content(out, message.get("content"));
    out.push_str("</article>\n");
}

fn compaction_line(tokens_before: Option<u64>) -> String {
    match tokens_before {
        Some(tokens) => {
            format!(
                "Earlier context ({tokens} tokens before compaction) was replaced by this summary."
            )
        }
        None => "Earlier context was replaced by this summary.".to_owned(),
    }
}

fn render_compaction(out: &mut String, entry: &Value) {
    let tokens = entry.get("tokensBefore").and_then(Value::as_u64);
    render_summary(
        out,
        entry,
        "Compaction",
        &compaction_line(tokens),
        str_field(entry, "summary").unwrap_or(""),
    );
}

fn render_summary(out: &mut String, entry: &Value, role: &str, intro: &str, summary: &str) {
    open_article(out, entry, "summary", role);
    out.push_str("<p class=\"note\">");
    escape_html(out, intro);
    out.push_str("</p>\n");
    render_text(out, summary);
    out.push_str("</article>\n");
}

/// Only the validated shapes reach the `src` attribute, so a crafted MIME type or payload
/// cannot close the attribute or point elsewhere.
fn render_image(out: &mut String, block: &Value) {
    let mime = str_field(block, "mimeType").unwrap_or("");
    let data = str_field(block, "data").unwrap_or("");
    let mime_ok = mime.strip_prefix("image/").is_some_and(|sub| {
        !sub.is_empty()
            && sub
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-'))
    });
    let data_ok = !data.is_empty()
        && data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    if mime_ok && data_ok {
        out.push_str("<img class=\"attached\" alt=\"");
        out.push_str(mime);
        out.push_str("\" src=\"data:");
        out.push_str(mime);
        out.push_str(";base64,");
        out.push_str(data);
        out.push_str("\">\n");
    } else {
        out.push_str("<p class=\"empty\">An image that could not be shown (");
        escape_html(out, mime);
        out.push_str(").</p>\n");
    }
}

/// Free text keeps its line breaks; fenced code blocks become `<pre><code>` so they stay
/// monospaced. Anything fancier in Markdown is left as written.
fn render_text(out: &mut String, text: &str) {
    let mut segment_start = 0;
    let mut pos = 0;
    let mut code_lang: Option<&str> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        match code_lang {
            None if trimmed.starts_with("```") => {
                push_prose(out, &text[segment_start..pos]);
                code_lang = Some(trimmed.trim_start_matches('`').trim());
                segment_start = pos + line.len();
            }
            Some(lang) if trimmed.len() >= 3 && trimmed.bytes().all(|b| b == b'`') => {
                push_code(out, lang, &text[segment_start..pos]);
                code_lang = None;
                segment_start = pos + line.len();
            }
            _ => {}
        }
        pos += line.len();
    }
    let rest = &text[segment_start..];
    match code_lang {
        Some(lang) => push_code(out, lang, rest),
        None => push_prose(out, rest),
    }
}

fn push_prose(out: &mut String, prose: &str) {
    let prose = prose.strip_suffix('\n').unwrap_or(prose);
    if prose.trim().is_empty() {
        return;
    }
    out.push_str("<div class=\"text\">");
    escape_html(out, prose);
    out.push_str("</div>\n");
}

fn push_code(out: &mut String, lang: &str, code: &str) {
    let code = code.strip_suffix('\n').unwrap_or(code);
    out.push_str("<pre>");
    if !lang.is_empty() {
        out.push_str("<span class=\"code-lang\">");
        escape_html(out, lang);
        out.push_str("</span>");
    }
    out.push_str("<code>");
    escape_html(out, code);
    out.push_str("</code></pre>\n");
}

/// `export_html`: writes the session as one self-contained HTML file and returns the path
/// as given (default `pi-session-<file name>.html` in the working directory).
pub fn export_session(
    session: &AgentSession,
    output_path: Option<&str>,
) -> Result<String, SessionError> {
    let crate::tool_selection::NextCall {
        tools,
        system_prompt,
    } = session.next_call();
    let store = session.conversation().store();
    let Some(file) = store.file_path() else {
        return Err(SessionError::Store(
            "Cannot export in-memory session to HTML".into(),
        ));
    };
    if !store.is_persisted() {
        return Err(SessionError::Store(
            "Nothing to export yet - start a conversation first".into(),
        ));
    }
    let shown = match output_path {
        Some(p) => p.to_string(),
        None => default_export_file_name(file),
    };
    let target = session
        .workspace()
        .cwd()
        .join(tau_base::paths::expand_tilde(&shown));
    let header = serde_json::to_value(store.header()).unwrap_or(Value::Null);
    let entries: Vec<Value> = store
        .entries()
        .iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .collect();
    let export_tools: Vec<ExportTool<'_>> = tools
        .iter()
        .map(|t| ExportTool {
            name: t.name(),
            description: t.description(),
            parameters: t.parameters(),
        })
        .collect();
    let html = render_session_html(&ExportInput {
        header: &header,
        entries: &entries,
        leaf_id: store.leaf_id(),
        system_prompt: Some(&system_prompt),
        tools: &export_tools,
        session_name: store.session_name(),
    });
    drop(store);
    tau_base::atomic::write_atomically(&target, html.as_bytes())
        .map_err(|e| SessionError::Store(format!("{}: {e}", target.display())))?;
    Ok(shown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DATA_OPEN: &str = "<script type=\"application/json\" id=\"session-data\">";

    fn header() -> Value {
        json!({"type":"session","version":3,"id":"sess-1","timestamp":"2026-01-02T03:04:05.000Z","cwd":"/home/u/proj"})
    }

    fn entry(id: &str, parent: Option<&str>, message: Value) -> Value {
        json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-01-02T03:04:06.000Z","message":message})
    }

    fn user(text: &str) -> Value {
        json!({"role":"user","content":[{"type":"text","text":text}],"timestamp":1})
    }

    fn assistant_text(text: &str) -> Value {
        json!({"role":"assistant","content":[{"type":"text","text":text}],"api":"anthropic-messages",
               "provider":"anthropic","model":"claude-x","usage":{"input":10,"output":5,"cacheRead":0,
               "cacheWrite":0,"totalTokens":15,"cost":{"input":0.0,"output":0.0,"cacheRead":0.0,
               "cacheWrite":0.0,"total":0.0123}},"stopReason":"stop","timestamp":2})
    }

    fn render(entries: &[Value], leaf: Option<&str>) -> String {
        let header = header();
        render_session_html(&ExportInput {
            header: &header,
            entries,
            leaf_id: leaf,
            system_prompt: Some("You are helpful."),
            tools: &[],
            session_name: None,
        })
    }

    /// The page without the embedded JSON, i.e. what the reader sees.
    fn body_of(html: &str) -> &str {
        html.split(DATA_OPEN).next().unwrap_or(html)
    }

    fn extract_data(html: &str) -> Value {
        let start = html.find(DATA_OPEN).expect("data script present") + DATA_OPEN.len();
        let len = html[start..].find("</script>").expect("data script closed");
        serde_json::from_str(&html[start..start + len]).expect("embedded data is JSON")
    }

    #[test]
    fn script_in_user_message_is_escaped() {
        let entries = [entry(
            "a1",
            None,
            user("hi <script>alert(1)</script> & 'q' \"d\""),
        )];
        let html = render(&entries, Some("a1"));
        let body = body_of(&html);
        assert!(!body.contains("<script>alert"));
        assert!(
            body.contains(
                "hi &lt;script&gt;alert(1)&lt;/script&gt; &amp; &#39;q&#39; &quot;d&quot;"
            )
        );
        // Only the template's two script elements exist.
        assert_eq!(html.matches("<script").count(), 2);
    }

    #[test]
    fn script_in_tool_result_is_escaped() {
        let result = json!({"role":"toolResult","toolCallId":"c1","toolName":"<b>read</b>",
            "content":[{"type":"text","text":"</pre><script>evil()</script>"}],"isError":false,"timestamp":3});
        let entries = [entry("t1", None, result)];
        let html = render(&entries, Some("t1"));
        let body = body_of(&html);
        assert!(!body.contains("<script>evil"));
        assert!(!body.contains("<b>read"));
        assert!(body.contains("&lt;/pre&gt;&lt;script&gt;evil()&lt;/script&gt;"));
        assert!(body.contains("&lt;b&gt;read&lt;/b&gt;"));
        assert_eq!(html.matches("<script").count(), 2);
    }

    #[test]
    fn embedded_json_round_trips_and_cannot_break_out() {
        let tricky = "end </script><!-- x --> & \u{2028}\u{2029} <SCRIPT>";
        let entries = vec![
            entry("a1", None, user(tricky)),
            entry("a2", Some("a1"), assistant_text("fine")),
        ];
        let params = json!({"type":"object","properties":{"path":{"type":"string","description":"</script>"}}});
        let tools = [ExportTool {
            name: "read",
            description: "Reads <files>",
            parameters: &params,
        }];
        let header = header();
        let html = render_session_html(&ExportInput {
            header: &header,
            entries: &entries,
            leaf_id: Some("a2"),
            system_prompt: Some("prompt with </script> inside"),
            tools: &tools,
            session_name: Some("name <!--"),
        });
        let start = html.find(DATA_OPEN).expect("data") + DATA_OPEN.len();
        let len = html[start..].find("</script>").expect("closed");
        let raw = &html[start..start + len];
        for bad in ["<", ">", "&", "\u{2028}", "\u{2029}"] {
            assert!(!raw.contains(bad), "raw data contains {bad:?}");
        }
        let expected = json!({
            "header": header,
            "entries": entries,
            "leafId": "a2",
            "systemPrompt": "prompt with </script> inside",
            "tools": [{"name":"read","description":"Reads <files>","parameters":params}],
            "sessionName": "name <!--",
        });
        assert_eq!(extract_data(&html), expected);
    }

    #[test]
    fn only_the_active_branch_is_rendered_and_others_are_counted() {
        let entries = vec![
            entry("r0", None, user("ROOT QUESTION")),
            entry("s1", Some("r0"), assistant_text("SIDE BRANCH ANSWER")),
            entry("s2", Some("s1"), user("SIDE FOLLOW UP")),
            entry("m1", Some("r0"), assistant_text("MAIN ANSWER")),
        ];
        let html = render(&entries, Some("m1"));
        let body = body_of(&html);
        assert!(body.contains("ROOT QUESTION"));
        assert!(body.contains("MAIN ANSWER"));
        assert!(!body.contains("stop: stop"));
        assert!(!body.contains("SIDE BRANCH ANSWER"));
        assert!(!body.contains("SIDE FOLLOW UP"));
        assert!(body.contains("data-count=\"2\">2 entries are on other branches"));
        // Root first, leaf last.
        let root = body.find("ROOT QUESTION").expect("root");
        let leaf = body.find("MAIN ANSWER").expect("leaf");
        assert!(root < leaf);
        // The side branch is still in the embedded data.
        assert!(html.contains("SIDE BRANCH ANSWER"));

        let html = render(&entries, Some("s2"));
        let body = body_of(&html);
        assert!(body.contains("SIDE FOLLOW UP") && !body.contains("MAIN ANSWER"));
        assert!(body.contains("1 entry is on other branches"));
    }

    #[test]
    fn null_or_unknown_leaf_renders_no_messages() {
        let entries = vec![entry("r0", None, user("ROOT QUESTION"))];
        let body_null = render(&entries, None);
        assert!(!body_of(&body_null).contains("ROOT QUESTION"));
        assert!(body_of(&body_null).contains("No entries on the active branch"));
        let body_unknown = render(&entries, Some("nope"));
        assert!(body_of(&body_unknown).contains("leaf entry is not in the file"));
    }

    #[test]
    fn parent_cycle_terminates() {
        let entries = vec![
            entry("x1", Some("x2"), user("ONE")),
            entry("x2", Some("x1"), user("TWO")),
        ];
        let html = render(&entries, Some("x1"));
        assert_eq!(body_of(&html).matches("<article").count(), 2);
    }

    #[test]
    fn every_kind_of_entry_shows_up() {
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk";
        let thinking_call = json!({"role":"assistant","content":[
                {"type":"thinking","thinking":"Let me ponder <deeply>"},
                {"type":"text","text":"Reading the file."},
                {"type":"toolCall","id":"call_7","name":"read","arguments":{"path":"src/main.rs","limit":3}}],
            "provider":"anthropic","model":"claude-x","usage":{"input":1200,"output":34,"cacheRead":800,
            "cacheWrite":0,"totalTokens":2034,"cost":{"total":0.5}},"stopReason":"toolUse","timestamp":2});
        let tool_result = json!({"role":"toolResult","toolCallId":"call_7","toolName":"read",
            "content":[{"type":"text","text":"fn main() {}"},{"type":"image","data":png,"mimeType":"image/png"}],
            "isError":true,"timestamp":3});
        let failed = json!({"role":"assistant","content":[],"provider":"anthropic","model":"claude-x",
            "usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0},
            "stopReason":"error","errorMessage":"overloaded_error: try later","timestamp":4});
        let bash = json!({"role":"bashExecution","command":"ls -la","output":"total 0\n","exitCode":2,
            "cancelled":false,"truncated":true,"fullOutputPath":"/tmp/out.log","timestamp":5});
        let user_image = json!({"role":"user","content":[{"type":"text","text":"look"},
            {"type":"image","data":png,"mimeType":"image/png"}],"timestamp":6});
        let entries = vec![
            json!({"type":"model_change","id":"e0","parentId":null,"timestamp":"t","provider":"anthropic","modelId":"claude-x"}),
            json!({"type":"thinking_level_change","id":"e1","parentId":"e0","timestamp":"t","thinkingLevel":"high"}),
            entry("e2", Some("e1"), user_image),
            entry("e3", Some("e2"), thinking_call),
            entry("e4", Some("e3"), tool_result),
            entry("e5", Some("e4"), failed),
            entry("e6", Some("e5"), bash),
            json!({"type":"compaction","id":"e7","parentId":"e6","timestamp":"t","summary":"We read main.rs.",
                   "firstKeptEntryId":"e4","tokensBefore":48213,"fromHook":false}),
            json!({"type":"branch_summary","id":"e8","parentId":"e7","timestamp":"t","fromId":"e3","summary":"Tried another path."}),
            json!({"type":"custom_message","id":"e9","parentId":"e8","timestamp":"t","customType":"reminder",
                   "content":"Remember the todos","display":true}),
            json!({"type":"session_info","id":"e10","parentId":"e9","timestamp":"t","name":"My work"}),
            json!({"type":"label","id":"e11","parentId":"e10","timestamp":"t","targetId":"e3","label":"important"}),
        ];
        let html = render(&entries, Some("e11"));
        let body = body_of(&html);
        let expect = [
            "<b>Model</b> anthropic/claude-x",
            "<b>Thinking level</b> high",
            "<details class=\"thinking\"><summary>Thinking</summary>",
            "Let me ponder &lt;deeply&gt;",
            "<span class=\"name\">read</span><span class=\"call-id mono\">call_7</span>",
            "&quot;path&quot;: &quot;src/main.rs&quot;",
            "1200 in, 34 out",
            "cache 800 read, 0 written",
            "$0.5000",
            "stop: toolUse",
            "article class=\"entry tool-result failed\"",
            "<pre>fn main() {}</pre>",
            &format!("src=\"data:image/png;base64,{png}\""),
            "article class=\"entry assistant failed\"",
            "<strong>Error</strong>: overloaded_error: try later",
            "<pre class=\"command\">$ ls -la</pre>",
            "<pre>total 0\n</pre>",
            "exit code 2",
            "full output in /tmp/out.log",
            "(48213 tokens before compaction)",
            "We read main.rs.",
            "Tried another path.",
            "Extension: reminder",
            "Remember the todos",
            "<b>Session name</b> My work",
            "<b>Label</b> important on e3",
            "<summary>System prompt</summary>",
        ];
        for needle in expect {
            assert!(body.contains(needle), "missing {needle:?}");
        }
        // Two images: one in the user message, one in the tool result.
        assert_eq!(body.matches("<img class=\"attached\"").count(), 2);
        assert!(!body.contains("other branches"));
    }

    #[test]
    fn crafted_image_fields_do_not_reach_markup() {
        let message = json!({"role":"user","content":[
            {"type":"image","data":"AAAA","mimeType":"image/png\" onerror=\"alert(1)"},
            {"type":"image","data":"AA\"><script>x</script>","mimeType":"image/png"}],"timestamp":1});
        let entries = [entry("i1", None, message)];
        let html = render(&entries, Some("i1"));
        let body = body_of(&html);
        assert!(!body.contains("<img"));
        assert!(!body.contains("onerror=\""));
        assert_eq!(body.matches("could not be shown").count(), 2);
    }

    #[test]
    fn fenced_code_becomes_pre_code() {
        let text = "Before\n```rust\nlet x = a < b;\n```\nAfter";
        let entries = [entry("c1", None, user(text))];
        let body = render(&entries, Some("c1"));
        let body = body_of(&body);
        assert!(body.contains("<div class=\"text\">Before</div>"));
        assert!(body.contains(
            "<pre><span class=\"code-lang\">rust</span><code>let x = a &lt; b;</code></pre>"
        ));
        assert!(body.contains("<div class=\"text\">After</div>"));
    }

    #[test]
    fn string_content_and_title_fall_back_to_id() {
        let message = json!({"role":"user","content":"plain string body","timestamp":1});
        let entries = [entry("p1", None, message)];
        let html = render(&entries, Some("p1"));
        assert!(html.contains("<title>Session sess-1</title>"));
        assert!(body_of(&html).contains("plain string body"));

        let header = header();
        let named = render_session_html(&ExportInput {
            header: &header,
            entries: &entries,
            leaf_id: Some("p1"),
            system_prompt: None,
            tools: &[],
            session_name: Some("Fix <the> bug"),
        });
        assert!(named.contains("<title>Fix &lt;the&gt; bug</title>"));
        assert!(!named.contains("<summary>System prompt</summary>"));
    }

    #[test]
    fn tools_are_listed() {
        let params = json!({"type":"object","properties":{"command":{"type":"string"}}});
        let tools = [ExportTool {
            name: "bash",
            description: "Runs a command",
            parameters: &params,
        }];
        let header = header();
        let html = render_session_html(&ExportInput {
            header: &header,
            entries: &[],
            leaf_id: None,
            system_prompt: None,
            tools: &tools,
            session_name: None,
        });
        assert!(html.contains("<summary>Tools (1)</summary>"));
        assert!(html.contains("<summary class=\"mono\">bash</summary>"));
        assert!(html.contains("&quot;command&quot;: {"));
    }

    #[test]
    fn template_is_offline_and_has_each_hole_once() {
        assert!(!TEMPLATE.contains("http://"));
        assert!(!TEMPLATE.contains("https://"));
        assert!(!TEMPLATE.contains("//cdn"));
        for hole in ["{{title}}", "{{body}}", "{{data}}"] {
            assert_eq!(TEMPLATE.matches(hole).count(), 1, "{hole}");
        }
        assert_eq!(TEMPLATE.matches("{{").count(), 3);
        let entries = [entry("a1", None, user("hello"))];
        let html = render(&entries, Some("a1"));
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(!html.contains("{{"));
    }

    #[test]
    fn default_file_name_follows_pi() {
        let path = Path::new("/s/--home-u--/2026-11-22T00-19-03-422Z_01a2009e.jsonl");
        assert_eq!(
            default_export_file_name(path),
            "pi-session-2026-11-22T00-19-03-422Z_01a2009e.html"
        );
        assert_eq!(
            default_export_file_name(Path::new("notes.txt")),
            "pi-session-notes.txt.html"
        );
    }

    #[test]
    fn ten_thousand_entries_all_render() {
        let mut entries = Vec::with_capacity(10_000);
        let mut parent: Option<String> = None;
        for i in 0..10_000 {
            let id = format!("{i:08x}");
            let message = if i % 2 == 0 {
                user(&format!("question {i}"))
            } else {
                assistant_text(&format!("answer {i}"))
            };
            entries.push(entry(&id, parent.as_deref(), message));
            parent = Some(id);
        }
        let html = render(&entries, parent.as_deref());
        assert_eq!(body_of(&html).matches("<article").count(), 10_000);
        assert!(body_of(&html).contains("answer 9999"));
    }
}
