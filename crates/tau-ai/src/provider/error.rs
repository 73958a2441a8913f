//! Provider errors. Their text is what pi shows (`"<status> <message>"` for HTTP errors),
//! because retry and context-overflow detection match on it.

use std::time::Duration;

/// Why a provider request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The server answered with an error status.
    #[error("{status} {message}")]
    Http {
        status: u16,
        message: String,
        /// From a `retry-after` (or `retry-after-ms`) header, if the server sent one.
        retry_after: Option<Duration>,
    },
    /// The connection failed or broke.
    #[error("{0}")]
    Network(String),
    /// No data arrived for longer than the idle timeout.
    #[error("Request timed out: no data received for {} seconds", seconds(.0))]
    Idle(Duration),
    /// The stream was well-formed HTTP but not a valid reply (or the API reported an error).
    #[error("{0}")]
    Stream(String),
    /// The request could not be made (no key, unsupported API, …).
    #[error("{0}")]
    Config(String),
    /// The caller cancelled.
    #[error("Request was aborted")]
    Aborted,
}

/// Whole seconds as an integer, anything finer as a decimal (`0.5`).
fn seconds(duration: &Duration) -> String {
    if duration.subsec_millis() == 0 {
        duration.as_secs().to_string()
    } else {
        format!("{}", duration.as_secs_f64())
    }
}

impl ProviderError {
    /// Builds an HTTP error from a status and a response body, using the message an API's
    /// official SDK would show: the `error.message` of OpenAI- and Google-shaped bodies, the
    /// whole JSON body for Anthropic (whose SDK prints it), `status code (no body)` when empty.
    pub fn from_http(
        status: u16,
        body: &[u8],
        whole_body: bool,
        retry_after: Option<Duration>,
    ) -> Self {
        let text = String::from_utf8_lossy(body).trim().to_string();
        let message = if text.is_empty() {
            "status code (no body)".to_string()
        } else if whole_body {
            text
        } else {
            serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| {
                    let error = v.get("error").unwrap_or(&v);
                    error
                        .get("message")
                        .and_then(|m| m.as_str())
                        .map(str::to_string)
                })
                .unwrap_or(text)
        };
        ProviderError::Http {
            status,
            message,
            retry_after,
        }
    }

    /// An error object sent inside the stream in place of a chunk (Google and
    /// OpenAI-compatible servers do this), reported by its `message`.
    pub(crate) fn in_stream(error: &serde_json::Value) -> Self {
        let message = error
            .get("message")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("unknown error");
        ProviderError::Stream(message.to_string())
    }
}

/// Reads `retry-after-ms`, then `retry-after` (seconds or an HTTP date is not supported: the
/// providers tau talks to send seconds).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
    get("retry-after")
        .and_then(|v| v.parse::<f64>().ok())
        .map(|s| Duration::from_secs_f64(s.max(0.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_error_texts_follow_the_sdks() {
        let openai = br#"{"error":{"message":"Rate limit reached","type":"requests"}}"#;
        assert_eq!(
            ProviderError::from_http(429, openai, false, None).to_string(),
            "429 Rate limit reached"
        );
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            ProviderError::from_http(529, anthropic, true, None).to_string(),
            r#"529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
        );
        assert_eq!(
            ProviderError::from_http(400, b"", false, None).to_string(),
            "400 status code (no body)"
        );
        assert_eq!(
            ProviderError::from_http(502, b"Bad gateway", false, None).to_string(),
            "502 Bad gateway"
        );
    }
}
