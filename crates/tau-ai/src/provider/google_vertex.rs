//! `google-vertex`: Gemini on Vertex AI. The body and the stream are Gemini's
//! ([`super::google`]); what is Vertex's own is here: the endpoint (by location, or a custom
//! base URL, or `GOOGLE_VERTEX_BASE_URL` as Google's SDK reads it), the project-scoped path,
//! and the credentials, either an API key (Vertex's express mode) or Application Default
//! Credentials turned into an access token per request ([`super::vertex_auth`]).

use std::sync::Arc;

use tau_protocol::Model;

use super::google::{self, Decoder};
use super::vertex_auth::Adc;
use super::{Adapter, Context, ErrorStyle, HttpRequest, ProviderEnv, ProviderError, StreamOptions};

/// The API version pi asks Google's SDK for.
const API_VERSION: &str = "v1";
/// What pi's callers pass as the key when the credentials are Google's ambient ones.
const CREDENTIALS_MARKER: &str = "gcp-vertex-credentials";
/// Locations served from a multi-region endpoint.
const MULTI_REGIONAL: [&str; 2] = ["us", "eu"];

/// The key to use in express mode: a real key, not a placeholder such as `<authenticated>`
/// (what tau's registry gives when the credentials are ambient).
fn api_key(options: &StreamOptions) -> Option<String> {
    let key = options.api_key.as_deref()?.trim();
    let placeholder = key.len() > 2 && key.starts_with('<') && key.ends_with('>');
    (!key.is_empty() && key != CREDENTIALS_MARKER && !placeholder).then(|| key.to_string())
}

/// The model's own base URL when it is a real one (the catalog's `{location}` template means
/// "the default endpoint").
fn custom_base(model: &Model) -> Option<&str> {
    let base = model.base_url.trim();
    (!base.is_empty() && !base.contains("{location}")).then_some(base.trim_end_matches('/'))
}

/// Whether a URL already names an API version (`/v1`, `/v1beta1`), so none is added.
fn names_version(url: &str) -> bool {
    url.split('/').any(|part| {
        part.strip_prefix('v').is_some_and(|rest| {
            let digits = rest.chars().take_while(char::is_ascii_digit).count();
            digits > 0 && {
                let tail = &rest[digits..];
                tail.is_empty()
                    || tail
                        .strip_prefix("beta")
                        .is_some_and(|t| t.chars().all(|c| c.is_ascii_digit()))
            }
        })
    })
}

/// The default endpoint for a location, as Google's SDK picks it.
fn default_host(location: &str) -> String {
    if location == "global" {
        "https://aiplatform.googleapis.com".into()
    } else if MULTI_REGIONAL.contains(&location) {
        format!("https://aiplatform.{location}.rep.googleapis.com")
    } else {
        format!("https://{location}-aiplatform.googleapis.com")
    }
}

fn versioned(base: &str) -> String {
    if names_version(base) {
        base.to_string()
    } else {
        format!("{base}/{API_VERSION}")
    }
}

/// The request URL. A custom base URL is the collection itself (no project path), as in pi;
/// otherwise the project and location scope the model, except in express mode.
fn url(model: &Model, env: &ProviderEnv, scope: Option<(&str, &str)>) -> String {
    let method = format!(
        "publishers/google/models/{}:streamGenerateContent?alt=sse",
        model.id
    );
    if let Some(base) = custom_base(model) {
        return format!("{}/{method}", versioned(base));
    }
    let base = env
        .get("GOOGLE_VERTEX_BASE_URL")
        .map(|b| b.trim_end_matches('/').to_string())
        .unwrap_or_else(|| match scope {
            Some((_, location)) => default_host(location),
            None => default_host("global"),
        });
    match scope {
        Some((project, location)) => format!(
            "{}/projects/{project}/locations/{location}/{method}",
            versioned(&base)
        ),
        None => format!("{}/{method}", versioned(&base)),
    }
}

pub(crate) fn build(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<(HttpRequest, Box<dyn Adapter>), ProviderError> {
    let env = &options.env;
    let body = google::request_body(model, context, options);
    let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
    let request = match api_key(options) {
        Some(key) => {
            headers.push(("x-goog-api-key".to_string(), key));
            super::add_request_headers(&mut headers, model, options);
            HttpRequest::post_json_to(url(model, env, None), headers, &body, ErrorStyle::Message)?
        }
        None => {
            let project = env
                .get("GOOGLE_CLOUD_PROJECT")
                .or_else(|| env.get("GCLOUD_PROJECT"))
                .ok_or_else(|| ProviderError::Config(
                    "Vertex AI requires a project ID. Set GOOGLE_CLOUD_PROJECT/GCLOUD_PROJECT or pass project in options."
                        .into(),
                ))?;
            let location = env.get("GOOGLE_CLOUD_LOCATION").ok_or_else(|| {
                ProviderError::Config(
                    "Vertex AI requires a location. Set GOOGLE_CLOUD_LOCATION or pass location in options."
                        .into(),
                )
            })?;
            let adc = Adc::load(env).map_err(|e| ProviderError::Config(e.to_string()))?;
            super::add_request_headers(&mut headers, model, options);
            let url = url(model, env, Some((&project, &location)));
            let mut request = HttpRequest::post_json_to(url, headers, &body, ErrorStyle::Message)?;
            request.auth = Some(Arc::new(adc));
            request
        }
    };
    Ok((request, Box::new(Decoder::default())))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::model;
    use super::*;

    fn vertex(base_url: &str) -> Model {
        Model {
            id: "gemini-2.5-pro".into(),
            base_url: base_url.into(),
            ..model("google-vertex")
        }
    }

    #[test]
    fn endpoints_follow_googles_sdk() {
        let none = ProviderEnv::new(|_| None);
        let template = vertex("https://{location}-aiplatform.googleapis.com");
        assert_eq!(
            url(&template, &none, Some(("p", "europe-west4"))),
            "https://europe-west4-aiplatform.googleapis.com/v1/projects/p/locations/europe-west4/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        );
        assert!(
            url(&template, &none, Some(("p", "global")))
                .starts_with("https://aiplatform.googleapis.com/v1/projects/p/locations/global/")
        );
        assert!(
            url(&template, &none, Some(("p", "us"))).starts_with(
                "https://aiplatform.us.rep.googleapis.com/v1/projects/p/locations/us/"
            )
        );
        // Express mode: the global endpoint, no project.
        assert_eq!(
            url(&template, &none, None),
            "https://aiplatform.googleapis.com/v1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        );
        // A custom base URL is the collection; one naming a version gets none added.
        assert_eq!(
            url(
                &vertex("https://proxy.example/vertex/"),
                &none,
                Some(("p", "l"))
            ),
            "https://proxy.example/vertex/v1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        );
        assert!(
            url(&vertex("https://proxy.example/v1beta1"), &none, None)
                .starts_with("https://proxy.example/v1beta1/publishers/")
        );
        let env = ProviderEnv::new(|n| {
            (n == "GOOGLE_VERTEX_BASE_URL").then(|| "http://127.0.0.1:9/".to_string())
        });
        assert!(
            url(&template, &env, Some(("p", "l")))
                .starts_with("http://127.0.0.1:9/v1/projects/p/locations/l/publishers/")
        );
    }

    #[test]
    fn placeholders_are_not_keys() {
        let with = |key: &str| StreamOptions {
            api_key: Some(key.into()),
            ..StreamOptions::default()
        };
        assert_eq!(api_key(&with("<authenticated>")), None);
        assert_eq!(api_key(&with("gcp-vertex-credentials")), None);
        assert_eq!(api_key(&with("  ")), None);
        assert_eq!(api_key(&with("AIza-key")).as_deref(), Some("AIza-key"));
    }

    #[test]
    fn adc_needs_project_and_location() {
        let options = StreamOptions {
            api_key: Some("<authenticated>".into()),
            env: ProviderEnv::new(|_| None),
            ..StreamOptions::default()
        };
        let err = build(&vertex(""), &Context::default(), &options)
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .starts_with("Vertex AI requires a project ID.")
        );
        let options = StreamOptions {
            env: ProviderEnv::new(|n| (n == "GCLOUD_PROJECT").then(|| "p".to_string())),
            ..options
        };
        let err = build(&vertex(""), &Context::default(), &options)
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .starts_with("Vertex AI requires a location.")
        );
    }
}
