//! A small MCP server for tau's tests, built on rmcp's server side: a tool for each kind of
//! result and fault the client must handle. Serves stdio by default; `--http <port>` serves
//! Streamable HTTP on 127.0.0.1 at `/mcp` and prints the URL as its first stdout line.
//!
//! Tools: `echo {text}`, `add {a,b}` (with `structuredContent`), `fail` (`isError`),
//! `slow {ms}` (progress every 10th of the time, honours cancellation), `image` (a 1x1
//! PNG), `resource` (an embedded text resource), `crash` (exits the process without
//! answering), `grow` (adds a tool `extra_<n>` and sends `tools/list_changed`), `stats`
//! (how many `notifications/cancelled` arrived), `bare` (an input schema without `type`),
//! and `dotted.name` (a name tau must sanitise). `tools/list` answers in pages of three.
//!
//! Prompts: `greet {name, style?}` (a user and an assistant message) and `picture` (a text
//! and a 1x1 PNG). `--http <port> --reject` answers every request 401 with the request's
//! headers echoed in the body: a server that repeats the secret it was sent. `--tools a,b`
//! lists only those tools. `--http <port> --oauth [--token-ttl <secs>]` requires OAuth and is
//! its own authorization server (`test_server/oauth.rs`).

// Not `mod oauth;`: a file beside this one would be taken for another binary.
#[path = "test_server/oauth.rs"]
mod oauth;

use std::borrow::Cow;
use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, GetPromptRequestParams, GetPromptResponse, GetPromptResult, ListPromptsResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptArgument,
    PromptMessage, Role, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};

const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
const PAGE_SIZE: usize = 3;

#[derive(Default)]
struct State {
    extra_tools: AtomicU32,
    cancelled: AtomicU32,
    cancelled_reasons: Mutex<Vec<String>>,
}

#[derive(Clone, Default)]
struct TestServer {
    state: Arc<State>,
    /// `--tools a,b`: list only these (a server every client accepts, for benchmarks: `bare`
    /// is refused whole by some SDKs).
    only: Arc<Option<Vec<String>>>,
}

fn schema(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn object_schema(properties: Value, required: &[&str]) -> Map<String, Value> {
    schema(json!({"type": "object", "properties": properties, "required": required}))
}

impl TestServer {
    fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            Tool::new(
                "echo",
                "Echoes its text",
                object_schema(json!({"text": {"type": "string"}}), &["text"]),
            ),
            Tool::new(
                "add",
                "Adds two numbers; the sum is also structured content",
                object_schema(
                    json!({"a": {"type": "number"}, "b": {"type": "number"}}),
                    &["a", "b"],
                ),
            ),
            Tool::new(
                "fail",
                "Always fails (isError)",
                object_schema(json!({}), &[]),
            ),
            Tool::new(
                "slow",
                "Waits ms milliseconds, reporting progress",
                object_schema(json!({"ms": {"type": "integer"}}), &["ms"]),
            ),
            Tool::new("image", "Returns a 1x1 PNG", object_schema(json!({}), &[])),
            Tool::new(
                "resource",
                "Returns an embedded text resource",
                object_schema(json!({}), &[]),
            ),
            Tool::new(
                "crash",
                "Exits the server without answering",
                object_schema(json!({}), &[]),
            ),
            Tool::new(
                "grow",
                "Adds a tool and announces tools/list_changed",
                object_schema(json!({}), &[]),
            ),
            Tool::new(
                "stats",
                "Counts the cancellations received",
                object_schema(json!({}), &[]),
            ),
            Tool::new(
                "bare",
                "Has an input schema without a type",
                schema(json!({"properties": {}})),
            ),
            Tool::new(
                "dotted.name",
                "Has a name with a dot",
                object_schema(json!({}), &[]),
            ),
        ];
        for index in 1..=self.state.extra_tools.load(Ordering::SeqCst) {
            tools.push(Tool::new(
                format!("extra_{index}"),
                "Added by grow",
                object_schema(json!({}), &[]),
            ));
        }
        if let Some(only) = self.only.as_ref() {
            tools.retain(|tool| only.iter().any(|name| name == tool.name.as_ref()));
        }
        tools
    }

    async fn slow(
        &self,
        arguments: &Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let ms = arguments.get("ms").and_then(Value::as_u64).unwrap_or(1000);
        let token = context.meta.get_progress_token();
        for step in 1..=10u32 {
            tokio::select! {
                () = context.ct.cancelled() => {
                    return Err(ErrorData::internal_error("cancelled", None));
                }
                () = tokio::time::sleep(Duration::from_millis(ms / 10)) => {}
            }
            if let Some(token) = &token {
                let progress = ProgressNotificationParam::new(token.clone(), f64::from(step))
                    .with_total(10.0)
                    .with_message(format!("step {step}"));
                let _ = context.peer.notify_progress(progress).await;
            }
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "slept {ms} ms"
        ))]))
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_prompts()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.tools();
        let start = match request.and_then(|request| request.cursor) {
            Some(cursor) => cursor
                .parse::<usize>()
                .map_err(|_| ErrorData::invalid_params("bad cursor", None))?,
            None => 0,
        };
        let end = (start + PAGE_SIZE).min(tools.len());
        let mut page = ListToolsResult::with_all_items(
            tools
                .get(start..end)
                .map(<[Tool]>::to_vec)
                .unwrap_or_default(),
        );
        if end < tools.len() {
            page.next_cursor = Some(end.to_string());
        }
        Ok(page)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(vec![
            Prompt::new(
                "greet",
                Some("Greets someone"),
                Some(vec![
                    PromptArgument::new("name").with_required(true),
                    PromptArgument::new("style"),
                ]),
            ),
            Prompt::new("picture", Some("Shows a pixel"), None),
        ]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let argument = |name: &str| {
            arguments
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let messages = match request.name.as_str() {
            "greet" => {
                let name = argument("name")
                    .ok_or_else(|| ErrorData::invalid_params("greet needs a name", None))?;
                let style = argument("style").unwrap_or_else(|| "plainly".to_string());
                vec![
                    PromptMessage::new_text(Role::User, format!("Greet {name} {style}.")),
                    PromptMessage::new_text(Role::Assistant, "I will greet them."),
                ]
            }
            "picture" => vec![
                PromptMessage::new_text(Role::User, "Describe this pixel."),
                PromptMessage::new(Role::User, ContentBlock::image(PNG_1X1, "image/png")),
            ],
            other => {
                return Err(ErrorData::invalid_params(
                    Cow::Owned(format!("unknown prompt {other}")),
                    None,
                ));
            }
        };
        Ok(GetPromptResult::new(messages).into())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            "echo" => {
                let text = arguments
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                CallToolResult::success(vec![ContentBlock::text(text.to_string())])
            }
            "add" => {
                let a = arguments.get("a").and_then(Value::as_f64).unwrap_or(0.0);
                let b = arguments.get("b").and_then(Value::as_f64).unwrap_or(0.0);
                CallToolResult::structured(json!({"sum": a + b}))
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text("this tool always fails")]),
            "slow" => self.slow(&arguments, &context).await?,
            "image" => CallToolResult::success(vec![
                ContentBlock::text("a pixel"),
                ContentBlock::image(PNG_1X1, "image/png"),
            ]),
            "resource" => CallToolResult::success(vec![ContentBlock::embedded_text(
                "test://note",
                "resource text",
            )]),
            "crash" => std::process::exit(3),
            "grow" => {
                let count = self.state.extra_tools.fetch_add(1, Ordering::SeqCst) + 1;
                let _ = context.peer.notify_tool_list_changed().await;
                CallToolResult::success(vec![ContentBlock::text(format!("{count} extra tools"))])
            }
            "stats" => {
                let reasons = self
                    .state
                    .cancelled_reasons
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                CallToolResult::structured(json!({
                    "cancelled": self.state.cancelled.load(Ordering::SeqCst),
                    "reasons": reasons,
                    "pid": std::process::id(),
                }))
            }
            "bare" | "dotted.name" => {
                CallToolResult::success(vec![ContentBlock::text(request.name.to_string())])
            }
            name if name.starts_with("extra_") => {
                CallToolResult::success(vec![ContentBlock::text(name.to_string())])
            }
            name => {
                return Err(ErrorData::invalid_params(
                    Cow::Owned(format!("unknown tool {name}")),
                    None,
                ));
            }
        };
        Ok(result.into())
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        self.state.cancelled.fetch_add(1, Ordering::SeqCst);
        self.state
            .cancelled_reasons
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(notification.reason.unwrap_or_default());
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut http_port = None;
    let mut reject = false;
    let mut only = None;
    let mut oauth = false;
    let mut token_ttl = Duration::from_secs(3600);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--http" => http_port = Some(args.next().ok_or("--http needs a port")?.parse::<u16>()?),
            "--reject" => reject = true,
            "--oauth" => oauth = true,
            "--token-ttl" => {
                let secs = args.next().ok_or("--token-ttl needs seconds")?;
                token_ttl = Duration::from_secs(secs.parse()?);
            }
            "--tools" => {
                let names = args.next().ok_or("--tools needs a list")?;
                only = Some(names.split(',').map(str::to_string).collect());
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let Some(port) = http_port else {
        let running = TestServer {
            state: Arc::default(),
            only: Arc::new(only),
        }
        .serve(rmcp::transport::stdio())
        .await?;
        running.waiting().await?;
        return Ok(());
    };
    let state = Arc::new(State::default());
    let only = Arc::new(only);
    let service = StreamableHttpService::new(
        move || {
            Ok(TestServer {
                state: state.clone(),
                only: only.clone(),
            })
        },
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let address = listener.local_addr()?;
    let router = if reject {
        axum::Router::new().fallback(|headers: axum::http::HeaderMap| async move {
            let echoed: Vec<String> = headers
                .iter()
                .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap_or("?")))
                .collect();
            (
                axum::http::StatusCode::UNAUTHORIZED,
                format!("rejected; you sent {}", echoed.join(", ")),
            )
        })
    } else if oauth {
        oauth::OAuth::new(format!("http://{address}"), token_ttl)
            .router(axum::Router::new().nest_service("/mcp", service))
    } else {
        axum::Router::new().nest_service("/mcp", service)
    };
    // Not the MCP stream in this mode: stdout only tells the test where to connect.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "http://{address}/mcp")?;
    stdout.flush()?;
    drop(stdout);
    axum::serve(listener, router).await?;
    Ok(())
}
