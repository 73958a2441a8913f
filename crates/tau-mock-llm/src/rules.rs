//! Rules mode: a deterministic answer built from the request itself, for demos that run
//! without a script. A tool result gets a summary; a request to run or list something gets a
//! `bash` call when the request offers that tool (a request to list files gets an `ls` call
//! when only that is offered); anything else gets a friendly echo.

use serde_json::{Value, json};

use crate::api::Api;
use crate::reply::Reply;

/// How much of a tool's output the summary quotes.
const SUMMARY_CHARS: usize = 200;
/// How much of the prompt the echo quotes.
const ECHO_CHARS: usize = 80;

/// What the rules look at in a request.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Conversation {
    pub last: Last,
    pub tools: Vec<String>,
    /// Characters of text in the prompt, for the usage estimate.
    pub input_chars: usize,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) enum Last {
    ToolResult(String),
    User(String),
    #[default]
    Other,
}

/// The reply the rules give to request number `seq`.
pub(crate) fn reply(api: Api, body: &Value, seq: u64) -> Reply {
    let conversation = read(api, body);
    let mut reply = match &conversation.last {
        Last::ToolResult(output) => Reply::text(format!(
            "The command output was: {}",
            clip(output.trim(), SUMMARY_CHARS)
        )),
        Last::User(text) => match command(text) {
            Some(cmd) if conversation.tools.iter().any(|t| t == "bash") => {
                Reply::new().tool_call(call_id(api, seq), "bash", json!({"command": cmd}))
            }
            // Without a shell (the demo offers only read-only tools), listing still works.
            Some(cmd) if cmd == "ls" && conversation.tools.iter().any(|t| t == "ls") => {
                Reply::new().tool_call(call_id(api, seq), "ls", json!({}))
            }
            _ => Reply::text(greeting(text)),
        },
        Last::Other => Reply::text("Hello from tau-mock-llm! What shall we do next?"),
    };
    let output_chars: usize = reply
        .content
        .iter()
        .map(|b| match b {
            crate::Block::Text { text, .. } => text.chars().count(),
            crate::Block::ToolCall { arguments, .. } => arguments.to_string().chars().count(),
            _ => 0,
        })
        .sum();
    let tokens = |chars: usize| u64::try_from(chars.div_ceil(4).max(1)).unwrap_or(u64::MAX);
    reply = reply.usage(tokens(conversation.input_chars), tokens(output_chars), 0, 0);
    reply
}

/// A call id in the shape `api`'s own ids have.
fn call_id(api: Api, seq: u64) -> String {
    match api {
        Api::AnthropicMessages => format!("toolu_mock_{seq}"),
        Api::BedrockConverseStream => format!("tooluse_mock_{seq}"),
        _ => format!("call_mock_{seq}"),
    }
}

fn greeting(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        "Hello from tau-mock-llm! What shall we do next?".to_owned()
    } else {
        format!(
            "Hello from tau-mock-llm! You said: \"{}\"",
            clip(&collapsed, ECHO_CHARS)
        )
    }
}

/// The shell command a prompt asks for, if it asks for one.
pub(crate) fn command(text: &str) -> Option<String> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix('!') {
        return non_empty(rest.trim_start_matches('!'));
    }
    // ASCII lowering keeps byte offsets, so positions found in `lower` index `text`.
    let lower = text.to_ascii_lowercase();
    if lower.contains("list files") {
        return Some("ls".to_owned());
    }
    let at = lower.find("run ")?;
    non_empty(&text[at + 4..])
}

fn non_empty(raw: &str) -> Option<String> {
    let trimmed = raw
        .trim()
        .trim_end_matches(['.', '?', '!'])
        .trim()
        .trim_matches(['`', '"', '\''])
        .trim();
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Joins the text of a content value: a string, or an array of parts carrying `text`.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                _ => p.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn count_chars(value: &Value) -> usize {
    match value {
        Value::String(s) => s.chars().count(),
        Value::Array(items) => items.iter().map(count_chars).sum(),
        Value::Object(map) => map.values().map(count_chars).sum(),
        _ => 0,
    }
}

fn names(tools: Option<&Value>, pick: impl Fn(&Value) -> Vec<String>) -> Vec<String> {
    tools
        .and_then(Value::as_array)
        .map(|tools| tools.iter().flat_map(pick).collect())
        .unwrap_or_default()
}

fn name_at(tool: &Value, pointer: &str) -> Vec<String> {
    tool.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .into_iter()
        .collect()
}

/// Reads the last turn and the offered tools out of a request body.
pub(crate) fn read(api: Api, body: &Value) -> Conversation {
    match api.stream_format() {
        Api::BedrockConverseStream => {
            let messages = body.get("messages");
            let last = match messages.and_then(Value::as_array).and_then(|m| m.last()) {
                Some(m) if m["role"] == "user" => {
                    let blocks = m["content"]
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or_default();
                    match blocks.iter().rev().find_map(|b| b.get("toolResult")) {
                        Some(result) => Last::ToolResult(text_of(&result["content"])),
                        None => Last::User(text_of(&m["content"])),
                    }
                }
                _ => Last::Other,
            };
            Conversation {
                last,
                tools: names(body.pointer("/toolConfig/tools"), |t| {
                    name_at(t, "/toolSpec/name")
                }),
                input_chars: messages.map_or(0, count_chars)
                    + body.get("system").map_or(0, count_chars),
            }
        }
        Api::AnthropicMessages => {
            let messages = body.get("messages");
            let last = messages.and_then(Value::as_array).and_then(|m| m.last());
            let last = match last {
                Some(m) if m["role"] == "user" => {
                    let results: Vec<&Value> = m["content"]
                        .as_array()
                        .map(|blocks| {
                            blocks
                                .iter()
                                .filter(|b| b["type"] == "tool_result")
                                .collect()
                        })
                        .unwrap_or_default();
                    match results.last() {
                        Some(result) => Last::ToolResult(text_of(&result["content"])),
                        None => Last::User(text_of(&m["content"])),
                    }
                }
                _ => Last::Other,
            };
            Conversation {
                last,
                tools: names(body.get("tools"), |t| name_at(t, "/name")),
                input_chars: messages.map_or(0, count_chars)
                    + body.get("system").map_or(0, count_chars),
            }
        }
        Api::OpenAiCompletions => {
            let messages = body.get("messages");
            let last = match messages.and_then(Value::as_array).and_then(|m| m.last()) {
                Some(m) if m["role"] == "tool" => Last::ToolResult(text_of(&m["content"])),
                Some(m) if m["role"] == "user" => Last::User(text_of(&m["content"])),
                _ => Last::Other,
            };
            Conversation {
                last,
                tools: names(body.get("tools"), |t| name_at(t, "/function/name")),
                input_chars: messages.map_or(0, count_chars),
            }
        }
        Api::OpenAiResponses => {
            let input = body.get("input");
            let last = match input {
                Some(Value::String(s)) => Last::User(s.clone()),
                Some(Value::Array(items)) => match items.last() {
                    Some(item) if item["type"] == "function_call_output" => {
                        Last::ToolResult(text_of(&item["output"]))
                    }
                    Some(item) if item["role"] == "user" => Last::User(text_of(&item["content"])),
                    _ => Last::Other,
                },
                _ => Last::Other,
            };
            Conversation {
                last,
                tools: names(body.get("tools"), |t| name_at(t, "/name")),
                input_chars: input.map_or(0, count_chars)
                    + body.get("instructions").map_or(0, count_chars),
            }
        }
        Api::GoogleGenerativeAi => {
            let contents = body.get("contents");
            let last = match contents.and_then(Value::as_array).and_then(|c| c.last()) {
                Some(content) => {
                    let parts = content["parts"]
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or_default();
                    let response = parts
                        .iter()
                        .rev()
                        .find_map(|p| p.get("functionResponse"))
                        .map(|r| match &r["response"] {
                            Value::Object(map) => ["output", "content", "result", "error"]
                                .iter()
                                .find_map(|k| map.get(*k))
                                .map_or_else(
                                    || r["response"].to_string(),
                                    |v| match v {
                                        Value::String(s) => s.clone(),
                                        other => text_of(other),
                                    },
                                ),
                            other => text_of(other),
                        });
                    match response {
                        Some(output) => Last::ToolResult(output),
                        None if content["role"] != "model" => {
                            Last::User(text_of(&content["parts"]))
                        }
                        None => Last::Other,
                    }
                }
                None => Last::Other,
            };
            let tools = names(body.get("tools"), |t| {
                let decls = t
                    .get("functionDeclarations")
                    .or_else(|| t.get("function_declarations"));
                names(decls, |d| name_at(d, "/name"))
            });
            Conversation {
                last,
                tools,
                input_chars: contents.map_or(0, count_chars)
                    + body.get("systemInstruction").map_or(0, count_chars),
            }
        }
        // `stream_format` maps these two onto the formats above.
        Api::AzureOpenAiResponses | Api::GoogleVertex => Conversation::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Block;

    #[test]
    fn commands_are_found_in_prompts() {
        assert_eq!(command("!git status").as_deref(), Some("git status"));
        assert_eq!(command("please List Files here").as_deref(), Some("ls"));
        assert_eq!(command("Run `cargo test`.").as_deref(), Some("cargo test"));
        assert_eq!(
            command("could you run echo hi?").as_deref(),
            Some("echo hi")
        );
        assert_eq!(command("run "), None);
        assert_eq!(command("hello there"), None);
        assert_eq!(command("!"), None);
    }

    #[test]
    fn each_api_exposes_its_last_turn_and_tools() {
        let anthropic = json!({"system": "sys", "tools": [{"name": "bash"}], "messages": [
            {"role": "user", "content": "run ls"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                "content": [{"type": "text", "text": "a.txt"}]}]}]});
        let c = read(Api::AnthropicMessages, &anthropic);
        assert_eq!(c.last, Last::ToolResult("a.txt".into()));
        assert_eq!(c.tools, ["bash"]);
        assert!(c.input_chars >= "run ls".len() + "a.txt".len() + "sys".len());

        let completions = json!({"tools": [{"type": "function", "function": {"name": "bash"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]});
        let c = read(Api::OpenAiCompletions, &completions);
        assert_eq!(
            (c.last, c.tools),
            (Last::User("hi".into()), vec!["bash".to_owned()])
        );

        let responses = json!({"tools": [{"type": "function", "name": "bash"}], "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "list files"}]},
            {"type": "function_call_output", "call_id": "c", "output": "x\ny"}]});
        let c = read(Api::OpenAiResponses, &responses);
        assert_eq!(
            (c.last, c.tools),
            (Last::ToolResult("x\ny".into()), vec!["bash".to_owned()])
        );

        let google = json!({"tools": [{"functionDeclarations": [{"name": "read"}, {"name": "bash"}]}],
            "contents": [{"role": "user", "parts": [{"functionResponse": {"name": "bash",
                "response": {"output": "done"}}}]}]});
        let c = read(Api::GoogleGenerativeAi, &google);
        assert_eq!(
            (c.last, c.tools),
            (
                Last::ToolResult("done".into()),
                vec!["read".to_owned(), "bash".to_owned()]
            )
        );
    }

    #[test]
    fn replies_follow_the_rules() {
        let ask = json!({"tools": [{"name": "bash"}], "messages": [{"role": "user", "content": "please list files"}]});
        let r = reply(Api::AnthropicMessages, &ask, 3);
        assert_eq!(
            r.content,
            [Block::ToolCall {
                id: "toolu_mock_3".into(),
                name: "bash".into(),
                arguments: json!({"command": "ls"}),
                chunks: None
            }]
        );
        // Only read-only tools: listing uses `ls`; other commands are echoed, never run.
        let read_only = json!({"tools": [{"name": "ls"}, {"name": "read"}],
            "messages": [{"role": "user", "content": "please list files"}]});
        let r = reply(Api::AnthropicMessages, &read_only, 2);
        assert!(
            matches!(&r.content[0], Block::ToolCall { name, .. } if name == "ls"),
            "{r:?}"
        );
        let rm = json!({"tools": [{"name": "ls"}], "messages": [{"role": "user", "content": "!rm -rf ~"}]});
        let r = reply(Api::AnthropicMessages, &rm, 3);
        assert!(matches!(&r.content[0], Block::Text { .. }), "{r:?}");
        let no_tools = json!({"messages": [{"role": "user", "content": "please list files"}]});
        let r = reply(Api::AnthropicMessages, &no_tools, 1);
        assert!(
            matches!(&r.content[0], Block::Text { text, .. } if text.contains("please list files"))
        );
        assert!(r.usage.input >= 4);
        let long = "x".repeat(500);
        let result = json!({"messages": [{"role": "tool", "tool_call_id": "c", "content": long}]});
        let r = reply(Api::OpenAiCompletions, &result, 1);
        let Block::Text { text, .. } = &r.content[0] else {
            panic!("{r:?}")
        };
        assert!(text.starts_with("The command output was: xxx"));
        assert!(text.ends_with('…') && text.chars().count() < 240, "{text}");
        assert_eq!(
            r.usage.output,
            u64::try_from(text.chars().count().div_ceil(4)).unwrap()
        );
    }
}
