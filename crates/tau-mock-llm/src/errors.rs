//! HTTP error responses in each API's own shape: the scripted faults that fail a request
//! before streaming, and the mock's own refusals (bad JSON, script exhausted).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::api::Api;
use crate::reply::Fault;

/// An error to answer with, before it is shaped for an API.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub status: u16,
    /// Anthropic `error.type` / OpenAI `error.type`; Google derives its status from the code.
    pub kind: Kind,
    pub message: String,
    /// OpenAI's `error.code`.
    pub code: Option<&'static str>,
    pub retry_after: Option<u64>,
}

/// The error classes the APIs distinguish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    InvalidRequest,
    Authentication,
    Permission,
    NotFound,
    RateLimit,
    Server,
    Overloaded,
}

impl Kind {
    fn for_status(status: u16) -> Kind {
        match status {
            401 => Kind::Authentication,
            403 => Kind::Permission,
            404 => Kind::NotFound,
            429 => Kind::RateLimit,
            529 => Kind::Overloaded,
            s if s >= 500 => Kind::Server,
            _ => Kind::InvalidRequest,
        }
    }

    fn anthropic(self) -> &'static str {
        match self {
            Kind::InvalidRequest => "invalid_request_error",
            Kind::Authentication => "authentication_error",
            Kind::Permission => "permission_error",
            Kind::NotFound => "not_found_error",
            Kind::RateLimit => "rate_limit_error",
            Kind::Server => "api_error",
            Kind::Overloaded => "overloaded_error",
        }
    }

    /// Bedrock's exception name for the class (its `x-amzn-errortype`).
    fn bedrock(self, status: u16) -> &'static str {
        match (self, status) {
            (Kind::Authentication | Kind::Permission, _) => "AccessDeniedException",
            (Kind::NotFound, _) => "ResourceNotFoundException",
            (Kind::RateLimit, _) => "ThrottlingException",
            (_, 503 | 529) | (Kind::Overloaded, _) => "ServiceUnavailableException",
            (Kind::Server, _) => "InternalServerException",
            (Kind::InvalidRequest, _) => "ValidationException",
        }
    }

    fn openai(self) -> &'static str {
        match self {
            Kind::InvalidRequest | Kind::Authentication | Kind::Permission | Kind::NotFound => {
                "invalid_request_error"
            }
            Kind::RateLimit => "requests",
            Kind::Server | Kind::Overloaded => "server_error",
        }
    }
}

/// Google's canonical status name for an HTTP code.
fn google_status(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        500 => "INTERNAL",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

impl ApiError {
    pub(crate) fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            kind: Kind::for_status(status),
            message: message.into(),
            code: None,
            retry_after: None,
        }
    }

    fn code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    /// The error a fault stands for on `api`, or `None` for the faults that stream
    /// (`DropAfter`, `StallAfter`) and a raw `Http` body.
    pub(crate) fn for_fault(api: Api, fault: &Fault) -> Option<ApiError> {
        // Azure words its errors as OpenAI does and Vertex as Gemini does.
        let api = api.stream_format();
        let google = api == Api::GoogleGenerativeAi;
        Some(match fault {
            Fault::Http {
                status,
                retry_after,
                body: None,
            } => {
                let reason = StatusCode::from_u16(*status)
                    .ok()
                    .and_then(|s| s.canonical_reason())
                    .unwrap_or("Error");
                let mut e = ApiError::new(*status, reason);
                e.retry_after = *retry_after;
                e
            }
            Fault::Overloaded => match api {
                Api::AnthropicMessages => ApiError::new(529, "Overloaded"),
                Api::GoogleGenerativeAi | Api::GoogleVertex => {
                    ApiError::new(503, "The model is overloaded. Please try again later.")
                }
                Api::BedrockConverseStream => {
                    ApiError::new(503, "Bedrock is unable to process your request.")
                }
                Api::OpenAiCompletions | Api::OpenAiResponses | Api::AzureOpenAiResponses => {
                    let mut e =
                        ApiError::new(503, "The server is overloaded. Please try again later.");
                    e.kind = Kind::Overloaded;
                    e
                }
            },
            Fault::RateLimited { retry_after } => {
                let wait =
                    retry_after.map_or_else(String::new, |s| format!(" Please try again in {s}s."));
                let message = match api {
                    Api::AnthropicMessages => {
                        format!("This request would exceed your rate limit.{wait}")
                    }
                    Api::OpenAiCompletions | Api::OpenAiResponses | Api::AzureOpenAiResponses => {
                        format!("Rate limit reached for requests.{wait}")
                    }
                    Api::GoogleGenerativeAi | Api::GoogleVertex => {
                        format!("Resource has been exhausted (e.g. check quota).{wait}")
                    }
                    Api::BedrockConverseStream => {
                        "Too many requests, please wait before trying again.".to_owned()
                    }
                };
                let mut e = ApiError::new(429, message).code("rate_limit_exceeded");
                e.retry_after = *retry_after;
                e
            }
            Fault::ServerError => match api {
                Api::AnthropicMessages => ApiError::new(500, "Internal server error"),
                Api::GoogleGenerativeAi | Api::GoogleVertex => {
                    ApiError::new(500, "An internal error has occurred. Please retry.")
                }
                Api::BedrockConverseStream => ApiError::new(
                    500,
                    "The server encountered an internal error while processing the request.",
                ),
                _ => ApiError::new(
                    500,
                    "The server had an error while processing your request.",
                ),
            },
            Fault::ServiceUnavailable => {
                let message = if google {
                    "The service is currently unavailable."
                } else if api == Api::BedrockConverseStream {
                    "Bedrock is unable to process your request."
                } else {
                    "Service Unavailable"
                };
                ApiError::new(503, message)
            }
            Fault::ContextOverflow => match api {
                Api::AnthropicMessages => {
                    ApiError::new(400, "prompt is too long: 210000 tokens > 200000 maximum")
                }
                Api::OpenAiCompletions => ApiError::new(
                    400,
                    "This model's maximum context length is 128000 tokens. However, your \
                     messages resulted in 130000 tokens. Please reduce the length of the \
                     messages.",
                )
                .code("context_length_exceeded"),
                Api::OpenAiResponses | Api::AzureOpenAiResponses => ApiError::new(
                    400,
                    "Your input exceeds the context window of this model. Please adjust your \
                     input and try again.",
                )
                .code("context_length_exceeded"),
                Api::GoogleGenerativeAi | Api::GoogleVertex => ApiError::new(
                    400,
                    "The input token count (1200000) exceeds the maximum number of tokens \
                     allowed (1048576).",
                ),
                Api::BedrockConverseStream => {
                    ApiError::new(400, "Input is too long for requested model.")
                }
            },
            Fault::Http { body: Some(_), .. }
            | Fault::DropAfter { .. }
            | Fault::StallAfter { .. }
            | Fault::ErrorEventAfter { .. } => return None,
        })
    }

    /// The JSON body `api` sends for this error.
    pub(crate) fn body(&self, api: Api) -> Value {
        match api.stream_format() {
            Api::AnthropicMessages => json!({
                "type": "error",
                "error": {"type": self.kind.anthropic(), "message": self.message},
            }),
            Api::BedrockConverseStream => json!({"message": self.message}),
            Api::OpenAiCompletions | Api::OpenAiResponses | Api::AzureOpenAiResponses => {
                let param = match self.code {
                    Some("context_length_exceeded") if api == Api::OpenAiCompletions => {
                        json!("messages")
                    }
                    Some("context_length_exceeded") => json!("input"),
                    _ => Value::Null,
                };
                json!({
                    "error": {
                        "message": self.message,
                        "type": self.kind.openai(),
                        "param": param,
                        "code": self.code,
                    },
                })
            }
            Api::GoogleGenerativeAi | Api::GoogleVertex => {
                let mut error = json!({
                    "code": self.status,
                    "message": self.message,
                    "status": google_status(self.status),
                });
                // Google states the wait inside the error, not in a header.
                if let (Some(secs), 429) = (self.retry_after, self.status) {
                    error["details"] = json!([{
                        "@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": format!("{secs}s"),
                    }]);
                }
                json!({"error": error})
            }
        }
    }

    pub(crate) fn into_response(self, api: Api) -> Response {
        let body = self.body(api).to_string();
        let mut response = raw_response(self.status, body, "application/json", self.retry_after);
        if api == Api::BedrockConverseStream {
            // The AWS SDKs read the exception's name from this header.
            let kind = format!(
                "{}:http://internal.amazon.com/coral/com.amazon.bedrock/",
                self.kind.bedrock(self.status)
            );
            if let Ok(value) = HeaderValue::from_str(&kind) {
                response.headers_mut().insert("x-amzn-errortype", value);
            }
        }
        response
    }

    /// A refusal with an explicit Bedrock exception name (signature and key errors).
    pub(crate) fn bedrock_response(status: u16, kind: &str, message: &str) -> Response {
        let body = json!({"message": message}).to_string();
        let mut response = raw_response(status, body, "application/json", None);
        if let Ok(value) = HeaderValue::from_str(kind) {
            response.headers_mut().insert("x-amzn-errortype", value);
        }
        response
    }
}

/// A response with exactly this status and body.
pub(crate) fn raw_response(
    status: u16,
    body: String,
    content_type: &'static str,
    retry_after: Option<u64>,
) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Some(secs) = retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

/// The response for a scripted fault that fails the request outright, or `None` when the
/// fault acts on the stream instead.
pub(crate) fn fault_response(api: Api, fault: &Fault) -> Option<Response> {
    if let Fault::Http {
        status,
        body: Some(body),
        retry_after,
    } = fault
    {
        let content_type = if serde_json::from_str::<Value>(body).is_ok() {
            "application/json"
        } else {
            "text/plain; charset=utf-8"
        };
        return Some(raw_response(
            *status,
            body.clone(),
            content_type,
            *retry_after,
        ));
    }
    ApiError::for_fault(api, fault).map(|e| e.into_response(api))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_shapes_overflow_with_its_own_wording() {
        let body = |api| {
            ApiError::for_fault(api, &Fault::ContextOverflow)
                .unwrap()
                .body(api)
        };
        assert_eq!(
            body(Api::AnthropicMessages),
            json!({"type": "error", "error": {"type": "invalid_request_error",
                "message": "prompt is too long: 210000 tokens > 200000 maximum"}})
        );
        assert_eq!(
            body(Api::OpenAiCompletions)["error"]["code"],
            "context_length_exceeded"
        );
        assert!(
            body(Api::OpenAiCompletions)["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("This model's maximum context length is 128000 tokens.")
        );
        assert_eq!(
            body(Api::OpenAiResponses)["error"]["code"],
            "context_length_exceeded"
        );
        assert_eq!(
            body(Api::GoogleGenerativeAi)["error"]["status"],
            "INVALID_ARGUMENT"
        );
        assert_eq!(body(Api::GoogleGenerativeAi)["error"]["code"], 400);
    }

    #[test]
    fn streaming_faults_are_not_http_errors() {
        for api in Api::ALL {
            assert!(ApiError::for_fault(api, &Fault::DropAfter { events: 1 }).is_none());
            assert!(ApiError::for_fault(api, &Fault::StallAfter { events: 1 }).is_none());
        }
        assert_eq!(google_status(429), "RESOURCE_EXHAUSTED");
        assert_eq!(ApiError::new(529, "x").kind.anthropic(), "overloaded_error");
    }
}
