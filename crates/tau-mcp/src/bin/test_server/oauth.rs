//! The test server's authorization side (`--oauth`): its `/mcp` endpoint takes only a valid
//! `Authorization: Bearer` token (401 with `WWW-Authenticate: Bearer resource_metadata=…`
//! otherwise), and it is its own authorization server: protected resource metadata (RFC
//! 9728), authorization server metadata (RFC 8414), dynamic client registration (RFC 7591),
//! `/authorize` approving at once as the user would (a redirect to the client's
//! `redirect_uri` with a code and the `state`), and `/token` for `authorization_code` (PKCE
//! S256 checked) and `refresh_token` (each refresh token used once). `--token-ttl <secs>`
//! makes access tokens short-lived so that refreshing is exercised; `/oauth/stats` counts
//! what happened, for the tests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

/// The authorization server and the tokens it gave.
pub struct OAuth {
    /// `http://127.0.0.1:<port>`: the issuer and the base of every endpoint.
    base: String,
    ttl: Duration,
    grants: Mutex<Grants>,
}

#[derive(Default)]
struct Grants {
    /// Registered clients and their redirect URIs.
    clients: HashMap<String, Vec<String>>,
    codes: HashMap<String, Code>,
    /// Access tokens and when each expires.
    access: HashMap<String, Instant>,
    /// Refresh tokens and their client.
    refresh: HashMap<String, String>,
    registered: u32,
    issued: u32,
    refreshed: u32,
    rejected: u32,
}

struct Code {
    client_id: String,
    redirect_uri: String,
    challenge: String,
}

type Shared = Arc<OAuth>;

impl OAuth {
    pub fn new(base: String, ttl: Duration) -> Arc<Self> {
        Arc::new(Self {
            base,
            ttl,
            grants: Mutex::default(),
        })
    }

    fn grants(&self) -> std::sync::MutexGuard<'_, Grants> {
        self.grants.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `mcp` behind the bearer check, and the authorization endpoints.
    pub fn router(self: &Arc<Self>, mcp: Router) -> Router {
        let protected = mcp.layer(axum::middleware::from_fn_with_state(
            self.clone(),
            require_bearer,
        ));
        Router::new()
            .route(
                "/.well-known/oauth-protected-resource",
                get(resource_metadata),
            )
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                get(resource_metadata),
            )
            .route(
                "/.well-known/oauth-authorization-server",
                get(server_metadata),
            )
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/oauth/stats", get(stats))
            .with_state(self.clone())
            .merge(protected)
    }

    /// A fresh access token, and a refresh token for `client_id`.
    fn issue(&self, grants: &mut Grants, client_id: &str) -> Value {
        let access = format!("at-{}", random());
        let refresh = format!("rt-{}", random());
        grants
            .access
            .insert(access.clone(), Instant::now() + self.ttl);
        grants
            .refresh
            .insert(refresh.clone(), client_id.to_string());
        grants.issued += 1;
        json!({
            "access_token": access, "token_type": "Bearer",
            "expires_in": self.ttl.as_secs(), "refresh_token": refresh, "scope": "mcp",
        })
    }
}

fn random() -> String {
    oauth2::CsrfToken::new_random_len(24).secret().clone()
}

async fn require_bearer(State(oauth): State<Shared>, request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::to_string);
    let valid = token.is_some_and(|token| {
        oauth
            .grants()
            .access
            .get(&token)
            .is_some_and(|expires| *expires > Instant::now())
    });
    if valid {
        return next.run(request).await;
    }
    oauth.grants().rejected += 1;
    let challenge = format!(
        "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource\", scope=\"mcp\"",
        oauth.base
    );
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
        "authorization required",
    )
        .into_response()
}

async fn resource_metadata(State(oauth): State<Shared>) -> Response {
    axum::Json(json!({
        "resource": format!("{}/mcp", oauth.base),
        "authorization_servers": [oauth.base],
        "scopes_supported": ["mcp"],
        "bearer_methods_supported": ["header"],
    }))
    .into_response()
}

async fn server_metadata(State(oauth): State<Shared>) -> Response {
    let base = &oauth.base;
    axum::Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": ["mcp"],
    }))
    .into_response()
}

async fn register(State(oauth): State<Shared>, body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_client_metadata");
    };
    let redirect_uris: Vec<String> = request["redirect_uris"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|uri| uri.as_str().map(str::to_string))
        .collect();
    if redirect_uris.is_empty() {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_redirect_uri");
    }
    let client_id = format!("client-{}", random());
    let mut grants = oauth.grants();
    grants.registered += 1;
    grants
        .clients
        .insert(client_id.clone(), redirect_uris.clone());
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "client_id": client_id,
            "client_name": request["client_name"],
            "redirect_uris": redirect_uris,
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        })),
    )
        .into_response()
}

/// The user approves at once: straight back to the client with a code.
async fn authorize(
    State(oauth): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let get = |name: &str| query.get(name).cloned().unwrap_or_default();
    let (client_id, redirect_uri) = (get("client_id"), get("redirect_uri"));
    let mut grants = oauth.grants();
    let known = grants
        .clients
        .get(&client_id)
        .is_some_and(|uris| uris.contains(&redirect_uri));
    if !known || get("response_type") != "code" || get("code_challenge_method") != "S256" {
        return (
            StatusCode::BAD_REQUEST,
            "unknown client, redirect or method",
        )
            .into_response();
    }
    let code = format!("code-{}", random());
    grants.codes.insert(
        code.clone(),
        Code {
            client_id,
            redirect_uri: redirect_uri.clone(),
            challenge: get("code_challenge"),
        },
    );
    let Ok(mut target) = url::Url::parse(&redirect_uri) else {
        return (StatusCode::BAD_REQUEST, "bad redirect_uri").into_response();
    };
    target
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &get("state"));
    Redirect::to(target.as_str()).into_response()
}

async fn token(State(oauth): State<Shared>, _headers: HeaderMap, body: Bytes) -> Response {
    let form: HashMap<String, String> = url::form_urlencoded::parse(&body)
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect();
    let get = |name: &str| form.get(name).cloned().unwrap_or_default();
    let mut grants = oauth.grants();
    match get("grant_type").as_str() {
        "authorization_code" => {
            let Some(code) = grants.codes.remove(&get("code")) else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            let verifier = get("code_verifier");
            // The crate's S256 asserts the verifier's length (43 to 128); checked first.
            let verified = (43..=128).contains(&verifier.len())
                && oauth2::PkceCodeChallenge::from_code_verifier_sha256(
                    &oauth2::PkceCodeVerifier::new(verifier),
                )
                .as_str()
                    == code.challenge;
            if !verified
                || code.client_id != get("client_id")
                || code.redirect_uri != get("redirect_uri")
            {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            let issued = oauth.issue(&mut grants, &code.client_id);
            axum::Json(issued).into_response()
        }
        "refresh_token" => {
            // Rotated: each refresh token is good for one refresh.
            let Some(client_id) = grants.refresh.remove(&get("refresh_token")) else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            if client_id != get("client_id") {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            grants.refreshed += 1;
            let issued = oauth.issue(&mut grants, &client_id);
            axum::Json(issued).into_response()
        }
        _ => oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type"),
    }
}

async fn stats(State(oauth): State<Shared>) -> Response {
    let grants = oauth.grants();
    axum::Json(json!({
        "registered": grants.registered,
        "issued": grants.issued,
        "refreshed": grants.refreshed,
        "rejected": grants.rejected,
    }))
    .into_response()
}

fn oauth_error(status: StatusCode, error: &str) -> Response {
    (status, axum::Json(json!({"error": error}))).into_response()
}
