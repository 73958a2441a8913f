//! The four wire APIs the mock speaks and which request path belongs to which.

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
}

impl Api {
    pub const ALL: [Api; 4] = [
        Api::AnthropicMessages,
        Api::OpenAiCompletions,
        Api::OpenAiResponses,
        Api::GoogleGenerativeAi,
    ];

    /// pi's name for the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::AnthropicMessages => "anthropic-messages",
            Api::OpenAiCompletions => "openai-completions",
            Api::OpenAiResponses => "openai-responses",
            Api::GoogleGenerativeAi => "google-generative-ai",
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

/// Maps a request path to its API, accepting the optional version prefixes real base URLs
/// carry (`/v1` for Anthropic and OpenAI, `/v1beta` or `/v1` for Google).
pub(crate) fn route(path: &str) -> Option<Route> {
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
}
