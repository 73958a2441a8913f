//! Google's Application Default Credentials for Vertex AI: the credentials file (a service
//! account's key through `GOOGLE_APPLICATION_CREDENTIALS`, or the authorized user that
//! `gcloud auth application-default login` writes), the OAuth exchange that turns it into an
//! access token (an RS256-signed JWT, or the refresh-token grant), and a process-wide cache
//! that reuses a token until five minutes before it expires, as Google's libraries do.
//!
//! The key, the refresh token and the access tokens are never logged: the types holding them
//! redact themselves in `Debug`, and errors name files and endpoints, never their contents.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures_util::future::BoxFuture;
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};

use super::{Authorize, Failed, HttpRequest, ProviderEnv, ProviderError, StreamOptions};

/// Where Google's tools send token requests when the credentials name no endpoint.
const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// The scope Vertex AI needs (what Google's SDK asks for).
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// A token this close to its end is replaced (Google's libraries refresh five minutes early).
const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);
/// How long the signed assertion is good for: the most Google accepts.
const ASSERTION_LIFETIME: u64 = 3600;
/// A credentials file is a few KB; anything far larger is not one.
const FILE_CAP: u64 = tau_base::bounded::CONFIG_CAP;

/// Where the credentials come from.
enum Source {
    ServiceAccount {
        email: String,
        key_id: Option<String>,
        key: RsaKeyPair,
        token_uri: String,
    },
    AuthorizedUser {
        client_id: String,
        client_secret: String,
        refresh_token: String,
        token_uri: String,
        quota_project: Option<String>,
    },
}

/// Application Default Credentials, loaded from their file.
pub(crate) struct Adc {
    source: Source,
    /// Identifies the credentials in the token cache (no secret in it).
    cache_key: String,
}

impl std::fmt::Debug for Adc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adc")
            .field("cache_key", &self.cache_key)
            .finish_non_exhaustive()
    }
}

/// Why the credentials could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AdcError {
    #[error(
        "Vertex AI: no Application Default Credentials found: set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, or run `gcloud auth application-default login`"
    )]
    NotFound,
    #[error("Vertex AI: cannot read the credentials file {path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("Vertex AI: the credentials file {path} is not valid: {reason}")]
    Invalid { path: String, reason: String },
    #[error(
        "Vertex AI: credentials of type \"{kind}\" ({path}) are not supported by tau; use a service account key or `gcloud auth application-default login`"
    )]
    Unsupported { kind: String, path: String },
}

/// The credentials file: `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's own.
pub(crate) fn credentials_path(env: &ProviderEnv) -> Option<PathBuf> {
    env.get("GOOGLE_APPLICATION_CREDENTIALS")
        .map(PathBuf::from)
        .or_else(|| {
            env.home().map(|home| {
                home.join(".config")
                    .join("gcloud")
                    .join("application_default_credentials.json")
            })
        })
}

fn string(value: &Value, key: &str) -> Option<String> {
    value
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .filter(|s| !s.is_empty())
}

impl Adc {
    /// Reads and checks the credentials file.
    pub(crate) fn load(env: &ProviderEnv) -> Result<Adc, AdcError> {
        let path = credentials_path(env).ok_or(AdcError::NotFound)?;
        let shown = path.display().to_string();
        let text = match tau_base::bounded::read_to_string(&path, FILE_CAP) {
            Ok(text) => text,
            Err(tau_base::bounded::BoundedReadError::NotFound) => return Err(AdcError::NotFound),
            Err(err) => {
                return Err(AdcError::Unreadable {
                    path: shown,
                    reason: err.to_string(),
                });
            }
        };
        let invalid = |reason: &str| AdcError::Invalid {
            path: shown.clone(),
            reason: reason.to_string(),
        };
        let value: Value = serde_json::from_str(&text).map_err(|_| invalid("it is not JSON"))?;
        let kind = string(&value, "type").unwrap_or_default();
        let token_uri = string(&value, "token_uri").unwrap_or_else(|| DEFAULT_TOKEN_URI.into());
        match kind.as_str() {
            "service_account" => {
                let email = string(&value, "client_email")
                    .ok_or_else(|| invalid("client_email is missing"))?;
                let pem = string(&value, "private_key")
                    .ok_or_else(|| invalid("private_key is missing"))?;
                let der = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes())
                    .map_err(|_| invalid("private_key is not a PKCS#8 PEM key"))?;
                let key = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der())
                    .map_err(|_| invalid("private_key is not an RSA key ring accepts"))?;
                Ok(Adc {
                    cache_key: format!("sa\u{0}{email}\u{0}{token_uri}"),
                    source: Source::ServiceAccount {
                        email,
                        key_id: string(&value, "private_key_id"),
                        key,
                        token_uri,
                    },
                })
            }
            "authorized_user" => {
                let field = |key: &str| {
                    string(&value, key).ok_or_else(|| invalid(&format!("{key} is missing")))
                };
                let (client_id, client_secret, refresh_token) = (
                    field("client_id")?,
                    field("client_secret")?,
                    field("refresh_token")?,
                );
                // The refresh token identifies the login; only its digest goes in the key.
                let digest = ring::digest::digest(&ring::digest::SHA256, refresh_token.as_bytes());
                let id: String = digest.as_ref()[..8]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                Ok(Adc {
                    cache_key: format!("user\u{0}{client_id}\u{0}{id}\u{0}{token_uri}"),
                    source: Source::AuthorizedUser {
                        client_id,
                        client_secret,
                        refresh_token,
                        token_uri,
                        quota_project: string(&value, "quota_project_id"),
                    },
                })
            }
            other => Err(AdcError::Unsupported {
                kind: if other.is_empty() { "unknown" } else { other }.to_string(),
                path: shown,
            }),
        }
    }

    fn token_uri(&self) -> &str {
        match &self.source {
            Source::ServiceAccount { token_uri, .. } | Source::AuthorizedUser { token_uri, .. } => {
                token_uri
            }
        }
    }

    /// The form the token endpoint gets.
    fn grant(&self) -> Result<Vec<(&'static str, String)>, ProviderError> {
        match &self.source {
            Source::ServiceAccount {
                email,
                key_id,
                key,
                token_uri,
            } => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let mut header = json!({"alg": "RS256", "typ": "JWT"});
                if let Some(id) = key_id {
                    header["kid"] = json!(id);
                }
                let claims = json!({
                    "iss": email,
                    "scope": SCOPE,
                    "aud": token_uri,
                    "iat": now,
                    "exp": now + ASSERTION_LIFETIME,
                });
                let signing_input = format!(
                    "{}.{}",
                    URL_SAFE_NO_PAD.encode(header.to_string()),
                    URL_SAFE_NO_PAD.encode(claims.to_string())
                );
                let mut signature = vec![0; key.public().modulus_len()];
                key.sign(
                    &RSA_PKCS1_SHA256,
                    &SystemRandom::new(),
                    signing_input.as_bytes(),
                    &mut signature,
                )
                .map_err(|_| {
                    ProviderError::Config("Vertex AI: signing the token request failed".into())
                })?;
                Ok(vec![
                    (
                        "grant_type",
                        "urn:ietf:params:oauth:grant-type:jwt-bearer".into(),
                    ),
                    (
                        "assertion",
                        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature)),
                    ),
                ])
            }
            Source::AuthorizedUser {
                client_id,
                client_secret,
                refresh_token,
                ..
            } => Ok(vec![
                ("grant_type", "refresh_token".into()),
                ("client_id", client_id.clone()),
                ("client_secret", client_secret.clone()),
                ("refresh_token", refresh_token.clone()),
            ]),
        }
    }

    /// Exchanges the credentials for an access token at the token endpoint.
    async fn exchange(
        &self,
        client: &reqwest::Client,
        options: &StreamOptions,
    ) -> Result<Token, Failed> {
        let fail = |error, retryable| Failed { error, retryable };
        let form = self.grant().map_err(|e| fail(e, false))?;
        let body: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
            .finish();
        let uri = self.token_uri();
        let send = client
            .post(uri)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send();
        let response = match super::within(send, options, super::headers_limit(options)).await {
            Ok(Ok(response)) => response,
            Ok(Err(err)) => {
                return Err(fail(
                    ProviderError::Network(format!(
                        "Connection error: Vertex AI token request to {uri}: {}",
                        super::describe(&err)
                    )),
                    true,
                ));
            }
            Err(error) => {
                let retryable = matches!(error, ProviderError::Idle(_));
                return Err(fail(error, retryable));
            }
        };
        let status = response.status();
        let text = match super::guarded(response.bytes(), options).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(err)) => {
                return Err(fail(
                    ProviderError::Network(format!(
                        "Connection lost: Vertex AI token request to {uri}: {}",
                        super::describe(&err)
                    )),
                    true,
                ));
            }
            Err(error) => return Err(fail(error, false)),
        };
        let value: Value = serde_json::from_slice(&text).unwrap_or(Value::Null);
        if !status.is_success() {
            // Google's token errors are `{"error": code, "error_description": text}`.
            let code = string(&value, "error").unwrap_or_default();
            let description = string(&value, "error_description").unwrap_or_default();
            let detail = match (code.is_empty(), description.is_empty()) {
                (true, true) => String::from_utf8_lossy(&text).trim().to_string(),
                (false, true) => code,
                (true, false) => description,
                (false, false) => format!("{code}: {description}"),
            };
            let retryable = status.as_u16() == 429 || status.is_server_error();
            return Err(fail(
                ProviderError::Service {
                    status: status.as_u16(),
                    message: format!(
                        "Vertex AI: getting an access token from {uri} failed: {} {detail}",
                        status.as_u16()
                    ),
                    retry_after: None,
                },
                retryable,
            ));
        }
        let Some(access) = string(&value, "access_token") else {
            return Err(fail(
                ProviderError::Stream(format!(
                    "Vertex AI: the token endpoint {uri} answered without an access_token"
                )),
                false,
            ));
        };
        let lifetime = value
            .get("expires_in")
            .and_then(Value::as_u64)
            .unwrap_or(3600);
        Ok(Token {
            access,
            expires: Instant::now() + Duration::from_secs(lifetime),
        })
    }

    fn quota_project(&self) -> Option<&str> {
        match &self.source {
            Source::AuthorizedUser { quota_project, .. } => quota_project.as_deref(),
            Source::ServiceAccount { .. } => None,
        }
    }
}

/// An access token and when it stops working.
#[derive(Clone)]
struct Token {
    access: String,
    expires: Instant,
}

impl Token {
    fn fresh(&self) -> bool {
        self.expires
            .checked_duration_since(Instant::now())
            .is_some_and(|left| left > REFRESH_MARGIN)
    }
}

/// One slot per set of credentials; the async lock makes concurrent requests wait for one
/// exchange instead of each making its own.
type Slot = Arc<tokio::sync::Mutex<Option<Token>>>;

static TOKENS: LazyLock<Mutex<HashMap<String, Slot>>> = LazyLock::new(Default::default);

impl Authorize for Adc {
    fn authorize<'a>(
        &'a self,
        client: &'a reqwest::Client,
        _request: &'a HttpRequest,
        _body: &'a [u8],
        options: &'a StreamOptions,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, Failed>> {
        Box::pin(async move {
            let slot = TOKENS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(self.cache_key.clone())
                .or_default()
                .clone();
            let mut cached = slot.lock().await;
            let token = match cached.as_ref().filter(|t| t.fresh()) {
                Some(token) => token.clone(),
                None => {
                    let token = self.exchange(client, options).await?;
                    *cached = Some(token.clone());
                    token
                }
            };
            let mut headers = vec![(
                "authorization".to_string(),
                format!("Bearer {}", token.access),
            )];
            if let Some(project) = self.quota_project() {
                headers.push(("x-goog-user-project".to_string(), project.to_string()));
            }
            Ok(headers)
        })
    }

    fn rejected(&self) {
        // A token revoked before its time would otherwise fail every request until it ends.
        let slot = TOKENS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&self.cache_key)
            .cloned();
        if let Some(slot) = slot
            && let Ok(mut cached) = slot.try_lock()
        {
            *cached = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with(path: &std::path::Path) -> ProviderEnv {
        let path = path.display().to_string();
        ProviderEnv::new(move |name| {
            (name == "GOOGLE_APPLICATION_CREDENTIALS").then(|| path.clone())
        })
    }

    #[test]
    fn files_are_read_by_type() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("adc.json");
        std::fs::write(
            &path,
            r#"{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r","quota_project_id":"q"}"#,
        )
        .unwrap();
        let adc = Adc::load(&env_with(&path)).unwrap();
        assert_eq!(adc.token_uri(), DEFAULT_TOKEN_URI);
        assert_eq!(adc.quota_project(), Some("q"));
        assert!(!adc.cache_key.contains('r') || !adc.cache_key.ends_with("\u{0}r"));
        let grant = adc.grant().unwrap();
        assert_eq!(grant[0], ("grant_type", "refresh_token".to_string()));

        std::fs::write(&path, r#"{"type":"external_account"}"#).unwrap();
        let err = Adc::load(&env_with(&path)).unwrap_err();
        assert!(
            matches!(err, AdcError::Unsupported { ref kind, .. } if kind == "external_account")
        );
        std::fs::write(
            &path,
            r#"{"type":"service_account","client_email":"e","private_key":"nope"}"#,
        )
        .unwrap();
        let err = Adc::load(&env_with(&path)).unwrap_err().to_string();
        assert!(err.contains("not a PKCS#8 PEM key"), "{err}");
        assert!(
            !err.contains("nope"),
            "the key's text is never shown: {err}"
        );
        assert_eq!(
            Adc::load(&env_with(&dir.path().join("missing.json"))).unwrap_err(),
            AdcError::NotFound
        );
    }

    #[test]
    fn the_default_file_is_gclouds() {
        let env = ProviderEnv::new(|name| (name == "HOME").then(|| "/home/u".to_string()));
        assert_eq!(
            credentials_path(&env).unwrap(),
            PathBuf::from("/home/u/.config/gcloud/application_default_credentials.json")
        );
    }

    #[test]
    fn tokens_are_fresh_until_five_minutes_before_their_end() {
        let token = |secs| Token {
            access: "t".into(),
            expires: Instant::now() + Duration::from_secs(secs),
        };
        assert!(token(3600).fresh());
        assert!(!token(299).fresh());
    }
}
