//! The HTTP+SSE transport of MCP 2024-11-05 (`"type": "sse"`), as an rmcp client transport.
//! rmcp 3.x has a client for Streamable HTTP only, and servers built on the older SDKs still
//! speak only this one (decision T128).
//!
//! A GET opens the server's event stream. Its first `endpoint` event says where to POST each
//! message tau sends (relative to the stream's URL, on its origin); each `message` event is
//! one message from the server. The stream ending or failing ends the connection; closing or
//! dropping the transport drops the stream. Events are decoded by `tau-ai`'s decoder, the one
//! the providers' streams use.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{StatusCode, Url};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use tau_ai::provider::sse::{EventTooLarge, SseDecoder, SseEvent};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::config::HttpConfig;

/// Messages read ahead of rmcp's loop; the stream is not read further while they wait.
const READ_AHEAD: usize = 64;

/// Why the transport could not open or send. Never holds a header value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SseError {
    #[error("\"{0}\" is not a valid URL")]
    InvalidUrl(String),
    #[error("header \"{0}\" is not valid")]
    InvalidHeader(String),
    #[error("{0}")]
    Http(String),
    #[error("the server answered {0}")]
    Status(StatusCode),
    #[error("the server answered with {0}, not an event stream")]
    NotEventStream(String),
    #[error("the event stream ended before its endpoint event")]
    NoEndpoint,
    #[error("the endpoint \"{0}\" is not a valid URL")]
    InvalidEndpoint(String),
    #[error("the endpoint {0} is not on the server's origin")]
    ForeignEndpoint(String),
    #[error(transparent)]
    EventTooLarge(#[from] EventTooLarge),
    #[error("could not encode a message: {0}")]
    Encode(#[from] serde_json::Error),
}

impl From<reqwest::Error> for SseError {
    fn from(error: reqwest::Error) -> Self {
        // reqwest's own message says only "error sending request"; the reason is in its sources.
        let mut message = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        Self::Http(message)
    }
}

/// One open HTTP+SSE connection.
pub(crate) struct SseTransport {
    client: reqwest::Client,
    /// Where messages are posted (the `endpoint` event's URL).
    endpoint: Url,
    headers: HeaderMap,
    messages: mpsc::Receiver<ServerJsonRpcMessage>,
    /// Reads the event stream; aborting it drops the stream.
    reader: JoinHandle<()>,
}

impl SseTransport {
    /// [`SseTransport::connect`] within `deadline`, its failure as the server's message.
    pub(crate) async fn open(config: &HttpConfig, deadline: Duration) -> Result<Self, String> {
        match tokio::time::timeout(deadline, Self::connect(config)).await {
            Ok(Ok(transport)) => Ok(transport),
            Ok(Err(error)) => Err(format!("could not open the event stream: {error}")),
            Err(_) => Err(format!(
                "did not open the event stream within {} ms",
                deadline.as_millis()
            )),
        }
    }

    /// Opens the event stream and waits for its endpoint.
    pub(crate) async fn connect(config: &HttpConfig) -> Result<Self, SseError> {
        crate::connection::install_crypto_provider();
        let url = Url::parse(&config.url).map_err(|_| SseError::InvalidUrl(config.url.clone()))?;
        let headers = header_map(config)?;
        // Redirects stay on the origin, as the TypeScript SDK's do: the entry's headers go
        // only where the user pointed them (reqwest drops only `Authorization` and cookies).
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let home = attempt.previous().first().map(Url::origin);
            if attempt.previous().len() > 10 || home.as_ref() != Some(&attempt.url().origin()) {
                attempt.stop()
            } else {
                attempt.follow()
            }
        });
        let client = reqwest::Client::builder().redirect(redirects).build()?;
        let response = client
            .get(url.clone())
            .headers(headers.clone())
            .header(ACCEPT, "text/event-stream")
            .send()
            .await?;
        if !response.status().is_success() {
            return Err(SseError::Status(response.status()));
        }
        // A Streamable HTTP server answers a GET with JSON or an error; saying so beats
        // waiting for an endpoint that never comes.
        if let Some(kind) = response.headers().get(CONTENT_TYPE) {
            let kind = String::from_utf8_lossy(kind.as_bytes()).into_owned();
            if !kind
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
            {
                return Err(SseError::NotEventStream(kind));
            }
        }
        let mut events = EventReader::new(response.bytes_stream());
        let mut early = Vec::new();
        let endpoint = loop {
            let Some(event) = events.next().await? else {
                return Err(SseError::NoEndpoint);
            };
            match event.event.as_deref() {
                Some("endpoint") => break resolve_endpoint(&url, &event.data)?,
                // The endpoint comes first by the specification; a message before it is
                // still the server's and is kept.
                None => early.extend(decode(&event.data)),
                Some(_) => {}
            }
        };
        let (sender, messages) = mpsc::channel(READ_AHEAD);
        let reader = tokio::spawn(forward(events, early, sender));
        Ok(Self {
            client,
            endpoint,
            headers,
            messages,
            reader,
        })
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let request = serde_json::to_vec(&item).map(|body| {
            self.client
                .post(self.endpoint.clone())
                .headers(self.headers.clone())
                .header(CONTENT_TYPE, "application/json")
                .body(body)
        });
        async move {
            // The answer comes on the event stream; the POST only says whether the server
            // took the message (202, or 200 from some servers).
            let response = request?.send().await?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(SseError::Status(response.status()))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.messages.recv()
    }

    async fn close(&mut self) -> Result<(), SseError> {
        self.reader.abort();
        self.messages.close();
        Ok(())
    }
}

/// The entry's headers, marked sensitive so that no debug output shows them.
fn header_map(config: &HttpConfig) -> Result<HeaderMap, SseError> {
    let mut headers = HeaderMap::new();
    for (name, value) in &config.headers {
        let key = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| SseError::InvalidHeader(name.clone()))?;
        let mut value =
            HeaderValue::from_str(value).map_err(|_| SseError::InvalidHeader(name.clone()))?;
        value.set_sensitive(true);
        headers.insert(key, value);
    }
    Ok(headers)
}

/// The `endpoint` event's URL, relative to the stream's. One on another origin is refused:
/// tau's messages and the entry's headers go only where the user pointed it.
fn resolve_endpoint(stream: &Url, data: &str) -> Result<Url, SseError> {
    let endpoint = stream
        .join(data.trim())
        .map_err(|_| SseError::InvalidEndpoint(data.to_string()))?;
    if endpoint.origin() != stream.origin() {
        return Err(SseError::ForeignEndpoint(endpoint.to_string()));
    }
    Ok(endpoint)
}

/// A `message` event's JSON-RPC messages: one, or a batch (2024-11-05 allowed them). What is
/// not a message is skipped, as the other transports skip it.
fn decode(data: &str) -> Vec<ServerJsonRpcMessage> {
    let decoded = if data.trim_start().starts_with('[') {
        serde_json::from_str::<Vec<ServerJsonRpcMessage>>(data)
    } else {
        serde_json::from_str(data).map(|message| vec![message])
    };
    decoded.unwrap_or_else(|error| {
        tracing::warn!(%error, "skipped an MCP server event that is not a JSON-RPC message");
        Vec::new()
    })
}

/// The events of a body, in order, whatever its chunks.
struct EventReader<S> {
    body: Pin<Box<S>>,
    decoder: SseDecoder,
    pending: VecDeque<SseEvent>,
}

impl<S, B, E> EventReader<S>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    SseError: From<E>,
{
    fn new(body: S) -> Self {
        Self {
            body: Box::pin(body),
            decoder: SseDecoder::new(),
            pending: VecDeque::new(),
        }
    }

    /// The next event; `None` when the body ended.
    async fn next(&mut self) -> Result<Option<SseEvent>, SseError> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(Some(event));
            }
            match self.body.next().await {
                None => return Ok(None),
                Some(chunk) => self.pending.extend(self.decoder.feed(chunk?.as_ref())?),
            }
        }
    }
}

/// Passes the stream's messages to [`SseTransport::receive`] until the stream ends or fails,
/// or the transport is gone; dropping `sender` then ends rmcp's loop.
async fn forward<S, B, E>(
    mut events: EventReader<S>,
    early: Vec<ServerJsonRpcMessage>,
    sender: mpsc::Sender<ServerJsonRpcMessage>,
) where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    SseError: From<E>,
{
    for message in early {
        if sender.send(message).await.is_err() {
            return;
        }
    }
    loop {
        match events.next().await {
            Ok(Some(SseEvent { event: None, data })) => {
                for message in decode(&data) {
                    if sender.send(message).await.is_err() {
                        return;
                    }
                }
            }
            Ok(Some(SseEvent { event, .. })) => {
                tracing::debug!(?event, "ignored an MCP server event");
            }
            Ok(None) => {
                tracing::debug!("the MCP server's event stream ended");
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "the MCP server's event stream failed");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    use tokio::net::TcpListener;

    use super::*;
    use crate::config::HttpTransport;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn the_endpoint_is_resolved_against_the_streams_url_on_its_origin() {
        let stream = url("http://127.0.0.1:3001/mcp/sse?key=1");
        let resolved = |data: &str| resolve_endpoint(&stream, data).map(|url| url.to_string());
        assert_eq!(
            resolved("/message?sessionId=abc").unwrap(),
            "http://127.0.0.1:3001/message?sessionId=abc"
        );
        assert_eq!(
            resolved("messages?s=1\n").unwrap(),
            "http://127.0.0.1:3001/mcp/messages?s=1"
        );
        assert_eq!(
            resolved("http://127.0.0.1:3001/post").unwrap(),
            "http://127.0.0.1:3001/post"
        );
        for foreign in [
            "http://evil.example/post",
            "//evil.example/post",
            "http://127.0.0.1:3002/post",
            "https://127.0.0.1:3001/post",
        ] {
            assert!(
                matches!(
                    resolve_endpoint(&stream, foreign),
                    Err(SseError::ForeignEndpoint(_))
                ),
                "{foreign}"
            );
        }
        assert!(matches!(
            resolve_endpoint(&stream, "http://[::1"),
            Err(SseError::InvalidEndpoint(_))
        ));
    }

    #[test]
    fn a_message_event_holds_one_message_or_a_batch_and_anything_else_is_skipped() {
        let one = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        assert_eq!(decode(one).len(), 1);
        assert_eq!(decode(&format!("[{one},{one}]")).len(), 2);
        assert!(decode("not json").is_empty());
        assert!(decode(r#"{"hello":"there"}"#).is_empty());
    }

    proptest::proptest! {
        // The reader's events do not depend on how the body is cut into chunks.
        #[test]
        fn any_split_of_the_body_reads_the_same_events(cuts in proptest::collection::vec(0usize..160, 0..10)) {
            let body = "event: endpoint\r\ndata: /message?s=1\r\n\r\n: comment\n\
                        event: message\ndata: {\"a\":1}\n\ndata: {\"b\":\ndata: 2}\n\n";
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|cut| *cut < body.len()).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut start = 0;
            for cut in cuts.into_iter().chain([body.len()]) {
                chunks.push(Ok::<_, SseError>(body.as_bytes()[start..cut].to_vec()));
                start = cut;
            }
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let events = runtime.block_on(async {
                let mut reader = EventReader::new(futures_util::stream::iter(chunks));
                let mut events = Vec::new();
                while let Some(event) = reader.next().await.unwrap() {
                    events.push((event.event, event.data));
                }
                events
            });
            proptest::prop_assert_eq!(events, vec![
                (Some("endpoint".to_string()), "/message?s=1".to_string()),
                (None, "{\"a\":1}".to_string()),
                (None, "{\"b\":\n2}".to_string()),
            ]);
        }
    }

    /// What the test server got: each request's head (lower-cased) and body.
    type Seen = Arc<Mutex<Vec<(String, String)>>>;

    /// An HTTP/1.1 server for one event stream: a GET gets `stream_head` and then each text
    /// sent on the returned channel (the stream ends when the channel closes); each POST is
    /// answered `post_status`.
    async fn server(
        stream_head: &'static str,
        post_status: u16,
    ) -> (String, mpsc::UnboundedSender<String>, Seen) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/sse", listener.local_addr().unwrap());
        let (events, stream) = mpsc::unbounded_channel::<String>();
        let stream = Arc::new(tokio::sync::Mutex::new(Some(stream)));
        let seen: Seen = Arc::default();
        let requests = seen.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let stream = stream.clone();
                let seen = requests.clone();
                tokio::spawn(async move {
                    let (read, mut write) = socket.into_split();
                    let mut read = BufReader::new(read);
                    loop {
                        let mut head = String::new();
                        loop {
                            let mut line = String::new();
                            if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                                return;
                            }
                            if line == "\r\n" {
                                break;
                            }
                            head.push_str(&line.to_ascii_lowercase());
                        }
                        let length = head
                            .lines()
                            .find_map(|line| line.strip_prefix("content-length:"))
                            .map_or(0, |n| n.trim().parse().unwrap());
                        let mut body = vec![0; length];
                        read.read_exact(&mut body).await.unwrap();
                        seen.lock()
                            .unwrap()
                            .push((head.clone(), String::from_utf8(body).unwrap()));
                        if head.starts_with("get ") {
                            write.write_all(stream_head.as_bytes()).await.unwrap();
                            let Some(mut events) = stream.lock().await.take() else {
                                return;
                            };
                            while let Some(text) = events.recv().await {
                                if write.write_all(text.as_bytes()).await.is_err() {
                                    return;
                                }
                            }
                            return;
                        }
                        let answer = format!(
                            "HTTP/1.1 {post_status} X\r\ncontent-length: 8\r\n\r\nAccepted"
                        );
                        write.write_all(answer.as_bytes()).await.unwrap();
                    }
                });
            }
        });
        (url, events, seen)
    }

    const EVENT_STREAM: &str =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

    fn config(url: &str) -> HttpConfig {
        HttpConfig {
            url: url.to_string(),
            headers: BTreeMap::from([("X-Token".to_string(), "s3cret".to_string())]),
            transport: HttpTransport::Sse,
            oauth_client_id: None,
        }
    }

    fn ping() -> ClientJsonRpcMessage {
        serde_json::from_value(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"})).unwrap()
    }

    #[tokio::test]
    async fn messages_are_posted_to_the_endpoint_and_read_from_the_stream() {
        let (url, events, seen) = server(EVENT_STREAM, 202).await;
        events
            .send("event: endpoint\ndata: /message?sessionId=s1\n\n".into())
            .unwrap();
        let mut transport = SseTransport::connect(&config(&url)).await.unwrap();
        transport.send(ping()).await.unwrap();
        events
            .send("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n".into())
            .unwrap();
        let answer = transport.receive().await.unwrap();
        assert_eq!(
            serde_json::to_value(&answer).unwrap(),
            json!({"jsonrpc": "2.0", "id": 7, "result": {}})
        );
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2, "{seen:?}");
        let (get, _) = &seen[0];
        assert!(get.starts_with("get /sse "), "{get}");
        assert!(get.contains("accept: text/event-stream"), "{get}");
        assert!(get.contains("x-token: s3cret"), "{get}");
        let (post, body) = &seen[1];
        assert!(post.starts_with("post /message?sessionid=s1 "), "{post}");
        assert!(post.contains("x-token: s3cret"), "{post}");
        assert!(post.contains("content-type: application/json"), "{post}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(body).unwrap(),
            json!({"jsonrpc": "2.0", "id": 7, "method": "ping"})
        );
    }

    #[tokio::test]
    async fn an_error_status_fails_the_send() {
        let (url, events, _) = server(EVENT_STREAM, 500).await;
        events
            .send("event: endpoint\ndata: /message\n\n".into())
            .unwrap();
        let mut transport = SseTransport::connect(&config(&url)).await.unwrap();
        let error = transport.send(ping()).await.unwrap_err();
        assert!(
            matches!(error, SseError::Status(StatusCode::INTERNAL_SERVER_ERROR)),
            "{error}"
        );
    }

    #[tokio::test]
    async fn the_stream_ending_ends_the_messages() {
        let (url, events, _) = server(EVENT_STREAM, 202).await;
        events
            .send("event: endpoint\ndata: /message\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n".into())
            .unwrap();
        let mut transport = SseTransport::connect(&config(&url)).await.unwrap();
        drop(events);
        assert!(transport.receive().await.is_some());
        let end = tokio::time::timeout(Duration::from_secs(10), transport.receive()).await;
        assert!(matches!(end, Ok(None)));
    }

    #[tokio::test]
    async fn a_foreign_endpoint_or_redirect_a_missing_endpoint_and_a_response_that_is_no_stream_are_refused()
     {
        let (url, events, _) = server(EVENT_STREAM, 202).await;
        events
            .send("event: endpoint\ndata: http://evil.example/message\n\n".into())
            .unwrap();
        let error = SseTransport::connect(&config(&url)).await.err().unwrap();
        assert!(matches!(error, SseError::ForeignEndpoint(_)), "{error}");

        let (url, events, _) = server(EVENT_STREAM, 202).await;
        drop(events);
        let error = SseTransport::connect(&config(&url)).await.err().unwrap();
        assert!(matches!(error, SseError::NoEndpoint), "{error}");

        let elsewhere =
            "HTTP/1.1 307 X\r\nlocation: http://127.0.0.2:1/sse\r\ncontent-length: 0\r\n\r\n";
        let (url, _events, _) = server(elsewhere, 202).await;
        let error = SseTransport::connect(&config(&url)).await.err().unwrap();
        assert!(
            matches!(error, SseError::Status(StatusCode::TEMPORARY_REDIRECT)),
            "{error}"
        );

        let json = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n";
        let (url, _events, _) = server(json, 202).await;
        let error = SseTransport::connect(&config(&url)).await.err().unwrap();
        assert!(matches!(error, SseError::NotEventStream(_)), "{error}");

        let error = SseTransport::open(&config("no url"), Duration::from_secs(5))
            .await
            .err()
            .unwrap();
        assert_eq!(
            error,
            "could not open the event stream: \"no url\" is not a valid URL"
        );
    }
}
