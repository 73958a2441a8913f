//! What the model sees of an agent's context (`convertToLlm`): the LLM roles pass through,
//! bash executions, extension messages and summaries become user messages in pi's wording.

use tau_ai::{Message, TextContent, UserContent, UserContentBlock, UserMessage};

use crate::AgentMessage;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BashExecutionMessage;

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
}
