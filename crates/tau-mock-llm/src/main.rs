//! The `tau-mock-llm` binary: starts the mock on loopback, optionally loads a script and turns
//! rules on, prints its URL as one JSON line on stdout, and serves until SIGINT or SIGTERM.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use tau_mock_llm::{MockServer, load_script};

/// A scripted LLM server for tau's tests, demos and benchmarks.
///
/// Streams the wire formats of seven LLM APIs on 127.0.0.1: Anthropic Messages
/// (POST /v1/messages), OpenAI Chat Completions (POST /v1/chat/completions), OpenAI Responses
/// (POST /v1/responses), Google Generative AI
/// (POST /v1beta/models/MODEL:streamGenerateContent?alt=sse), Azure OpenAI
/// (POST /openai/v1/responses), Vertex AI
/// (POST /v1/projects/P/locations/L/publishers/google/models/MODEL:streamGenerateContent) and
/// Amazon Bedrock (POST /model/MODEL/converse-stream, binary event stream). Each request
/// consumes the next scripted reply; when the script runs out the request fails with HTTP 500
/// "mock script exhausted", or, with --rules, gets a deterministic answer built from the
/// request.
///
/// On start it prints one line, {"url":"http://127.0.0.1:PORT"}, then serves until SIGINT or
/// SIGTERM. Control endpoints script a running mock: POST /_mock/replies (a reply or an array
/// of replies), GET /_mock/requests, POST /_mock/reset, POST /_mock/rules {"enabled":bool}.
#[derive(Debug, Parser)]
#[command(name = "tau-mock-llm", version)]
struct Cli {
    /// Port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Loopback address to listen on (127.0.0.1, ::1, any 127.x.y.z).
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,
    /// JSON file holding a reply or an array of replies to queue at start.
    #[arg(long, value_name = "FILE.json")]
    script: Option<PathBuf>,
    /// Answer from built-in rules when the script is empty (tool result -> summary; "run X",
    /// "list files" or "!cmd" with a bash tool offered -> a bash call; else a friendly echo).
    #[arg(long)]
    rules: bool,
    /// Log every request to stderr.
    #[arg(long, short)]
    verbose: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = if cli.verbose {
        tracing::Level::INFO
    } else {
        tracing::Level::WARN
    };
    tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_max_level(level)
        .with_ansi(false)
        .with_target(false)
        .without_time()
        .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            let _ = writeln!(io::stderr().lock(), "Error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    if !cli.host.is_loopback() {
        return Err(format!(
            "--host must be a loopback address, not {}",
            cli.host
        ));
    }
    let script = match &cli.script {
        Some(path) => load_script(path).map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        let server = MockServer::start_on(SocketAddr::new(cli.host, cli.port))
            .await
            .map_err(|e| format!("cannot listen on {}:{}: {e}", cli.host, cli.port))?;
        server.push_all(script);
        server.set_rules(cli.rules);
        let line = serde_json::json!({"url": server.url()}).to_string();
        let mut out = io::stdout().lock();
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .map_err(|e| format!("cannot write to stdout: {e}"))?;
        drop(out);
        wait_for_signal().await;
        server.shutdown().await;
        Ok(())
    })
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
