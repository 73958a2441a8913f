//! Automatic retry of transient provider failures (rpc.md §9), as pure rules: which errors
//! are worth another attempt, how long to wait before it, and the attempt counter. The
//! session owns the sleep, the events and the removal of the failed reply from the context.
//!
//! ## Where a server's `retry-after` comes from
//! tau-ai reads the `retry-after-ms` / `retry-after` headers into
//! `tau_ai::provider::ProviderError::Http::retry_after`, but the failed reply reaches the
//! session as an [`AssistantMessage`] whose only trace of the error is `errorMessage`, so the
//! header value is lost on the way. Until tau-ai carries it across (the intended route: a
//! field on the final `AssistantMessageEvent::Error`, or a `#[serde(skip)]` field on
//! `AssistantMessage`, so the session file and the wire stay pi's), the session can still
//! honour the hints that providers write into the error text ("Please try again in 20s",
//! Google's `"retryDelay": "34s"`): [`retry_after_from_message`] reads those. Whichever is
//! known is passed to [`retry_delay`] (header first).

use std::time::Duration;

use tau_ai::provider::{is_context_overflow, is_retryable_error};
use tau_protocol::{AssistantMessage, StopReason};

use crate::Settings;

/// `retry.*` settings that shape the agent-level retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    pub enabled: bool,
    pub max_retries: u32,
    pub base_delay_ms: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            enabled: true,
            max_retries: 3,
            base_delay_ms: 2000,
        }
    }
}

impl RetrySettings {
    pub fn from_settings(settings: &Settings) -> Self {
        Self {
            enabled: settings.retry_enabled(),
            max_retries: settings.retry_max_retries(),
            base_delay_ms: settings.retry_base_delay_ms(),
        }
    }
}

/// Whether an error text describes a transient failure: pi's patterns (overloaded, rate
/// limits, 5xx, network breaks, timeouts), never a context overflow (that is compaction's
/// job) and never a spent quota or billing problem.
pub fn is_retryable(error_message: &str) -> bool {
    is_retryable_error(error_message)
}

/// pi's check on a finished reply: it ended in an error, has an error text, is not a context
/// overflow for this window, and the text is retryable.
pub fn is_retryable_reply(message: &AssistantMessage, context_window: u64) -> bool {
    if message.stop_reason != StopReason::Error {
        return false;
    }
    let Some(text) = message.error_message.as_deref().filter(|t| !t.is_empty()) else {
        return false;
    };
    !is_context_overflow(message, context_window) && is_retryable(text)
}

/// The wait before retry number `attempt` (1-based): `base_delay_ms × 2^(attempt−1)`, so
/// 2 s, 4 s, 8 s with the defaults; attempt 0 is treated as 1. A delay the server asked for
/// replaces the computed one: the server knows when it will accept the request again, and
/// waiting less only earns another 429. (Whether a very long server delay should end the
/// retries instead, as `retry.provider.maxRetryDelayMs` does for provider-level retries, is
/// the caller's choice.)
pub fn retry_delay(attempt: u32, base_delay_ms: u64, retry_after: Option<Duration>) -> Duration {
    if let Some(wait) = retry_after {
        return wait;
    }
    let exponent = attempt.saturating_sub(1).min(63);
    let factor = 1u64.checked_shl(exponent).unwrap_or(u64::MAX);
    Duration::from_millis(base_delay_ms.saturating_mul(factor))
}

/// A delay a provider wrote into its error text: "try again in 1.5s", "retry in 250ms",
/// "retry after 20 seconds", `"retryDelay": "34s"`. `None` when there is no such hint.
pub fn retry_after_from_message(error_message: &str) -> Option<Duration> {
    let lower = error_message.to_ascii_lowercase();
    for marker in [
        "try again in",
        "retry in",
        "retry after",
        "\"retrydelay\":",
        "retrydelay:",
    ] {
        let mut from = 0;
        while let Some(at) = lower[from..].find(marker) {
            let rest = &lower[from + at + marker.len()..];
            if let Some(delay) = parse_delay(rest) {
                return Some(delay);
            }
            from += at + marker.len();
        }
    }
    None
}

/// A number and a unit at the start of `text` (after spaces and an opening quote).
fn parse_delay(text: &str) -> Option<Duration> {
    let text = text.trim_start_matches([' ', '"', '\'']);
    let digits = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let value: f64 = text[..digits].parse().ok()?;
    if !value.is_finite() || value < 0.0 {
        return None;
    }
    let unit = text[digits..].trim_start();
    let seconds = if unit.starts_with("ms") || unit.starts_with("millisecond") {
        value / 1000.0
    } else if unit.starts_with('s') {
        value
    } else if unit.starts_with("min") {
        value * 60.0
    } else {
        return None;
    };
    Some(Duration::from_secs_f64(seconds))
}

/// One scheduled retry: what `auto_retry_start` reports and how long to sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduledRetry {
    /// 1-based.
    pub attempt: u32,
    pub max_attempts: u32,
    pub delay: Duration,
}

/// The attempt counter of one session. It counts retries since the last reply that was not
/// an error; any such reply resets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetryState {
    attempt: u32,
}

impl RetryState {
    pub fn new() -> Self {
        Self::default()
    }

    /// Retries made so far in the current series (0 when none is under way).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// `agent_end.willRetry`: retry is on, attempts remain, and the reply is retryable.
    pub fn will_retry(&self, settings: &RetrySettings, retryable: bool) -> bool {
        settings.enabled && self.attempt < settings.max_retries && retryable
    }

    /// Counts the next attempt and says when to make it; `None` (counter unchanged) when
    /// retry is off or all attempts are spent.
    pub fn schedule(
        &mut self,
        settings: &RetrySettings,
        retry_after: Option<Duration>,
    ) -> Option<ScheduledRetry> {
        if !settings.enabled || self.attempt >= settings.max_retries {
            return None;
        }
        self.attempt += 1;
        Some(ScheduledRetry {
            attempt: self.attempt,
            max_attempts: settings.max_retries,
            delay: retry_delay(self.attempt, settings.base_delay_ms, retry_after),
        })
    }

    /// A reply that is not an error arrived. Returns the attempt to report in
    /// `auto_retry_end{success:true}` if a series was under way, and resets the counter.
    pub fn succeeded(&mut self) -> Option<u32> {
        self.finish()
    }

    /// The series ended without success (attempts exhausted, a non-retryable error after a
    /// retry, or the sleep was cancelled). Returns the attempt to report in
    /// `auto_retry_end{success:false}` if a series was under way, and resets the counter.
    pub fn failed(&mut self) -> Option<u32> {
        self.finish()
    }

    fn finish(&mut self) -> Option<u32> {
        let attempt = std::mem::take(&mut self.attempt);
        (attempt > 0).then_some(attempt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tau_protocol::Usage;

    fn reply(stop_reason: StopReason, error: Option<&str>) -> AssistantMessage {
        AssistantMessage {
            content: Vec::new(),
            api: "anthropic-messages".into(),
            provider: "anthropic".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason,
            timestamp: 0,
            response_id: None,
            response_model: None,
            diagnostics: None,
            error_message: error.map(str::to_owned),
            retry_after_ms: None,
        }
    }

    #[test]
    fn transient_errors_are_retryable() {
        for text in [
            "429 Rate limit reached for requests",
            "429 Too Many Requests",
            "500 Internal Server Error",
            "502 Bad gateway",
            "503 Service Unavailable",
            r#"529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            "The model is overloaded, try later",
            "Connection error: error sending request: connection refused",
            "Connection lost while streaming: unexpected EOF",
            "fetch failed",
            "socket hang up",
            "Request timed out: no data received for 60 seconds",
        ] {
            assert!(is_retryable(text), "{text}");
        }
    }

    #[test]
    fn overflow_quota_and_client_errors_are_not_retryable() {
        for text in [
            "400 prompt is too long: 210000 tokens > 200000 maximum",
            // Contains "500" and "429"-like numbers, but an overflow wins.
            "400 This model's maximum context length is 128000 tokens. However, your messages resulted in 500000 tokens",
            "400 status code (no body)",
            "429 You exceeded your current quota, please check your plan and billing details",
            "insufficient_quota",
            "401 invalid x-api-key",
            "404 model not found",
            "",
        ] {
            assert!(!is_retryable(text), "{text}");
        }
    }

    #[test]
    fn only_error_replies_with_a_retryable_text_qualify() {
        assert!(is_retryable_reply(
            &reply(StopReason::Error, Some("503 Service Unavailable")),
            200_000
        ));
        assert!(!is_retryable_reply(
            &reply(StopReason::Stop, Some("503 Service Unavailable")),
            200_000
        ));
        assert!(!is_retryable_reply(
            &reply(StopReason::Aborted, Some("503 Service Unavailable")),
            200_000
        ));
        assert!(!is_retryable_reply(
            &reply(StopReason::Error, None),
            200_000
        ));
        assert!(!is_retryable_reply(
            &reply(StopReason::Error, Some("400 prompt is too long: 9 tokens")),
            200_000
        ));
    }

    #[test]
    fn backoff_doubles_from_the_base() {
        let delays: Vec<u64> = (1..=4)
            .map(|n| retry_delay(n, 2000, None).as_millis() as u64)
            .collect();
        assert_eq!(delays, [2000, 4000, 8000, 16000]);
        let observed: Vec<u64> = (1..=3)
            .map(|n| retry_delay(n, 200, None).as_millis() as u64)
            .collect();
        assert_eq!(observed, [200, 400, 800]);
        assert_eq!(retry_delay(0, 200, None), Duration::from_millis(200));
        // No overflow panic for absurd attempt numbers.
        assert_eq!(
            retry_delay(200, 2000, None),
            Duration::from_millis(u64::MAX)
        );
    }

    #[test]
    fn a_server_delay_wins_over_the_backoff() {
        assert_eq!(
            retry_delay(3, 2000, Some(Duration::from_millis(1500))),
            Duration::from_millis(1500)
        );
        assert_eq!(
            retry_delay(1, 2000, Some(Duration::from_secs(30))),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn delays_are_read_from_error_texts() {
        assert_eq!(
            retry_after_from_message("429 Rate limit reached. Please try again in 20s."),
            Some(Duration::from_secs(20))
        );
        assert_eq!(
            retry_after_from_message("Rate limited; please try again in 1.5 seconds"),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after_from_message("slow down, retry in 250ms"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after_from_message(r#"429 {"error":{"details":[{"retryDelay": "34s"}]}}"#),
            Some(Duration::from_secs(34))
        );
        assert_eq!(retry_after_from_message("503 Service Unavailable"), None);
        assert_eq!(
            retry_after_from_message("please try again in a moment"),
            None
        );
    }

    #[test]
    fn state_counts_attempts_up_to_the_maximum() {
        let settings = RetrySettings {
            enabled: true,
            max_retries: 2,
            base_delay_ms: 100,
        };
        let mut state = RetryState::new();
        assert!(state.will_retry(&settings, true));
        assert!(!state.will_retry(&settings, false));
        let first = state.schedule(&settings, None).unwrap();
        assert_eq!(
            (first.attempt, first.max_attempts, first.delay),
            (1, 2, Duration::from_millis(100))
        );
        let second = state.schedule(&settings, None).unwrap();
        assert_eq!(
            (second.attempt, second.delay),
            (2, Duration::from_millis(200))
        );
        assert!(!state.will_retry(&settings, true));
        assert_eq!(state.schedule(&settings, None), None);
        assert_eq!(
            state.attempt(),
            2,
            "exhaustion keeps the count for the report"
        );
        assert_eq!(state.failed(), Some(2));
        assert_eq!(state.attempt(), 0);
        assert_eq!(state.failed(), None, "nothing to report without a series");
    }

    #[test]
    fn success_resets_and_reports_the_attempt() {
        let settings = RetrySettings::default();
        let mut state = RetryState::new();
        assert_eq!(state.succeeded(), None);
        state.schedule(&settings, None).unwrap();
        assert_eq!(state.succeeded(), Some(1));
        let again = state.schedule(&settings, None).unwrap();
        assert_eq!(again.attempt, 1, "a new series starts from 1");
        assert_eq!(again.delay, Duration::from_millis(2000));
    }

    #[test]
    fn disabled_retry_never_schedules() {
        let settings = RetrySettings {
            enabled: false,
            ..RetrySettings::default()
        };
        let mut state = RetryState::new();
        assert!(!state.will_retry(&settings, true));
        assert_eq!(state.schedule(&settings, None), None);
        assert_eq!(state.attempt(), 0);
    }

    #[test]
    fn settings_are_read_from_the_document() {
        let s = Settings::from_value(
            serde_json::json!({"retry": {"enabled": false, "maxRetries": 7, "baseDelayMs": 10}})
                .as_object()
                .cloned()
                .unwrap(),
        );
        assert_eq!(
            RetrySettings::from_settings(&s),
            RetrySettings {
                enabled: false,
                max_retries: 7,
                base_delay_ms: 10
            }
        );
    }
}
