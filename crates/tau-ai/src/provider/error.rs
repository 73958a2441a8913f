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
    /// The server answered with an error status, in a provider whose SDK words the whole text
    /// itself (pi's Azure and Bedrock providers); `message` is that text.
    #[error("{message}")]
    Service {
        status: u16,
        message: String,
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

/// The response headers an error text is made from.
#[derive(Debug, Clone, Default)]
pub(crate) struct ErrorHeaders {
    /// Bedrock's `x-amzn-errortype`, e.g. `ThrottlingException:http://internal.amazon.com/…`.
    pub amzn_error_type: Option<String>,
}

/// pi's prefixes for Bedrock's exception names: its retry and overflow rules match on them.
pub(crate) fn bedrock_prefix(kind: &str) -> &str {
    match kind {
        "InternalServerException" => "Internal server error",
        "ModelStreamErrorException" => "Model stream error",
        "ValidationException" => "Validation error",
        "ThrottlingException" => "Throttling error",
        "ServiceUnavailableException" => "Service unavailable",
        other => other,
    }
}

/// Where AWS explains the data-retention modes some models refuse (pi adds the link).
const BEDROCK_DATA_RETENTION_DOCS: &str =
    "https://docs.aws.amazon.com/bedrock/latest/userguide/data-retention.html";

/// `<prefix>: <message>`, with pi's pointer to the data-retention page when the message is
/// about it.
pub(crate) fn bedrock_text(kind: &str, message: &str) -> String {
    let hint = if message.to_ascii_lowercase().contains("data retention mode") {
        format!(" See {BEDROCK_DATA_RETENTION_DOCS} for supported data retention modes.")
    } else {
        String::new()
    };
    format!("{}: {message}{hint}", bedrock_prefix(kind))
}

impl ProviderError {
    /// The wait a server asked for before a retry, if it named one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Http { retry_after, .. }
            | ProviderError::Service { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The error for an error status, worded as the provider's SDK words it.
    pub(crate) fn from_response(
        style: super::ErrorStyle,
        status: u16,
        headers: ErrorHeaders,
        body: &[u8],
        retry_after: Option<Duration>,
    ) -> Self {
        use super::ErrorStyle;
        match style {
            ErrorStyle::Message => Self::from_http(status, body, false, retry_after),
            ErrorStyle::WholeBody => Self::from_http(status, body, true, retry_after),
            ErrorStyle::Azure => ProviderError::Service {
                status,
                message: format!(
                    "Azure OpenAI API error ({status}): {}",
                    Self::from_http(status, body, false, None)
                ),
                retry_after,
            },
            ErrorStyle::Bedrock => {
                let json = serde_json::from_slice::<serde_json::Value>(body).ok();
                let field = |key: &str| {
                    json.as_ref()
                        .and_then(|v| v.get(key))
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_string)
                };
                // The kind is the header's part before `:`, else the body's `__type` after
                // its last `#`, as the AWS SDKs read it.
                let kind = headers
                    .amzn_error_type
                    .as_deref()
                    .map(|t| t.split(':').next().unwrap_or(t).to_string())
                    .or_else(|| {
                        field("__type").map(|t| t.rsplit('#').next().unwrap_or(&t).to_string())
                    })
                    .filter(|k| !k.is_empty());
                let message = field("message")
                    .or_else(|| field("Message"))
                    .unwrap_or_else(|| {
                        let text = String::from_utf8_lossy(body).trim().to_string();
                        if text.is_empty() {
                            format!("{status} status code (no body)")
                        } else {
                            text
                        }
                    });
                let message = match kind {
                    Some(kind) => bedrock_text(&kind, &message),
                    None => message,
                };
                ProviderError::Service {
                    status,
                    message,
                    retry_after,
                }
            }
        }
    }

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
