//! The wire APIs the mock speaks and which request path belongs to which: the four keyed
//! APIs, and the three cloud ones (Azure's Responses, Vertex AI's Gemini, Bedrock's Converse
//! stream) whose paths and credentials are their own.

use serde::{Deserialize, Serialize};

/// A wire API, named as pi names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Api {
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
    #[serde(rename = "openai-completions")]
    OpenAiCompletions,
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    #[serde(rename = "google-generative-ai")]
    GoogleGenerativeAi,
    #[serde(rename = "azure-openai-responses")]
    AzureOpenAiResponses,
    #[serde(rename = "google-vertex")]
    GoogleVertex,
    #[serde(rename = "bedrock-converse-stream")]
    BedrockConverseStream,
}

impl Api {
    pub const ALL: [Api; 7] = [
        Api::AnthropicMessages,
        Api::OpenAiCompletions,
        Api::OpenAiResponses,
        Api::GoogleGenerativeAi,
        Api::AzureOpenAiResponses,
        Api::GoogleVertex,
        Api::BedrockConverseStream,
    ];

    /// The APIs that stream server-sent events (every one but Bedrock's binary event stream).
    pub const SSE: [Api; 6] = [
        Api::AnthropicMessages,
        Api::OpenAiCompletions,
        Api::OpenAiResponses,
        Api::GoogleGenerativeAi,
        Api::AzureOpenAiResponses,
        Api::GoogleVertex,
    ];

    /// The API whose stream this one's is: Azure streams OpenAI Responses events and Vertex
    /// Gemini's, byte for byte.
    pub fn stream_format(self) -> Api {
        match self {
            Api::AzureOpenAiResponses => Api::OpenAiResponses,
            Api::GoogleVertex => Api::GoogleGenerativeAi,
            other => other,
        }
    }

    /// Whether the request itself asks for streaming with `"stream": true` (the others stream
    /// because of their path).
    pub(crate) fn streams_by_body(self) -> bool {
        !matches!(
            self,
            Api::GoogleGenerativeAi | Api::GoogleVertex | Api::BedrockConverseStream
        )
    }

    /// pi's name for the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::AnthropicMessages => "anthropic-messages",
            Api::OpenAiCompletions => "openai-completions",
            Api::OpenAiResponses => "openai-responses",
            Api::GoogleGenerativeAi => "google-generative-ai",
            Api::AzureOpenAiResponses => "azure-openai-responses",
            Api::GoogleVertex => "google-vertex",
            Api::BedrockConverseStream => "bedrock-converse-stream",
        }
    }

    /// The request path a client would use against [`crate::MockServer::url`], with `model`
    /// filled in where the path carries it.
    pub fn path(self, model: &str) -> String {
        match self {
            Api::AnthropicMessages => "/v1/messages".to_owned(),
            Api::OpenAiCompletions => "/v1/chat/completions".to_owned(),
            Api::OpenAiResponses => "/v1/responses".to_owned(),
            Api::GoogleGenerativeAi => {
                format!("/v1beta/models/{model}:streamGenerateContent")
            }
            Api::AzureOpenAiResponses => "/openai/v1/responses".to_owned(),
            Api::GoogleVertex => format!(
                "/v1/projects/mock-project/locations/us-central1/publishers/google/models/{model}:streamGenerateContent"
            ),
            Api::BedrockConverseStream => {
                format!("/model/{}/converse-stream", encode_label(model))
            }
        }
    }
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    pub api: Api,
    /// Google puts the model in the path; the other APIs name it in the body.
    pub path_model: Option<String>,
    /// Google's non-streaming `:generateContent`, which the mock does not serve.
    pub unary: bool,
}

/// A path label as the AWS SDKs write it: everything but unreserved characters escaped.
fn encode_label(label: &str) -> String {
    let mut out = String::with_capacity(label.len());
    for byte in label.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `%XX` escapes decoded (a malformed escape is kept as it is).
pub(crate) fn decode_label(label: &str) -> String {
    let bytes = label.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Maps a request path to its API, accepting the optional version prefixes real base URLs
/// carry (`/v1` for Anthropic and OpenAI, `/v1beta` or `/v1` for Google).
pub(crate) fn route(path: &str) -> Option<Route> {
    if let Some(route) = cloud_route(path) {
        return Some(route);
    }
    let bare = path.strip_prefix("/v1").unwrap_or(path);
    let simple = |api| {
        Some(Route {
            api,
            path_model: None,
            unary: false,
        })
    };
    match bare {
        "/messages" => return simple(Api::AnthropicMessages),
        "/chat/completions" => return simple(Api::OpenAiCompletions),
        "/responses" => return simple(Api::OpenAiResponses),
        _ => {}
    }
    let google = path
        .strip_prefix("/v1beta")
        .or_else(|| path.strip_prefix("/v1"))
        .unwrap_or(path);
    let rest = google.strip_prefix("/models/")?;
    let (model, method) = rest.rsplit_once(':')?;
    if model.is_empty() {
        return None;
    }
    let unary = match method {
        "streamGenerateContent" => false,
        "generateContent" => true,
        _ => return None,
    };
    Some(Route {
        api: Api::GoogleGenerativeAi,
        path_model: Some(model.to_owned()),
        unary,
    })
}

/// The cloud APIs' paths: Azure's `/openai[/v1]/responses`, Vertex's
/// `/v1/projects/P/locations/L/publishers/google/models/M:…` (or the key-only
/// `/v1/publishers/google/models/M:…`), Bedrock's `/model/M/converse-stream`.
fn cloud_route(path: &str) -> Option<Route> {
    let route = |api, path_model: Option<String>, unary| {
        Some(Route {
            api,
            path_model,
            unary,
        })
    };
    if let Some(rest) = path.strip_prefix("/openai") {
        return match rest {
            "/v1/responses" | "/responses" => route(Api::AzureOpenAiResponses, None, false),
            _ => None,
        };
    }
    if let Some(rest) = path.strip_prefix("/model/") {
        let (model, method) = rest.split_once('/')?;
        let unary = match method {
            "converse-stream" => false,
            "converse" => true,
            _ => return None,
        };
        if model.is_empty() {
            return None;
        }
        return route(Api::BedrockConverseStream, Some(decode_label(model)), unary);
    }
    let rest = path.strip_prefix("/v1/")?;
    let rest = match rest.strip_prefix("projects/") {
        Some(scoped) => {
            let (_project, after) = scoped.split_once("/locations/")?;
            let (_location, after) = after.split_once('/')?;
            after
        }
        None => rest,
    };
    let (model, method) = rest
        .strip_prefix("publishers/google/models/")?
        .rsplit_once(':')?;
    if model.is_empty() || model.contains('/') {
        return None;
    }
    let unary = match method {
        "streamGenerateContent" => false,
        "generateContent" => true,
        _ => return None,
    };
    route(Api::GoogleVertex, Some(model.to_owned()), unary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_with_and_without_version_prefix() {
        for (path, api) in [
            ("/v1/messages", Api::AnthropicMessages),
            ("/messages", Api::AnthropicMessages),
            ("/v1/chat/completions", Api::OpenAiCompletions),
            ("/chat/completions", Api::OpenAiCompletions),
            ("/v1/responses", Api::OpenAiResponses),
            ("/responses", Api::OpenAiResponses),
        ] {
            assert_eq!(route(path).map(|r| r.api), Some(api), "{path}");
        }
        for path in [
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            "/models/gemini-2.5-flash:streamGenerateContent",
            "/v1/models/gemini-2.5-flash:streamGenerateContent",
        ] {
            let r = route(path).unwrap();
            assert_eq!(r.api, Api::GoogleGenerativeAi);
            assert_eq!(r.path_model.as_deref(), Some("gemini-2.5-flash"));
            assert!(!r.unary);
        }
        assert!(route("/v1beta/models/g:generateContent").unwrap().unary);
        for path in [
            "/",
            "/v2/messages",
            "/v1/messages/x",
            "/v1beta/models/:streamGenerateContent",
            "/v1beta/models/g:embed",
        ] {
            assert_eq!(route(path), None, "{path}");
        }
        for api in Api::ALL {
            assert_eq!(route(&api.path("m")).map(|r| r.api), Some(api));
        }
    }

    #[test]
    fn cloud_paths_route_to_their_apis() {
        for path in ["/openai/v1/responses", "/openai/responses"] {
            assert_eq!(
                route(path).map(|r| r.api),
                Some(Api::AzureOpenAiResponses),
                "{path}"
            );
        }
        let vertex = route(
            "/v1/projects/p-1/locations/europe-west4/publishers/google/models/gemini-2.5-pro:streamGenerateContent",
        )
        .unwrap();
        assert_eq!(vertex.api, Api::GoogleVertex);
        assert_eq!(vertex.path_model.as_deref(), Some("gemini-2.5-pro"));
        let express =
            route("/v1/publishers/google/models/gemini-2.5-pro:streamGenerateContent").unwrap();
        assert_eq!(express.api, Api::GoogleVertex);
        assert!(
            route("/v1/publishers/google/models/g:generateContent")
                .unwrap()
                .unary
        );
        let bedrock = route("/model/anthropic.claude-v2%3A1/converse-stream").unwrap();
        assert_eq!(bedrock.api, Api::BedrockConverseStream);
        assert_eq!(bedrock.path_model.as_deref(), Some("anthropic.claude-v2:1"));
        assert!(route("/model/m/converse").unwrap().unary);
        assert_eq!(
            Api::BedrockConverseStream.path("arn:aws:bedrock:us-east-1:1:inference-profile/x"),
            "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx/converse-stream"
        );
        for path in [
            "/openai/v1/chat",
            "/model//converse-stream",
            "/model/m/invoke",
            "/v1/projects/p/publishers/google/models/g:streamGenerateContent",
        ] {
            assert_eq!(route(path), None, "{path}");
        }
    }
}
