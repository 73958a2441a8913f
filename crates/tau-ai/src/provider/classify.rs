//! What an error means: a context overflow (compact, then retry once) or a transient failure
//! (retry with back-off). The patterns are pi's, so tau reacts to the same provider texts.

use std::sync::LazyLock;

use regex::{Regex, RegexBuilder};
use tau_protocol::{AssistantMessage, StopReason};

/// Compiles one of the constant patterns below; the tests compile every one of them.
#[allow(clippy::expect_used)]
fn ci(pattern: &str) -> Regex {
    RegexBuilder::new(pattern)
        .case_insensitive(true)
        .build()
        .expect("constant pattern")
}

static OVERFLOW: LazyLock<Regex> = LazyLock::new(|| {
    ci(concat!(
        r"prompt is too long|request_too_large|input is too long for requested model|",
        r"exceeds the context window|",
        r"exceeds (the )?(model's )?maximum context length|",
        r"input token count.*exceeds the maximum|maximum prompt length is \d+|",
        r"reduce the length of the messages|maximum context length is \d+ tokens|",
        r"exceeds (the )?maximum allowed input length of \d+ tokens|",
        r"input \(\d+ tokens\) is longer than the model's context length \(\d+ tokens\)|",
        r"exceeds the limit of \d+|exceeds the available context size|",
        r"greater than the context length|context window exceeds limit|",
        r"exceeded model token limit|too large for model with \d+ maximum context length|",
        r"model_context_window_exceeded|prompt too long; exceeded (max )?context length|",
        r"context[_ ]length[_ ]exceeded|too many tokens|token limit exceeded|",
        r"^4(00|13)\s*(status code)?\s*\(no body\)"
    ))
});

static NOT_OVERFLOW: LazyLock<Regex> =
    LazyLock::new(|| ci(r"^(Throttling error|Service unavailable):|rate limit|too many requests"));

static NOT_RETRYABLE: LazyLock<Regex> = LazyLock::new(|| {
    ci(concat!(
        r"GoUsageLimitError|FreeUsageLimitError|Monthly usage limit reached|available balance|",
        r"insufficient_quota|out of budget|quota exceeded|billing"
    ))
});

static RETRYABLE: LazyLock<Regex> = LazyLock::new(|| {
    ci(concat!(
        r"overloaded|provider.?returned.?error|rate.?limit|too many requests|429|500|502|503|504|",
        r"service.?unavailable|server.?error|internal.?error|network.?error|connection.?error|",
        r"connection.?refused|connection.?lost|websocket.?closed|websocket.?error|",
        r"other side closed|fetch failed|upstream.?connect|reset before headers|socket hang up|",
        r"ended without|stream ended before message_stop|",
        r"http2 request did not get a response|timed? out|timeout|terminated|retry delay"
    ))
});

/// Whether an error text says the context window was exceeded.
pub fn is_overflow_error(message: &str) -> bool {
    OVERFLOW.is_match(message) && !NOT_OVERFLOW.is_match(message)
}

/// pi's `isContextOverflow`: an overflow error, or a reply whose usage shows the window was
/// exceeded silently.
pub fn is_context_overflow(message: &AssistantMessage, context_window: u64) -> bool {
    let usage = &message.usage;
    let input = usage.input + usage.cache_read;
    match message.stop_reason {
        StopReason::Error => message
            .error_message
            .as_deref()
            .is_some_and(is_overflow_error),
        StopReason::Stop => context_window > 0 && input > context_window,
        StopReason::Length => {
            context_window > 0 && usage.output == 0 && input as f64 >= 0.99 * context_window as f64
        }
        _ => false,
    }
}

/// Whether an error text describes a transient failure worth retrying (overflow excluded).
pub fn is_retryable_error(message: &str) -> bool {
    !is_overflow_error(message) && !NOT_RETRYABLE.is_match(message) && RETRYABLE.is_match(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_texts() {
        for text in [
            "400 prompt is too long: 210000 tokens > 200000 maximum",
            "400 This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.",
            "400 The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            "400 Your input exceeds the context window of this model.",
            "400 status code (no body)",
        ] {
            assert!(is_overflow_error(text), "{text}");
        }
        assert!(!is_overflow_error(
            "429 rate limit: too many tokens per minute"
        ));
        assert!(!is_overflow_error("500 internal error"));
    }

    #[test]
    fn retryable_texts() {
        for text in [
            "529 Overloaded",
            r#"529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            "429 Rate limit reached",
            "503 Service Unavailable",
            "Connection lost: the server closed the stream",
            "Request timed out: no data received for 60 seconds",
        ] {
            assert!(is_retryable_error(text), "{text}");
        }
        assert!(!is_retryable_error(
            "429 You exceeded your current quota, please check your plan and billing details"
        ));
        assert!(!is_retryable_error("400 prompt is too long: 500 tokens"));
        assert!(!is_retryable_error("401 invalid x-api-key"));
    }
}
