//! The HTTP server: the shared script queue and request log, the LLM endpoint handler, the
//! `/_mock/*` control endpoints, and the two ways to run it ([`MockServer`] on the caller's
//! tokio runtime, [`BackgroundMock`] on a thread of its own).

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::api::{self, Api};
use crate::cloud_auth::{AwsCredentials, AwsWebIdentity, CloudAuth, GoogleOAuth};
use crate::errors::{ApiError, fault_response};
use crate::reply::{Reply, script_from_value};
use crate::rules;
use crate::stream::{Ctx, Plan, sse_body};

/// One request the mock received on an LLM endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    pub api: Api,
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// Lower-case names, in the order received.
    pub headers: Vec<(String, String)>,
    /// The JSON body; a string holding the raw text when it was not JSON.
    pub body: Value,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Inner {
    queue: VecDeque<Reply>,
    log: Vec<RecordedRequest>,
    rules: bool,
    seq: u64,
    auth: CloudAuth,
}

struct Shared {
    state: Mutex<Inner>,
    shutdown: CancellationToken,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the queue or log half-updated, so a
        // poisoned lock is still safe to use.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A cheap, cloneable handle on a running mock: script it and read its request log.
#[derive(Clone)]
pub struct MockControl {
    url: String,
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MockControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockControl")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl MockControl {
    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Appends a reply to the script (FIFO, one reply per request).
    pub fn push(&self, reply: Reply) {
        self.shared.lock().queue.push_back(reply);
    }

    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.lock().queue.extend(replies);
    }

    /// When the script is empty: answer from the rules (`true`) or fail with HTTP 500
    /// "mock script exhausted" (`false`, the default).
    pub fn set_rules(&self, on: bool) {
        self.shared.lock().rules = on;
    }

    /// Every request received on an LLM endpoint, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().log.clone()
    }

    /// How many scripted replies are still queued.
    pub fn remaining(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// Bedrock requests must then be signed with these credentials (AWS Signature Version 4
    /// for service `bedrock`, checked as AWS checks it), unless they carry the bearer key of
    /// [`MockControl::require_aws_bearer`].
    pub fn require_aws_signature(&self, credentials: AwsCredentials) {
        self.shared.lock().auth.aws = Some(credentials);
    }

    /// Bedrock requests sent with `Authorization: Bearer` must carry this key.
    pub fn require_aws_bearer(&self, token: impl Into<String>) {
        self.shared.lock().auth.aws_bearer = Some(token.into());
    }

    /// Google's OAuth endpoint `POST /token` then grants access tokens to these credentials,
    /// and Vertex requests must carry one still valid (or the API key).
    pub fn set_google_oauth(&self, config: GoogleOAuth) {
        self.shared.lock().auth.google = Some(config);
    }

    /// The `grant_type` of every request to `POST /token`, in order.
    pub fn token_grants(&self) -> Vec<String> {
        self.shared.lock().auth.grants.clone()
    }

    /// Revokes every access token issued so far, as a user revoking a login would.
    pub fn revoke_google_tokens(&self) {
        self.shared.lock().auth.issued.clear();
    }

    /// `GET /v2/credentials/{id}` then serves these keys, as the ECS/EKS container endpoint
    /// does, to requests with this `Authorization` (any, when `None`).
    pub fn serve_aws_container_credentials(
        &self,
        credentials: AwsCredentials,
        authorization: Option<String>,
    ) {
        self.shared.lock().auth.aws_container = Some((credentials, authorization));
    }

    /// `POST /` then answers STS's `AssumeRoleWithWebIdentity` for this role and token.
    pub fn serve_aws_web_identity(&self, identity: AwsWebIdentity) {
        self.shared.lock().auth.aws_web_identity = Some(identity);
    }

    /// Every request for AWS keys the mock answered (`container`, or the STS action).
    pub fn aws_credential_fetches(&self) -> Vec<String> {
        self.shared.lock().auth.aws_fetches.clone()
    }

    /// Empties the script queue and the request log (the rules setting stays).
    pub fn clear(&self) {
        let mut state = self.shared.lock();
        state.queue.clear();
        state.log.clear();
    }
}

/// A mock LLM server on 127.0.0.1, serving on the tokio runtime that started it. Dropping it
/// stops the server too; [`MockServer::shutdown`] also waits for it.
pub struct MockServer {
    control: MockControl,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("url", &self.control.url)
            .finish_non_exhaustive()
    }
}

/// How long [`MockServer::shutdown`] lets open connections finish before cutting them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

impl MockServer {
    /// Binds 127.0.0.1 on a free port.
    pub async fn start() -> std::io::Result<MockServer> {
        Self::start_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
    }

    /// Binds `addr`, which must be a loopback address: the mock never listens beyond this
    /// machine.
    pub async fn start_on(addr: SocketAddr) -> std::io::Result<MockServer> {
        if !addr.ip().is_loopback() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "tau-mock-llm only listens on loopback addresses, not {}",
                    addr.ip()
                ),
            ));
        }
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(Inner::default()),
            shutdown: CancellationToken::new(),
        });
        let app = router(shared.clone());
        let stop = shared.shutdown.clone().cancelled_owned();
        let task = tokio::spawn(async move {
            if let Err(err) = axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await
            {
                tracing::warn!("tau-mock-llm server failed: {err}");
            }
        });
        tracing::debug!("tau-mock-llm listening on {addr}");
        Ok(MockServer {
            control: MockControl {
                url: format!("http://{addr}"),
                addr,
                shared,
            },
            task: Some(task),
        })
    }

    /// Starts a mock on a thread of its own with its own runtime, for tests that do not run
    /// inside tokio. The returned handle stops it when dropped.
    pub fn start_background() -> std::io::Result<BackgroundMock> {
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("tau-mock-llm".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        let _ = tx.send(Err(err));
                        return;
                    }
                };
                runtime.block_on(async move {
                    match MockServer::start().await {
                        Ok(server) => {
                            let control = server.control();
                            let stop = control.shared.shutdown.clone();
                            let _ = tx.send(Ok(control));
                            stop.cancelled().await;
                            server.shutdown().await;
                        }
                        Err(err) => {
                            let _ = tx.send(Err(err));
                        }
                    }
                });
            })?;
        let control = rx
            .recv()
            .map_err(|_| std::io::Error::other("tau-mock-llm thread ended before starting"))??;
        Ok(BackgroundMock {
            control,
            thread: Some(thread),
        })
    }

    /// A cloneable handle with the same scripting methods.
    pub fn control(&self) -> MockControl {
        self.control.clone()
    }

    pub fn url(&self) -> String {
        self.control.url()
    }

    pub fn addr(&self) -> SocketAddr {
        self.control.addr()
    }

    pub fn push(&self, reply: Reply) {
        self.control.push(reply);
    }

    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) {
        self.control.push_all(replies);
    }

    pub fn set_rules(&self, on: bool) {
        self.control.set_rules(on);
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.control.requests()
    }

    pub fn remaining(&self) -> usize {
        self.control.remaining()
    }

    pub fn require_aws_signature(&self, credentials: AwsCredentials) {
        self.control.require_aws_signature(credentials);
    }

    pub fn require_aws_bearer(&self, token: impl Into<String>) {
        self.control.require_aws_bearer(token);
    }

    pub fn set_google_oauth(&self, config: GoogleOAuth) {
        self.control.set_google_oauth(config);
    }

    pub fn token_grants(&self) -> Vec<String> {
        self.control.token_grants()
    }

    pub fn revoke_google_tokens(&self) {
        self.control.revoke_google_tokens();
    }

    pub fn serve_aws_container_credentials(
        &self,
        credentials: AwsCredentials,
        authorization: Option<String>,
    ) {
        self.control
            .serve_aws_container_credentials(credentials, authorization);
    }

    pub fn serve_aws_web_identity(&self, identity: AwsWebIdentity) {
        self.control.serve_aws_web_identity(identity);
    }

    pub fn aws_credential_fetches(&self) -> Vec<String> {
        self.control.aws_credential_fetches()
    }

    pub fn clear(&self) {
        self.control.clear();
    }

    /// Stops accepting, ends every open stream (stalled ones included) and waits for the
    /// server to finish.
    pub async fn shutdown(mut self) {
        self.control.shared.shutdown.cancel();
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.control.shared.shutdown.cancel();
    }
}

/// A mock running on its own thread; derefs to [`MockControl`] for `url`, `push`,
/// `push_all`, `set_rules`, `requests` and `clear`. Dropping it stops the server.
pub struct BackgroundMock {
    control: MockControl,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for BackgroundMock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundMock")
            .field("url", &self.control.url)
            .finish_non_exhaustive()
    }
}

impl Deref for BackgroundMock {
    type Target = MockControl;

    fn deref(&self) -> &MockControl {
        &self.control
    }
}

impl Drop for BackgroundMock {
    fn drop(&mut self) {
        self.control.shared.shutdown.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/_mock/replies", post(push_replies))
        .route("/_mock/requests", get(list_requests))
        .route("/_mock/reset", post(reset))
        .route("/_mock/rules", post(set_rules))
        .route("/token", post(token))
        .route("/v2/credentials/{id}", get(container_credentials))
        .route("/", post(sts))
        .fallback(llm_endpoint)
        // Long conversations make large requests; nothing here is exposed beyond loopback.
        .layer(DefaultBodyLimit::disable())
        .with_state(shared)
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

async fn push_replies(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let replies = serde_json::from_slice::<Value>(&body)
        .map_err(crate::ScriptError::from)
        .and_then(script_from_value);
    match replies {
        Ok(replies) => {
            let added = replies.len();
            let mut state = shared.lock();
            state.queue.extend(replies);
            json_response(
                StatusCode::OK,
                &json!({"added": added, "queued": state.queue.len()}),
            )
        }
        Err(err) => json_response(StatusCode::BAD_REQUEST, &json!({"error": err.to_string()})),
    }
}

async fn list_requests(State(shared): State<Arc<Shared>>) -> Response {
    let log = shared.lock().log.clone();
    match serde_json::to_value(log) {
        Ok(value) => json_response(StatusCode::OK, &value),
        Err(err) => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"error": err.to_string()}),
        ),
    }
}

async fn reset(State(shared): State<Arc<Shared>>) -> Response {
    let mut state = shared.lock();
    state.queue.clear();
    state.log.clear();
    json_response(StatusCode::OK, &json!({"ok": true}))
}

#[derive(Deserialize)]
struct RulesToggle {
    enabled: bool,
}

async fn set_rules(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    match serde_json::from_slice::<RulesToggle>(&body) {
        Ok(toggle) => {
            shared.lock().rules = toggle.enabled;
            json_response(StatusCode::OK, &json!({"enabled": toggle.enabled}))
        }
        Err(err) => json_response(
            StatusCode::BAD_REQUEST,
            &json!({"error": format!("expected {{\"enabled\": bool}}: {err}")}),
        ),
    }
}

/// Google's OAuth token endpoint, for Vertex's credentials.
async fn token(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    let form: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
    // The audience a service account's JWT must name is this endpoint's own URL.
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let token_uri = format!("http://{host}{}", uri.path());
    shared.lock().auth.token(&token_uri, &form)
}

/// AWS's container credentials endpoint.
async fn container_credentials(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    shared.lock().auth.container(&headers)
}

/// AWS STS's query API.
async fn sts(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let form: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
    shared.lock().auth.sts(&form)
}

/// What to do with one LLM request, decided under the lock.
enum Answer {
    Reply(Box<Reply>),
    Refuse(ApiError),
    /// A refusal already shaped (a credential check's).
    Deny(Response),
}

async fn llm_endpoint(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(route) = api::route(uri.path()) else {
        let message = format!("tau-mock-llm: no endpoint at {method} {}", uri.path());
        return json_response(StatusCode::NOT_FOUND, &json!({"error": message}));
    };
    let api = route.api;
    let parsed = serde_json::from_slice::<Value>(&body);
    let body_value = match &parsed {
        Ok(value) => value.clone(),
        Err(_) => Value::String(String::from_utf8_lossy(&body).into_owned()),
    };
    let record = RecordedRequest {
        api,
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        headers: headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body_value.clone(),
    };

    // Recording, validating and taking the reply under one lock keeps the log and the
    // script in the same order even when requests race.
    let (seq, answer) = {
        let mut state = shared.lock();
        state.log.push(record);
        state.seq += 1;
        let seq = state.seq;
        let refusal = if method != Method::POST {
            Some(ApiError::new(
                405,
                format!("{method} is not allowed here; use POST"),
            ))
        } else if route.unary {
            Some(ApiError::new(
                400,
                if api == Api::BedrockConverseStream {
                    "tau-mock-llm only serves streaming requests: use /converse-stream"
                } else {
                    "tau-mock-llm only serves streaming requests: use :streamGenerateContent?alt=sse"
                },
            ))
        } else if let Err(err) = &parsed {
            Some(ApiError::new(
                400,
                format!("the request body is not valid JSON: {err}"),
            ))
        } else if api.streams_by_body() && body_value.get("stream") != Some(&Value::Bool(true)) {
            Some(ApiError::new(
                400,
                "tau-mock-llm only serves streaming requests: set \"stream\": true",
            ))
        } else {
            None
        };
        let denial = state.auth.check(
            api,
            method.as_str(),
            uri.path(),
            uri.query(),
            &headers,
            &body,
        );
        let answer = match (refusal, denial) {
            (_, Some(response)) => Answer::Deny(response),
            (Some(err), None) => Answer::Refuse(err),
            (None, None) => match state.queue.pop_front() {
                Some(reply) => Answer::Reply(Box::new(reply)),
                None if state.rules => Answer::Reply(Box::new(rules::reply(api, &body_value, seq))),
                None => Answer::Refuse(ApiError::new(500, "mock script exhausted")),
            },
        };
        (seq, answer)
    };

    let reply = match answer {
        Answer::Reply(reply) => *reply,
        Answer::Refuse(err) => {
            tracing::info!("{method} {} -> {} {}", uri.path(), err.status, err.message);
            return err.into_response(api);
        }
        Answer::Deny(response) => {
            tracing::info!(
                "{method} {} -> {} (credentials)",
                uri.path(),
                response.status()
            );
            return response;
        }
    };
    tracing::info!(
        "{method} {} -> reply #{seq} ({} blocks)",
        uri.path(),
        reply.content.len()
    );

    if reply.delay_ms > 0 {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(reply.delay_ms)) => {}
            () = shared.shutdown.cancelled() => {
                return ApiError::new(503, "tau-mock-llm is shutting down").into_response(api);
            }
        }
    }
    if let Some(response) = reply.fault.as_ref().and_then(|f| fault_response(api, f)) {
        return response;
    }

    let model = reply
        .model
        .clone()
        .or(route.path_model)
        .or_else(|| {
            body_value
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "mock-model".to_owned());
    let ctx = Ctx::new(api, model, seq, &body_value);
    let chunk_delay_ms = reply.chunk_delay_ms;
    let fault = reply.fault.clone();
    let body = sse_body(
        Plan::new(reply, ctx),
        chunk_delay_ms,
        fault.as_ref(),
        shared.shutdown.clone(),
    );

    let content_type = match api {
        Api::GoogleGenerativeAi | Api::GoogleVertex => "text/event-stream",
        Api::BedrockConverseStream => "application/vnd.amazon.eventstream",
        _ => "text/event-stream; charset=utf-8",
    };
    let mut response = Response::new(body);
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    let request_id = format!("req_mock{seq:04}");
    let request_id_header = match api {
        Api::AnthropicMessages => Some("request-id"),
        Api::OpenAiCompletions | Api::OpenAiResponses => Some("x-request-id"),
        Api::AzureOpenAiResponses => Some("apim-request-id"),
        Api::BedrockConverseStream => Some("x-amzn-requestid"),
        Api::GoogleGenerativeAi | Api::GoogleVertex => None,
    };
    if let (Some(name), Ok(value)) = (request_id_header, HeaderValue::from_str(&request_id)) {
        h.insert(name, value);
    }
    response
}
