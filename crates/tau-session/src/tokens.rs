//! Context-size accounting as pi does it (rpc.md §8.2, decision 19): the provider's own count
//! from the last successful reply, plus an estimate of everything after it at four UTF-16 code
//! units per token. Compaction thresholds and `contextUsage` both use it, so they match pi's.

use std::borrow::Borrow;
use tau_protocol::{
    AgentMessage, AssistantContent, StopReason, Usage, UserContent, UserContentBlock,
};

/// What an image counts for, in characters (pi's estimate of a typical image).
const IMAGE_CHARS: usize = 4800;

/// JavaScript's `string.length`.
fn js_len(text: &str) -> usize {
    text.encode_utf16().count()
}

fn blocks_chars(blocks: &[UserContentBlock]) -> usize {
    blocks
        .iter()
        .map(|block| match block {
            UserContentBlock::Text(t) => js_len(&t.text),
            UserContentBlock::Image(_) => IMAGE_CHARS,
        })
        .sum()
}

fn content_chars(content: &UserContent) -> usize {
    match content {
        UserContent::Text(text) => js_len(text),
        UserContent::Blocks(blocks) => blocks_chars(blocks),
    }
}

/// `usage.totalTokens`, else the sum of its parts.
pub fn usage_tokens(usage: &Usage) -> u64 {
    if usage.total_tokens > 0 {
        usage.total_tokens
    } else {
        usage.input + usage.output + usage.cache_read + usage.cache_write
    }
}

/// ceil(characters / 4) for one message.
pub fn estimate_tokens(message: &AgentMessage) -> u64 {
    let chars = match message {
        AgentMessage::User(m) => content_chars(&m.content),
        AgentMessage::Custom(m) => content_chars(&m.content),
        AgentMessage::ToolResult(m) => blocks_chars(&m.content),
        AgentMessage::Assistant(m) => m
            .content
            .iter()
            .map(|block| match block {
                AssistantContent::Text(t) => js_len(&t.text),
                AssistantContent::Thinking(t) => js_len(&t.thinking),
                AssistantContent::ToolCall(call) => {
                    js_len(&call.name)
                        + serde_json::to_string(&call.arguments)
                            .map(|s| js_len(&s))
                            .unwrap_or(0)
                }
            })
            .sum(),
        AgentMessage::BashExecution(m) => js_len(&m.command) + js_len(&m.output),
        AgentMessage::CompactionSummary(m) => js_len(&m.summary),
        AgentMessage::BranchSummary(m) => js_len(&m.summary),
    };
    chars.div_ceil(4) as u64
}

/// The index of the last reply whose usage can be trusted: not aborted, not an error, and
/// with a non-zero count.
fn last_counted_reply<M: Borrow<AgentMessage>>(messages: &[M]) -> Option<(usize, u64)> {
    messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| match m.borrow() {
            AgentMessage::Assistant(a)
                if !matches!(a.stop_reason, StopReason::Aborted | StopReason::Error) =>
            {
                let tokens = usage_tokens(&a.usage);
                (tokens > 0).then_some((i, tokens))
            }
            _ => None,
        })
}

/// The context's size in tokens: the last counted reply's usage plus estimates of every
/// message after it; without such a reply, estimates of everything. Takes the context's
/// shared messages as well as owned ones.
pub fn estimate_context_tokens<M: Borrow<AgentMessage>>(messages: &[M]) -> u64 {
    let estimate = |m: &M| estimate_tokens(m.borrow());
    match last_counted_reply(messages) {
        Some((i, tokens)) => tokens + messages[i + 1..].iter().map(estimate).sum::<u64>(),
        None => messages.iter().map(estimate).sum(),
    }
}

/// Whether the context's size can be told from a provider count: true without a compaction
/// on the branch; after one, only when the newest successful reply *entered after the
/// compaction entry* has a non-zero count. Replies kept from before the compaction sit after
/// its summary in the context but counted the old, longer context, so pi (and tau) report
/// `contextUsage.tokens` as unknown until the next reply.
pub fn usage_known_since_compaction(branch: &[&crate::store::SessionEntry]) -> bool {
    use crate::store::EntryKind;
    let Some(at) = branch
        .iter()
        .rposition(|e| matches!(e.kind, EntryKind::Compaction { .. }))
    else {
        return true;
    };
    branch[at + 1..]
        .iter()
        .rev()
        .find_map(|e| match e.message() {
            Some(AgentMessage::Assistant(a))
                if !matches!(a.stop_reason, StopReason::Aborted | StopReason::Error) =>
            {
                Some(usage_tokens(&a.usage) > 0)
            }
            _ => None,
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tau_protocol::{TextContent, UserMessage};

    fn user(text: &str) -> AgentMessage {
        AgentMessage::User(UserMessage {
            content: UserContent::Text(text.into()),
            timestamp: 0,
            attachments: None,
        })
    }

    #[test]
    fn estimates_count_utf16_units_rounded_up() {
        assert_eq!(estimate_tokens(&user("abcde")), 2);
        // Four astral characters are eight UTF-16 units: two tokens, not one.
        assert_eq!(estimate_tokens(&user("😀😀😀😀")), 2);
        let blocks = AgentMessage::User(UserMessage {
            content: UserContent::Blocks(vec![UserContentBlock::Text(TextContent {
                text: "abcd".into(),
                text_signature: None,
            })]),
            timestamp: 0,
            attachments: None,
        });
        assert_eq!(estimate_tokens(&blocks), 1);
    }

    #[test]
    fn usage_falls_back_to_the_sum_of_parts() {
        let usage = Usage {
            input: 3,
            output: 4,
            cache_read: 5,
            cache_write: 6,
            ..Usage::default()
        };
        assert_eq!(usage_tokens(&usage), 18);
        assert_eq!(
            usage_tokens(&Usage {
                total_tokens: 7,
                ..usage
            }),
            7
        );
        assert_eq!(estimate_context_tokens(&[user("abcdefgh"), user("a")]), 3);
    }
}
