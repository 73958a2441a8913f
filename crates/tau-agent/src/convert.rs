//! What the model sees of an agent's context (`convertToLlm`): the LLM roles pass through,
//! bash executions, extension messages and summaries become user messages in pi's wording.

use tau_protocol::{
    AgentMessage, Message, TextContent, UserContent, UserContentBlock, UserMessage,
};

fn user_text(text: String, timestamp: i64) -> Message {
    Message::User(UserMessage {
        content: UserContent::Blocks(vec![UserContentBlock::Text(TextContent {
            text,
            text_signature: None,
        })]),
        timestamp,
        attachments: None,
    })
}

/// Converts the context, one message out per message in (bash executions marked
/// `excludeFromContext` are left out).
pub fn convert_to_llm(messages: &[AgentMessage]) -> Vec<Message> {
    messages
        .iter()
        .filter_map(|message| match message {
            AgentMessage::User(m) => Some(Message::User(m.clone())),
            AgentMessage::Assistant(m) => Some(Message::Assistant(m.clone())),
            AgentMessage::ToolResult(m) => Some(Message::ToolResult(m.clone())),
            AgentMessage::BashExecution(b) if b.exclude_from_context == Some(true) => None,
            AgentMessage::BashExecution(b) => {
                let mut text = format!("Ran `{}`\n", b.command);
                if b.output.is_empty() {
                    text.push_str("(no output)");
                } else {
                    text.push_str(&format!("```\n{}\n```", b.output));
                }
                if b.cancelled {
                    text.push_str("\n\n(command cancelled)");
                } else if let Some(code) = b.exit_code.filter(|c| *c != 0) {
                    text.push_str(&format!("\n\nCommand exited with code {code}"));
                }
                if b.truncated
                    && let Some(path) = &b.full_output_path
                {
                    text.push_str(&format!("\n\n[Output truncated. Full output: {path}]"));
                }
                Some(user_text(text, b.timestamp))
            }
            AgentMessage::Custom(c) => Some(Message::User(UserMessage {
                content: match &c.content {
                    UserContent::Text(t) => UserContent::Blocks(vec![UserContentBlock::Text(TextContent {
                        text: t.clone(),
                        text_signature: None,
                    })]),
                    blocks => blocks.clone(),
                },
                timestamp: c.timestamp,
                attachments: None,
            })),
            AgentMessage::BranchSummary(s) => Some(user_text(
                format!(
                    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n{}</summary>",
                    s.summary
                ),
                s.timestamp,
            )),
            AgentMessage::CompactionSummary(s) => Some(user_text(
                format!(
                    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n{}\n</summary>",
                    s.summary
                ),
                s.timestamp,
            )),
        })
        .collect()
}

/// What the model reads in place of an image when settings block images (pi's text).
pub const IMAGES_BLOCKED: &str = "Image reading is disabled.";

/// `images.blockImages` (pi's `convertToLlm` wrapper): every image of a user or tool-result
/// message becomes the text [`IMAGES_BLOCKED`], and a run of such texts becomes one.
pub fn block_images(mut messages: Vec<Message>) -> Vec<Message> {
    fn replace(blocks: &mut Vec<UserContentBlock>) {
        if !blocks
            .iter()
            .any(|b| matches!(b, UserContentBlock::Image(_)))
        {
            return;
        }
        let is_placeholder = |b: &UserContentBlock| matches!(b, UserContentBlock::Text(t) if t.text == IMAGES_BLOCKED);
        let mut out: Vec<UserContentBlock> = Vec::with_capacity(blocks.len());
        for block in blocks.drain(..) {
            let block = match block {
                UserContentBlock::Image(_) => UserContentBlock::Text(TextContent {
                    text: IMAGES_BLOCKED.to_string(),
                    text_signature: None,
                }),
                other => other,
            };
            if is_placeholder(&block) && out.last().is_some_and(is_placeholder) {
                continue;
            }
            out.push(block);
        }
        *blocks = out;
    }
    for message in &mut messages {
        match message {
            Message::User(UserMessage {
                content: UserContent::Blocks(blocks),
                ..
            }) => replace(blocks),
            Message::ToolResult(result) => replace(&mut result.content),
            _ => {}
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use tau_protocol::BashExecutionMessage;

    fn text_of(m: &Message) -> String {
        match m {
            Message::User(UserMessage {
                content: UserContent::Blocks(b),
                ..
            }) => match &b[0] {
                UserContentBlock::Text(t) => t.text.clone(),
                UserContentBlock::Image(_) => String::new(),
            },
            _ => String::new(),
        }
    }

    #[test]
    fn bash_executions_use_pi_wording() {
        let bash = |output: &str, exit: Option<i32>, cancelled: bool| {
            AgentMessage::BashExecution(BashExecutionMessage {
                command: "ls -la".into(),
                output: output.into(),
                exit_code: exit,
                cancelled,
                truncated: false,
                full_output_path: None,
                timestamp: 1,
                exclude_from_context: None,
            })
        };
        let out = convert_to_llm(&[bash("hello\nerr\n", Some(3), false), bash("", None, true)]);
        assert_eq!(
            text_of(&out[0]),
            "Ran `ls -la`\n```\nhello\nerr\n\n```\n\nCommand exited with code 3"
        );
        assert_eq!(
            text_of(&out[1]),
            "Ran `ls -la`\n(no output)\n\n(command cancelled)"
        );
    }

    #[test]
    fn blocked_images_become_one_placeholder_per_run() {
        let text = |t: &str| {
            UserContentBlock::Text(TextContent {
                text: t.into(),
                text_signature: None,
            })
        };
        let image = || {
            UserContentBlock::Image(tau_protocol::ImageContent {
                data: "AAAA".into(),
                mime_type: "image/png".into(),
            })
        };
        let user = Message::User(UserMessage {
            content: UserContent::Blocks(vec![
                text("look"),
                image(),
                image(),
                text("and"),
                image(),
            ]),
            timestamp: 1,
            attachments: None,
        });
        let result = Message::ToolResult(tau_protocol::ToolResultMessage {
            tool_call_id: "c".into(),
            tool_name: "read".into(),
            content: vec![image()],
            details: None,
            is_error: false,
            timestamp: 2,
        });
        let plain = Message::User(UserMessage {
            content: UserContent::Text("no images".into()),
            timestamp: 3,
            attachments: None,
        });
        let out = block_images(vec![user, result, plain.clone()]);
        let Message::User(UserMessage {
            content: UserContent::Blocks(blocks),
            ..
        }) = &out[0]
        else {
            panic!("{out:?}");
        };
        assert_eq!(
            blocks,
            &vec![
                text("look"),
                text(IMAGES_BLOCKED),
                text("and"),
                text(IMAGES_BLOCKED)
            ]
        );
        let Message::ToolResult(result) = &out[1] else {
            panic!("{out:?}");
        };
        assert_eq!(result.content, vec![text(IMAGES_BLOCKED)]);
        assert_eq!(out[2], plain);
    }
}
