//! `azure-openai-responses`: OpenAI's Responses API as Azure OpenAI serves it. What is Azure's
//! own is here: the endpoint (a base URL, or a resource name, normalised to `/openai/v1`),
//! the `api-version` query, the deployment a model id maps to, the `api-key` header and pi's
//! error wording; the body and the stream are the Responses API's ([`super::openai_responses`]).

use reqwest::Url;
use tau_protocol::Model;

use super::openai_responses::{self, Decoder};
use super::{Adapter, Context, ErrorStyle, HttpRequest, ProviderEnv, ProviderError, StreamOptions};

/// pi's default `api-version`: the v1 API, which needs no dated version.
const DEFAULT_API_VERSION: &str = "v1";

pub(crate) fn build(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<(HttpRequest, Box<dyn Adapter>), ProviderError> {
    let key = options.require_key(|| format!("No API key for provider: {}", model.provider))?;
    let env = &options.env;
    let deployment = deployment_name(model, env);
    let (base_url, api_version) = endpoint(model, env)?;
    let body = openai_responses::request_body_for(model, context, options, Some(&deployment));
    let mut headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("accept".to_string(), "text/event-stream".to_string()),
        ("api-key".to_string(), key),
    ];
    super::add_request_headers(&mut headers, model, options);
    let mut url = Url::parse(&format!("{base_url}/responses"))
        .map_err(|_| ProviderError::Config(format!("Invalid Azure OpenAI base URL: {base_url}")))?;
    url.query_pairs_mut()
        .append_pair("api-version", &api_version);
    let request = HttpRequest::post_json_to(url.into(), headers, &body, ErrorStyle::Azure)?;
    Ok((request, Box::new(Decoder::default())))
}

/// The deployment serving `model`: from `AZURE_OPENAI_DEPLOYMENT_NAME_MAP`
/// (`model=deployment,…`), else the model id.
fn deployment_name(model: &Model, env: &ProviderEnv) -> String {
    env.get("AZURE_OPENAI_DEPLOYMENT_NAME_MAP")
        .and_then(|map| {
            map.split(',').find_map(|entry| {
                let (id, deployment) = entry.trim().split_once('=')?;
                let (id, deployment) = (id.trim(), deployment.trim());
                (id == model.id && !deployment.is_empty()).then(|| deployment.to_string())
            })
        })
        .unwrap_or_else(|| model.id.clone())
}

/// The base URL and API version, in pi's order: `AZURE_OPENAI_BASE_URL`, then
/// `AZURE_OPENAI_RESOURCE_NAME`, then the model's base URL.
fn endpoint(model: &Model, env: &ProviderEnv) -> Result<(String, String), ProviderError> {
    let version = env
        .get("AZURE_OPENAI_API_VERSION")
        .unwrap_or_else(|| DEFAULT_API_VERSION.to_string());
    let base = env
        .get("AZURE_OPENAI_BASE_URL")
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())
        .or_else(|| {
            env.get("AZURE_OPENAI_RESOURCE_NAME")
                .map(|name| format!("https://{name}.openai.azure.com/openai/v1"))
        })
        .or_else(|| Some(model.base_url.trim().to_string()).filter(|u| !u.is_empty()))
        .ok_or_else(|| {
            ProviderError::Config(
                "Azure OpenAI base URL is required. Set AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME, or give the model a baseUrl in models.json."
                    .to_string(),
            )
        })?;
    Ok((normalize_base_url(&base)?, version))
}

/// An Azure host given without a path (or with `/openai` only) gets the v1 API's path, as pi
/// does, so that `https://res.openai.azure.com` works; other URLs are kept as given.
fn normalize_base_url(base: &str) -> Result<String, ProviderError> {
    let trimmed = base.trim().trim_end_matches('/');
    let mut url = Url::parse(trimmed)
        .map_err(|_| ProviderError::Config(format!("Invalid Azure OpenAI base URL: {base}")))?;
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    let azure_host =
        host.ends_with(".openai.azure.com") || host.ends_with(".cognitiveservices.azure.com");
    let path = url.path().trim_end_matches('/').to_string();
    if azure_host && (path.is_empty() || path == "/openai") {
        url.set_path("/openai/v1");
        url.set_query(None);
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{model, user_text};
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> ProviderEnv {
        ProviderEnv::new(move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_string())
        })
    }

    #[test]
    fn endpoints_follow_pi_order_and_normalisation() {
        let m = Model {
            base_url: "https://from-model.openai.azure.com".into(),
            ..model("azure-openai-responses")
        };
        let (url, version) = endpoint(&m, &env(&[])).unwrap();
        assert_eq!(url, "https://from-model.openai.azure.com/openai/v1");
        assert_eq!(version, "v1");
        let (url, _) = endpoint(&m, &env(&[("AZURE_OPENAI_RESOURCE_NAME", "res")])).unwrap();
        assert_eq!(url, "https://res.openai.azure.com/openai/v1");
        let (url, version) = endpoint(
            &m,
            &env(&[
                (
                    "AZURE_OPENAI_BASE_URL",
                    "https://x.cognitiveservices.azure.com/openai/",
                ),
                ("AZURE_OPENAI_RESOURCE_NAME", "res"),
                ("AZURE_OPENAI_API_VERSION", "2025-04-01-preview"),
            ]),
        )
        .unwrap();
        assert_eq!(url, "https://x.cognitiveservices.azure.com/openai/v1");
        assert_eq!(version, "2025-04-01-preview");
        // A proxy's path is its own.
        let (url, _) = endpoint(
            &m,
            &env(&[(
                "AZURE_OPENAI_BASE_URL",
                "http://127.0.0.1:9/azure/openai/v1/",
            )]),
        )
        .unwrap();
        assert_eq!(url, "http://127.0.0.1:9/azure/openai/v1");
        let none = endpoint(&model("azure-openai-responses"), &env(&[])).unwrap_err();
        assert!(
            none.to_string()
                .starts_with("Azure OpenAI base URL is required.")
        );
        let bad = endpoint(&m, &env(&[("AZURE_OPENAI_BASE_URL", "not a url")])).unwrap_err();
        assert_eq!(bad.to_string(), "Invalid Azure OpenAI base URL: not a url");
    }

    #[test]
    fn deployments_map_model_ids() {
        let m = Model {
            id: "gpt-5.4".into(),
            ..model("azure-openai-responses")
        };
        assert_eq!(deployment_name(&m, &env(&[])), "gpt-5.4");
        let mapped = env(&[(
            "AZURE_OPENAI_DEPLOYMENT_NAME_MAP",
            " gpt-4.1=prod-41 , gpt-5.4 = prod-54,broken,=x",
        )]);
        assert_eq!(deployment_name(&m, &mapped), "prod-54");
    }

    #[test]
    fn the_request_names_the_deployment_and_sends_the_key_as_api_key() {
        let m = Model {
            id: "gpt-5.4".into(),
            base_url: "https://res.openai.azure.com".into(),
            ..model("azure-openai-responses")
        };
        let context = Context {
            messages: vec![user_text("hi")],
            ..Context::default()
        };
        let options = StreamOptions {
            api_key: Some("azure-key".into()),
            session_id: Some("s".repeat(80)),
            env: env(&[("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", "gpt-5.4=prod")]),
            ..StreamOptions::default()
        };
        let (request, _) = build(&m, &context, &options).unwrap();
        assert_eq!(
            request.url,
            "https://res.openai.azure.com/openai/v1/responses?api-version=v1"
        );
        assert!(
            request
                .headers
                .contains(&("api-key".to_string(), "azure-key".to_string()))
        );
        assert!(!request.headers.iter().any(|(n, _)| n == "authorization"));
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["model"], "prod");
        assert_eq!(body["prompt_cache_key"].as_str().unwrap().len(), 64);
        let missing = build(
            &m,
            &context,
            &StreamOptions {
                api_key: None,
                ..options
            },
        )
        .err()
        .unwrap();
        assert_eq!(missing.to_string(), "No API key for provider: p");
    }
}
