//! Provider clients: one request, one streamed assistant message.
//!
//! [`stream`] builds the API-specific request, sends it over HTTP, decodes the SSE body and
//! turns it into [`AssistantMessageEvent`]s ending in exactly one `done` or `error`. Each API
//! adapter only maps its wire format to [`Op`]s; the shared [`emitter`] keeps the message,
//! the content indices, the cost and the partial snapshots. What the adapters' requests have
//! in common (the JSON POST, the OpenAI headers, usage counted inside the prompt) is here,
//! and so are the two hooks the cloud APIs need on every attempt: an [`Authorize`] step that
//! adds credentials made for that attempt (a SigV4 signature, an OAuth access token), and
//! the body's [`Framing`] (SSE, or AWS's binary event stream).

mod anthropic;
mod azure_openai_responses;
mod bedrock;
mod classify;
mod emitter;
mod env;
mod error;
mod event_stream;
mod google;
mod google_vertex;
mod idle;
mod openai_completions;
mod openai_responses;
mod partial_json;
mod sigv4;
mod vertex_auth;

pub mod sse;
#[cfg(test)]
mod test_support;
mod transform;

use std::time::Duration;

use futures_util::StreamExt;
pub use reqwest::Client as HttpClient;
use serde_json::Value;
use tau_protocol::{
    AssistantMessage, AssistantMessageEvent, Message, Model, StopReason, ThinkingLevel, Usage,
    UserContentBlock,
};
use tokio::sync::mpsc;
pub use tokio_util::sync::CancellationToken;

pub use classify::{is_context_overflow, is_overflow_error, is_retryable_error};
pub use env::ProviderEnv;
pub use error::ProviderError;
pub use idle::IdleCap;
pub use partial_json::parse_arguments;

use emitter::Emitter;
use sse::{SseDecoder, SseEvent};

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// What the model sees.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    pub system_prompt: Option<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<Tool>,
}

/// How long prompt caches should live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheRetention {
    None,
    #[default]
    Short,
    Long,
}

/// Token budgets for budget-based thinking, overriding the defaults per level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThinkingBudgets {
    pub minimal: Option<u64>,
    pub low: Option<u64>,
    pub medium: Option<u64>,
    pub high: Option<u64>,
}

/// Lets the caller see and change a request on its way out (pi's `before_provider_request`
/// and `after_provider_response` extension events).
pub trait RequestHooks: Send + Sync {
    /// The request body about to be sent; returns the body to send.
    fn before_request(&self, payload: Value) -> futures_util::future::BoxFuture<'_, Value>;
    /// The response's status and headers (names lower-cased), before its body is read.
    fn after_response(
        &self,
        status: u16,
        headers: Vec<(String, String)>,
    ) -> futures_util::future::BoxFuture<'_, ()>;
}

/// Options of one request.
#[derive(Clone)]
pub struct StreamOptions {
    pub api_key: Option<String>,
    /// Defaults to `min(model.maxTokens, 32000)`.
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    /// The thinking level; `None` or `Off` means no reasoning.
    pub reasoning: Option<ThinkingLevel>,
    pub thinking_budgets: ThinkingBudgets,
    /// Used as a prompt-cache key where the API has one.
    pub session_id: Option<String>,
    pub cache_retention: CacheRetention,
    /// Extra request headers (after the model's own).
    pub headers: Vec<(String, String)>,
    /// Cancelling ends the stream with `stopReason:"aborted"`.
    pub cancel: CancellationToken,
    /// A response that sends nothing (headers or body) for this long fails instead of
    /// hanging (`httpIdleTimeoutMs`); `Duration::ZERO` disables it.
    pub idle_timeout: Duration,
    /// How long the server may take to answer with its headers (`retry.provider.timeoutMs`,
    /// pi's SDK request timeout); `None` means the idle timeout.
    pub request_timeout: Option<Duration>,
    /// A tighter silence limit that may be set while the request waits (tau lowers it when
    /// its client goes away); applies to the headers and the body alike.
    pub idle_cap: IdleCap,
    /// Retries of a request that failed before its reply started streaming: a connection
    /// error, a timeout, or status 408, 409, 429 or 5xx (`retry.provider.maxRetries`, what
    /// pi's provider SDKs do; 0 by default).
    pub max_retries: u32,
    /// A server asking to wait longer than this before a retry ends the provider-level retries
    /// at once with its error (`retry.provider.maxRetryDelayMs`); `Duration::ZERO` removes the
    /// cap.
    pub max_retry_delay: Duration,
    /// Fill `partial` in every event with the message so far (pi 0.79's stream shape). Costs a
    /// clone of the message per event; consumers that keep their own snapshot leave it off.
    pub include_partial: bool,
    /// Called around the HTTP exchange when set.
    pub hooks: Option<std::sync::Arc<dyn RequestHooks>>,
    /// Where the cloud APIs read their settings and ambient credentials (Azure's resource,
    /// Vertex's project and key file, AWS's keys and profile files): the process environment
    /// unless a lookup is injected.
    pub env: ProviderEnv,
}

impl std::fmt::Debug for StreamOptions {
    // Hand-written so that the API key never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamOptions")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("max_tokens", &self.max_tokens)
            .field("reasoning", &self.reasoning)
            .field("idle_timeout", &self.idle_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .field("include_partial", &self.include_partial)
            .finish_non_exhaustive()
    }
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            api_key: None,
            max_tokens: None,
            temperature: None,
            reasoning: None,
            thinking_budgets: ThinkingBudgets::default(),
            session_id: None,
            cache_retention: CacheRetention::default(),
            headers: Vec::new(),
            cancel: CancellationToken::new(),
            idle_timeout: Duration::from_secs(300),
            request_timeout: None,
            idle_cap: IdleCap::default(),
            max_retries: 0,
            max_retry_delay: Duration::from_secs(60),
            include_partial: false,
            hooks: None,
            env: ProviderEnv::default(),
        }
    }
}

impl StreamOptions {
    /// The effective thinking level (`None` when off).
    pub(crate) fn thinking(&self) -> Option<ThinkingLevel> {
        self.reasoning.filter(|l| *l != ThinkingLevel::Off)
    }

    /// The API key, or the adapter's own error text when there is none.
    pub(crate) fn require_key(
        &self,
        missing: impl FnOnce() -> String,
    ) -> Result<String, ProviderError> {
        self.api_key
            .clone()
            .filter(|k| !k.is_empty())
            .ok_or_else(|| ProviderError::Config(missing()))
    }

    pub(crate) fn max_tokens_for(&self, model: &Model) -> u64 {
        self.max_tokens
            .unwrap_or_else(|| model.max_tokens.clamp(1, 32_000))
    }
}

/// A decoded piece of a provider stream; indices are positions in the message's content.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    /// The server acknowledged the request (for APIs with an explicit start event).
    Start,
    TextStart,
    TextDelta {
        index: usize,
        text: String,
    },
    TextSignature {
        index: usize,
        signature: String,
    },
    TextEnd {
        index: usize,
    },
    ThinkingStart {
        redacted: bool,
    },
    ThinkingDelta {
        index: usize,
        text: String,
    },
    ThinkingSignature {
        index: usize,
        signature: String,
        append: bool,
    },
    ThinkingEnd {
        index: usize,
    },
    ToolCallStart {
        id: String,
        name: String,
    },
    ToolCallDelta {
        index: usize,
        json: String,
    },
    ToolCallSignature {
        index: usize,
        signature: String,
    },
    ToolCallEnd {
        index: usize,
    },
    Usage(Usage),
    StopReason(StopReason),
    ResponseId(String),
    ResponseModel(String),
}

/// Whether to keep reading after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    Done,
}

/// One API's stream decoding.
pub(crate) trait Adapter: Send {
    /// Handles one SSE event.
    fn on_event(&mut self, event: SseEvent, ops: &mut Vec<Op>) -> Result<Flow, ProviderError>;
    /// The body ended: close open blocks, or fail if the reply is incomplete.
    fn on_end(&mut self, ops: &mut Vec<Op>) -> Result<(), ProviderError>;
}

/// A request ready to send.
pub(crate) struct HttpRequest {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// How an error status's body becomes the error text.
    pub errors: ErrorStyle,
    /// Credentials made for each attempt, after the body is final.
    pub auth: Option<std::sync::Arc<dyn Authorize>>,
    pub framing: Framing,
}

/// How an error response becomes the message pi would show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorStyle {
    /// `<status> <error.message>` (the OpenAI and Google SDKs).
    Message,
    /// `<status> <whole body>` (Anthropic's SDK prints the body).
    WholeBody,
    /// `Azure OpenAI API error (<status>): <status> <error.message>` (pi's Azure provider).
    Azure,
    /// `<kind>: <message>` from the `x-amzn-errortype` header (pi's Bedrock provider).
    Bedrock,
}

/// How the response body is cut into events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    Sse,
    /// `application/vnd.amazon.eventstream`: each message becomes an [`SseEvent`] (see
    /// [`event_stream`]).
    EventStream,
}

/// Adds the credentials of one attempt: called before every attempt, retries included, with
/// the body as it will be sent.
pub(crate) trait Authorize: Send + Sync {
    fn authorize<'a>(
        &'a self,
        client: &'a reqwest::Client,
        request: &'a HttpRequest,
        body: &'a [u8],
        options: &'a StreamOptions,
    ) -> futures_util::future::BoxFuture<'a, Result<Vec<(String, String)>, Failed>>;

    /// The server refused the credentials (401): whatever was cached for them is dropped,
    /// so that the next request makes new ones.
    fn rejected(&self) {}
}

impl HttpRequest {
    /// A POST of `body` as JSON to `path` below the model's base URL, with the model's and
    /// the caller's headers after the API's own `headers`.
    pub(crate) fn post_json(
        model: &Model,
        options: &StreamOptions,
        path: &str,
        mut headers: Vec<(String, String)>,
        body: &Value,
        whole_error_body: bool,
    ) -> Result<Self, ProviderError> {
        add_request_headers(&mut headers, model, options);
        let url = format!("{}{path}", model.base_url.trim_end_matches('/'));
        let errors = if whole_error_body {
            ErrorStyle::WholeBody
        } else {
            ErrorStyle::Message
        };
        Self::post_json_to(url, headers, body, errors)
    }

    /// A POST of `body` as JSON to `url` with exactly `headers`.
    pub(crate) fn post_json_to(
        url: String,
        headers: Vec<(String, String)>,
        body: &Value,
        errors: ErrorStyle,
    ) -> Result<Self, ProviderError> {
        Ok(Self {
            url,
            headers,
            body: serde_json::to_vec(body).map_err(|e| ProviderError::Config(e.to_string()))?,
            errors,
            auth: None,
            framing: Framing::Sse,
        })
    }
}

impl std::fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRequest")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

fn build(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<(HttpRequest, Box<dyn Adapter>), ProviderError> {
    match model.api.as_str() {
        "anthropic-messages" => anthropic::build(model, context, options),
        "openai-completions" => openai_completions::build(model, context, options),
        "openai-responses" => openai_responses::build(model, context, options),
        "azure-openai-responses" => azure_openai_responses::build(model, context, options),
        "google-generative-ai" => google::build(model, context, options),
        "google-vertex" => google_vertex::build(model, context, options),
        "bedrock-converse-stream" => bedrock::build(model, context, options),
        other => Err(ProviderError::Config(format!("Unsupported API: {other}"))),
    }
}

/// Appends the model's own headers, then the caller's (later ones win on the server side).
fn add_request_headers(
    headers: &mut Vec<(String, String)>,
    model: &Model,
    options: &StreamOptions,
) {
    if let Some(model_headers) = &model.headers {
        for (name, value) in model_headers {
            if let Some(value) = value.as_str() {
                headers.push((name.clone(), value.to_string()));
            }
        }
    }
    headers.extend(options.headers.iter().cloned());
}

/// Usage as APIs report it that count cached tokens inside the prompt and write no cache
/// (Gemini, OpenAI Responses): the cached part is taken out of `input`, and a `total` of 0,
/// which means the API left it out, becomes the sum.
pub(crate) fn usage_with_cached_prompt(prompt: u64, cached: u64, output: u64, total: u64) -> Usage {
    let input = prompt.saturating_sub(cached);
    Usage {
        input,
        output,
        cache_read: cached,
        total_tokens: match total {
            0 => input + output + cached,
            t => t,
        },
        ..Usage::default()
    }
}

/// A user message's blocks as the Anthropic and OpenAI Chat Completions APIs both take them:
/// empty text left out, text as `{"type":"text"}`, images in the API's own `image` shape.
pub(crate) fn user_blocks(
    blocks: &[UserContentBlock],
    image: fn(&str, &str) -> Value,
) -> Vec<Value> {
    blocks
        .iter()
        .filter_map(|b| match b {
            UserContentBlock::Text(t) if t.text.is_empty() => None,
            UserContentBlock::Text(t) => Some(serde_json::json!({"type": "text", "text": t.text})),
            UserContentBlock::Image(i) => Some(image(&i.mime_type, &i.data)),
        })
        .collect()
}

/// The OpenAI SDK's text for a missing key.
const OPENAI_KEY_MISSING: &str = "OpenAI API key is required. Set OPENAI_API_KEY environment variable or pass it as an argument.";

/// The headers both OpenAI APIs start from: JSON in, SSE out, the key as a bearer token.
pub(crate) fn openai_headers(
    options: &StreamOptions,
) -> Result<Vec<(String, String)>, ProviderError> {
    let key = options.require_key(|| OPENAI_KEY_MISSING.to_string())?;
    Ok(vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("accept".to_string(), "text/event-stream".to_string()),
        ("authorization".to_string(), format!("Bearer {key}")),
    ])
}

/// The HTTP client every provider request goes through (connection pooling, rustls).
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// The events of one streamed assistant message.
///
/// The reply is produced inside the consumer's own task: [`AssistantStream::next`] polls the
/// request's future whenever no event is waiting, and the future queues what each chunk gave
/// on a channel that is only ever read here. A spawned task would cost every paced delta a
/// second task's wake-up and poll, and the cold caches of both, for nothing: the consumer waits
/// on the reply anyway (issue 44; T134).
pub struct AssistantStream {
    rx: mpsc::Receiver<Box<AssistantMessageEvent>>,
    /// The request and its decoding, until it has sent its last event.
    producer: Option<Producer>,
}

type Producer = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

impl AssistantStream {
    /// The next event; `None` after `done`/`error`.
    pub async fn next(&mut self) -> Option<AssistantMessageEvent> {
        self.next_boxed().await.map(|event| *event)
    }

    /// [`AssistantStream::next`] as the event travelled: boxed, for a consumer that keeps
    /// it boxed (an `AgentEvent::MessageUpdate` holds it so).
    pub async fn next_boxed(&mut self) -> Option<Box<AssistantMessageEvent>> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    fn poll_next(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Box<AssistantMessageEvent>>> {
        use std::task::Poll;
        loop {
            if let Some(event) = self.queued() {
                return Poll::Ready(event);
            }
            let Some(producer) = self.producer.as_mut() else {
                return self.rx.poll_recv(cx);
            };
            if producer.as_mut().poll(cx).is_ready() {
                // Its sender is gone with it: what it queued is read, then `None`.
                self.producer = None;
                continue;
            }
            // Pending, woken by what it waits on (the socket, a timer, the channel's room);
            // not through the channel, which would wake this task for its own events.
            return self.queued().map_or(Poll::Pending, Poll::Ready);
        }
    }

    /// What the producer queued: an event, `None` once it is done and all is read, or
    /// nothing yet.
    fn queued(&mut self) -> Option<Option<Box<AssistantMessageEvent>>> {
        use tokio::sync::mpsc::error::TryRecvError;
        match self.rx.try_recv() {
            Ok(event) => Some(Some(event)),
            Err(TryRecvError::Disconnected) => Some(None),
            Err(TryRecvError::Empty) => None,
        }
    }

    /// Drains the stream and returns the final message (`stopReason` `error`/`aborted` on
    /// failure).
    pub async fn result(mut self) -> AssistantMessage {
        let mut last = None;
        while let Some(event) = self.next().await {
            match event {
                AssistantMessageEvent::Done { message, .. } => return message,
                AssistantMessageEvent::Error { error, .. } => return error,
                AssistantMessageEvent::Start { partial } => last = Some(partial),
                _ => {}
            }
        }
        let mut message = last.unwrap_or_else(empty_message);
        message.stop_reason = StopReason::Error;
        message.error_message = Some("The provider stream ended without a result".into());
        message
    }
}

/// A message without content, stamped now, that failed until something says otherwise.
fn empty_message() -> AssistantMessage {
    AssistantMessage {
        content: Vec::new(),
        api: String::new(),
        provider: String::new(),
        model: String::new(),
        usage: Usage::default(),
        stop_reason: StopReason::Error,
        timestamp: crate::now_ms(),
        response_id: None,
        response_model: None,
        diagnostics: None,
        error_message: None,
        retry_after_ms: None,
    }
}

/// Streams one assistant reply. Must be called inside a tokio runtime.
pub fn stream(
    client: &reqwest::Client,
    model: &Model,
    context: &Context,
    options: StreamOptions,
) -> AssistantStream {
    let (tx, rx) = mpsc::channel(256);
    let emitter = Emitter::new(model, tx, options.include_partial);
    let built = build(model, context, &options);
    let client = client.clone();
    let producer = Box::pin(async move {
        let mut emitter = emitter;
        let (request, adapter) = match built {
            Ok(built) => built,
            Err(err) => return emitter.fail(err).await,
        };
        let cancel = options.cancel.clone();
        match run(&client, request, adapter, &mut emitter, &options).await {
            Ok(()) => emitter.finish().await,
            Err(_) if cancel.is_cancelled() => emitter.fail(ProviderError::Aborted).await,
            Err(err) => emitter.fail(err).await,
        }
    });
    AssistantStream {
        rx,
        producer: Some(producer),
    }
}

/// Waits for `future`, failing on cancellation or when nothing happens for the idle timeout.
async fn guarded<T>(
    future: impl std::future::Future<Output = T>,
    options: &StreamOptions,
) -> Result<T, ProviderError> {
    within(future, options, options.idle_timeout).await
}

/// Waits for `future`, failing on cancellation or after `limit` of silence (never when it is
/// zero), or sooner once the options' [`IdleCap`] is tightened below it.
async fn within<T>(
    future: impl std::future::Future<Output = T>,
    options: &StreamOptions,
    limit: Duration,
) -> Result<T, ProviderError> {
    Waits::new(options, limit).wait(future).await
}

/// What a wait watches besides the awaited future: the run's cancellation, the silence limit
/// and its cap's changes. A response body's chunks are all waited for with one `Waits`, which
/// keeps them from chunk to chunk and only moves the timer on (a later deadline is a store, no
/// lock): made for each chunk, they cost a paced delta a new timer, a new `Notified` and a new
/// cancellation future, each registered and dropped again, ~1.5 K of its ~16 K instructions.
struct Waits<'o> {
    options: &'o StreamOptions,
    /// The configured limit, before the cap (zero: none).
    limit: Duration,
    cancelled: std::pin::Pin<Box<tokio_util::sync::WaitForCancellationFuture<'o>>>,
    changed: std::pin::Pin<Box<tokio::sync::futures::Notified<'o>>>,
    idle: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl<'o> Waits<'o> {
    fn new(options: &'o StreamOptions, limit: Duration) -> Self {
        Self {
            options,
            limit,
            cancelled: Box::pin(options.cancel.cancelled()),
            changed: options.idle_cap.changed(),
            idle: Box::pin(tokio::time::sleep(Duration::ZERO)),
        }
    }

    /// `future`'s output, unless the run is cancelled or the limit of silence, counted from
    /// now, passes first.
    async fn wait<T>(
        &mut self,
        future: impl std::future::Future<Output = T>,
    ) -> Result<T, ProviderError> {
        let started = tokio::time::Instant::now();
        tokio::pin!(future);
        loop {
            let limit = self.options.idle_cap.applied_to(self.limit);
            let timed = match started.checked_add(limit).filter(|_| !limit.is_zero()) {
                Some(at) => {
                    self.idle.as_mut().reset(at);
                    true
                }
                None => false,
            };
            tokio::select! {
                biased;
                () = &mut self.cancelled => return Err(ProviderError::Aborted),
                result = &mut future => return Ok(result),
                () = &mut self.idle, if timed => return Err(ProviderError::Idle(limit)),
                () = &mut self.changed => self.changed = self.options.idle_cap.changed(),
            }
        }
    }
}

/// How long the server may take to send its headers: the request timeout, and the idle
/// timeout too (pi's SDK timeout and undici's `headersTimeout` both run); zero is no limit.
fn headers_limit(options: &StreamOptions) -> Duration {
    let idle = options.idle_timeout;
    match options.request_timeout.filter(|t| !t.is_zero()) {
        Some(request) if idle.is_zero() => request,
        Some(request) => request.min(idle),
        None => idle,
    }
}

/// The wait before provider-level retry number `attempt` (0-based) when the server named
/// none: the SDKs' 0.5 s doubling up to 8 s, less up to a quarter of jitter.
fn backoff(attempt: u32) -> Duration {
    let seconds = (0.5 * 2f64.powi(i32::try_from(attempt).unwrap_or(i32::MAX))).min(8.0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let jitter = 1.0 - f64::from(nanos % 1000) / 1000.0 * 0.25;
    Duration::from_secs_f64(seconds * jitter)
}

/// A failed attempt at getting a streaming response.
pub(crate) struct Failed {
    pub error: ProviderError,
    /// Whether the SDKs would try again: connection errors, timeouts, 408, 409, 429, 5xx,
    /// or what an `x-should-retry` header says.
    pub retryable: bool,
}

/// Sends the request and waits for a successful status, retrying as the provider SDKs do
/// when `max_retries` allows (rpc §14 `retry.provider.*`).
async fn send(
    client: &reqwest::Client,
    request: &HttpRequest,
    body: bytes::Bytes,
    options: &StreamOptions,
) -> Result<reqwest::Response, ProviderError> {
    let mut attempt = 0;
    loop {
        let failed = match send_once(client, request, body.clone(), options).await {
            Ok(response) => return Ok(response),
            Err(failed) => failed,
        };
        if !failed.retryable || attempt >= options.max_retries {
            return Err(failed.error);
        }
        let asked = failed.error.retry_after();
        let cap = options.max_retry_delay;
        if let Some(wait) = asked
            && !cap.is_zero()
            && wait > cap
        {
            tracing::debug!("the server asks to wait {wait:?}, more than {cap:?}: not retried");
            return Err(failed.error);
        }
        let delay = asked.unwrap_or_else(|| backoff(attempt));
        attempt += 1;
        tracing::debug!(
            "provider request failed ({}); retry {attempt} of {} in {delay:?}",
            failed.error,
            options.max_retries
        );
        tokio::select! {
            biased;
            () = options.cancel.cancelled() => return Err(ProviderError::Aborted),
            () = tokio::time::sleep(delay) => {}
        }
    }
}

async fn send_once(
    client: &reqwest::Client,
    request: &HttpRequest,
    body: bytes::Bytes,
    options: &StreamOptions,
) -> Result<reqwest::Response, Failed> {
    let mut builder = client.post(&request.url);
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    if let Some(auth) = &request.auth {
        for (name, value) in auth.authorize(client, request, &body, options).await? {
            builder = builder.header(name, value);
        }
    }
    let builder = builder.body(body);
    let response = match within(builder.send(), options, headers_limit(options)).await {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => {
            return Err(Failed {
                error: ProviderError::Network(format!("Connection error: {}", describe(&e))),
                retryable: true,
            });
        }
        Err(error) => {
            let retryable = matches!(error, ProviderError::Idle(_));
            return Err(Failed { error, retryable });
        }
    };
    let status = response.status();
    if let Some(hooks) = &options.hooks {
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_string(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect();
        hooks.after_response(status.as_u16(), headers).await;
    }
    if status.is_success() {
        return Ok(response);
    }
    if status.as_u16() == 401
        && let Some(auth) = &request.auth
    {
        auth.rejected();
    }
    let retry_after = error::retry_after(response.headers());
    let headers = response.headers().clone();
    let retryable = match response
        .headers()
        .get("x-should-retry")
        .and_then(|v| v.to_str().ok())
    {
        Some("true") => true,
        Some("false") => false,
        _ => matches!(status.as_u16(), 408 | 409 | 429) || status.is_server_error(),
    };
    let body = match guarded(response.bytes(), options).await {
        Ok(body) => body.unwrap_or_default(),
        Err(error) => {
            return Err(Failed {
                error,
                retryable: false,
            });
        }
    };
    Err(Failed {
        error: ProviderError::from_response(
            request.errors,
            status.as_u16(),
            response_headers(&headers),
            &body,
            retry_after,
        ),
        retryable,
    })
}

/// The headers an error text may need (Bedrock names the error kind in one).
fn response_headers(headers: &reqwest::header::HeaderMap) -> error::ErrorHeaders {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    error::ErrorHeaders {
        amzn_error_type: get("x-amzn-errortype"),
    }
}

/// Cuts a response body into events, as its framing says.
enum BodyDecoder {
    Sse(SseDecoder),
    EventStream(event_stream::Decoder),
}

impl BodyDecoder {
    fn new(framing: Framing) -> Self {
        match framing {
            Framing::Sse => BodyDecoder::Sse(SseDecoder::new()),
            Framing::EventStream => BodyDecoder::EventStream(event_stream::Decoder::default()),
        }
    }

    fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, ProviderError> {
        match self {
            BodyDecoder::Sse(decoder) => decoder
                .feed(chunk)
                .map_err(|err| ProviderError::Network(err.to_string())),
            BodyDecoder::EventStream(decoder) => decoder.feed(chunk),
        }
    }
}

/// Describes a reqwest error with its causes (reqwest's own text is terse).
pub(crate) fn describe(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

async fn run(
    client: &reqwest::Client,
    mut request: HttpRequest,
    mut adapter: Box<dyn Adapter>,
    emitter: &mut Emitter,
    options: &StreamOptions,
) -> Result<(), ProviderError> {
    let mut body = std::mem::take(&mut request.body);
    if let Some(hooks) = &options.hooks {
        // Only with hooks: the body goes back to a value for them and out as text again.
        if let Ok(payload) = serde_json::from_slice::<Value>(&body) {
            let payload = hooks.before_request(payload).await;
            body =
                serde_json::to_vec(&payload).map_err(|e| ProviderError::Config(e.to_string()))?;
        }
    }
    let response = send(client, &request, bytes::Bytes::from(body), options).await?;
    emitter.responded();
    let mut body = response.bytes_stream();
    let mut decoder = BodyDecoder::new(request.framing);
    let mut ops = Vec::new();
    let mut waits = Waits::new(options, options.idle_timeout);
    loop {
        let chunk = match waits.wait(body.next()).await? {
            None => break,
            Some(Ok(chunk)) => chunk,
            Some(Err(err)) => {
                return Err(ProviderError::Network(format!(
                    "Connection lost while streaming: {}",
                    describe(&err)
                )));
            }
        };
        let events = decoder.feed(&chunk)?;
        for event in events {
            let flow = adapter.on_event(event, &mut ops)?;
            for op in ops.drain(..) {
                emitter.apply(op).await?;
            }
            if flow == Flow::Done {
                return finish_adapter(adapter.as_mut(), emitter, &mut ops).await;
            }
        }
        if !emitter.wanted() {
            return Err(ProviderError::Aborted);
        }
    }
    finish_adapter(adapter.as_mut(), emitter, &mut ops).await
}

async fn finish_adapter(
    adapter: &mut dyn Adapter,
    emitter: &mut Emitter,
    ops: &mut Vec<Op>,
) -> Result<(), ProviderError> {
    adapter.on_end(ops)?;
    for op in ops.drain(..) {
        emitter.apply(op).await?;
    }
    Ok(())
}
