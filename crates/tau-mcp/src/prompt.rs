//! MCP prompts as slash commands (decision T95): each prompt a server lists is the command
//! `mcp:<server>:<prompt>`; the words after it become the prompt's arguments in the order
//! the server declared them (the last one takes the rest), and `prompts/get`'s messages
//! become the text and images of one user message.

use rmcp::model::{GetPromptResult, Prompt};
use serde_json::{Map, Value};
use tau_protocol::{ImageContent, UserContentBlock};

/// The prefix of every MCP prompt command (`/mcp:<server>:<prompt>`).
pub const COMMAND_PREFIX: &str = "mcp:";

/// One prompt of one server, as a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPrompt {
    /// `mcp:<server>:<prompt>`, without the slash.
    pub command: String,
    pub server: String,
    /// The server's own name of the prompt.
    pub name: String,
    pub description: Option<String>,
    pub arguments: Vec<PromptArgumentInfo>,
}

/// One declared argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptArgumentInfo {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
}

/// Why a prompt command could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    #[error("/{command} needs the argument \"{argument}\" (usage: /{command} {usage})")]
    MissingArgument {
        command: String,
        argument: String,
        usage: String,
    },
    #[error("/{command}: {message}")]
    Server { command: String, message: String },
}

/// The command of `prompt` of `server`: `mcp:<server>:<prompt>`, with whitespace and control
/// characters as `_` (a command name ends at the first space).
pub fn command_name(server: &str, prompt: &str) -> String {
    let clean = |text: &str| -> String {
        text.chars()
            .map(|c| {
                if c.is_whitespace() || c.is_control() {
                    '_'
                } else {
                    c
                }
            })
            .collect()
    };
    format!("{COMMAND_PREFIX}{}:{}", clean(server), clean(prompt))
}

impl McpPrompt {
    pub(crate) fn new(server: &str, command: String, prompt: &Prompt) -> Self {
        Self {
            command,
            server: server.to_string(),
            name: prompt.name.clone(),
            description: prompt
                .description
                .clone()
                .filter(|text| !text.trim().is_empty())
                .or_else(|| prompt.title.clone()),
            arguments: prompt
                .arguments
                .iter()
                .flatten()
                .map(|argument| PromptArgumentInfo {
                    name: argument.name.clone(),
                    description: argument.description.clone(),
                    required: argument.required == Some(true),
                })
                .collect(),
        }
    }

    /// `<city> [state]`: the arguments, required ones in angle brackets.
    pub fn usage(&self) -> String {
        self.arguments
            .iter()
            .map(|argument| {
                if argument.required {
                    format!("<{}>", argument.name)
                } else {
                    format!("[{}]", argument.name)
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The arguments `prompts/get` takes from the words typed after the command (split as
    /// prompt templates split them): the n-th word for the n-th declared argument, and the
    /// rest of the words, joined by spaces, for the last one. A required argument without a
    /// word is an error; words for a prompt without arguments are dropped.
    pub fn bind(&self, words: &[String]) -> Result<Map<String, Value>, PromptError> {
        let mut bound = Map::new();
        let last = self.arguments.len().saturating_sub(1);
        for (index, argument) in self.arguments.iter().enumerate() {
            let value = if index == last {
                words.get(index..).map(|rest| rest.join(" "))
            } else {
                words.get(index).cloned()
            }
            .filter(|value| !value.is_empty());
            match value {
                Some(value) => {
                    bound.insert(argument.name.clone(), Value::String(value));
                }
                None if argument.required => {
                    return Err(PromptError::MissingArgument {
                        command: self.command.clone(),
                        argument: argument.name.clone(),
                        usage: self.usage(),
                    });
                }
                None => {}
            }
        }
        Ok(bound)
    }
}

/// What a prompt expanded to: the text of its messages, in order and separated by a blank
/// line, and their images.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpandedPrompt {
    pub text: String,
    pub images: Vec<ImageContent>,
}

/// Maps `prompts/get`'s messages to one user message (both roles alike: tau's input is one
/// user message, and a prompt's messages are the context it asks for).
pub fn map_prompt(result: GetPromptResult) -> ExpandedPrompt {
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for message in result.messages {
        match crate::content::map_block(message.content) {
            UserContentBlock::Text(text) => texts.push(text.text),
            UserContentBlock::Image(image) => images.push(image),
        }
    }
    ExpandedPrompt {
        text: texts.join("\n\n"),
        images,
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{PromptArgument, PromptMessage, Role};

    use super::*;

    fn prompt(arguments: &[(&str, bool)]) -> McpPrompt {
        let prompt = Prompt::new(
            "p",
            Some("d"),
            Some(
                arguments
                    .iter()
                    .map(|(name, required)| PromptArgument::new(*name).with_required(*required))
                    .collect(),
            ),
        );
        McpPrompt::new("srv", command_name("srv", "p"), &prompt)
    }

    fn words(text: &[&str]) -> Vec<String> {
        text.iter().map(|word| word.to_string()).collect()
    }

    #[test]
    fn words_fill_the_arguments_in_order_and_the_last_takes_the_rest() {
        let p = prompt(&[("city", true), ("state", false)]);
        let bound = p.bind(&words(&["Paris", "Ile", "de", "France"])).unwrap();
        assert_eq!(bound["city"], "Paris");
        assert_eq!(bound["state"], "Ile de France");
        let bound = p.bind(&words(&["Paris"])).unwrap();
        assert!(!bound.contains_key("state"));
        let missing = p.bind(&[]).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "/mcp:srv:p needs the argument \"city\" (usage: /mcp:srv:p <city> [state])"
        );
        assert!(prompt(&[]).bind(&words(&["ignored"])).unwrap().is_empty());
    }

    #[test]
    fn names_keep_no_whitespace() {
        assert_eq!(command_name("my srv", "a\tb"), "mcp:my_srv:a_b");
    }

    #[test]
    fn messages_become_one_text_and_images() {
        let result = GetPromptResult::new(vec![
            PromptMessage::new_text(Role::User, "first"),
            PromptMessage::new_text(Role::Assistant, "second"),
        ]);
        let expanded = map_prompt(result);
        assert_eq!(expanded.text, "first\n\nsecond");
        assert!(expanded.images.is_empty());
    }
}
