//! The `tau` binary: reads the command line, then hands over to `startup` (everything a run
//! needs, in order) and `modes` (RPC, ACP, the terminal and the one-shot modes, all on the
//! same session core). Errors and warnings for the user go to stderr from here.

mod alloc_stats;
mod cli;
mod extensions;
mod list_models;
mod mcp_login;
mod modes;
mod oneshot;
mod packages;
mod process;
mod startup;

use std::io::{self, Write};
use std::process::ExitCode;

use crate::cli::{Invocation, RunOptions};

#[global_allocator]
static GLOBAL: alloc_stats::Counting = alloc_stats::Counting::new();

fn main() -> ExitCode {
    let stats_file = GLOBAL.start_from_env();
    let code = tau_main();
    if let Some(file) = stats_file
        && let Err(err) = std::fs::write(&file, GLOBAL.report())
    {
        warn(&format!("cannot write {}: {err}", file.display()));
    }
    code
}

fn tau_main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // Package commands and `--export` do their work and exit before any mode starts.
    if let Some(code) = packages::dispatch(&args) {
        return code;
    }
    // `tau mcp login|logout`: OAuth for remote MCP servers (T127).
    if let Some(code) = mcp_login::dispatch(&args) {
        return code;
    }
    let invocation = match cli::parse(args) {
        Ok(invocation) => invocation,
        Err(message) => return fail(&message),
    };
    let options = match invocation {
        Invocation::Print(text) => {
            // Help and version are the only things tau prints outside the protocol.
            let mut out = io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
            return ExitCode::SUCCESS;
        }
        Invocation::Run(options) => options,
    };
    init_logging(options.cli.verbose);
    for warning in &options.warnings {
        warn(warning);
    }
    match run(*options) {
        Ok(code) => ExitCode::from(code),
        Err(err) => fail(&format!("{err:#}")),
    }
}

/// Writes `Error: <message>` to stderr; exit status 1.
fn fail(message: &str) -> ExitCode {
    let mut err = io::stderr().lock();
    // Messages carry file names, package names and extension errors a project may have
    // chosen: no control sequence of theirs reaches the user's terminal.
    let _ = writeln!(err, "Error: {}", oneshot::for_terminal(message, false));
    ExitCode::FAILURE
}

/// Every warning written so far: the interactive session shows them too, since its screen
/// covers what was written before it started.
pub(crate) static WARNINGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Writes `Warning: <message>` to stderr and goes on.
pub(crate) fn warn(message: &str) {
    if let Ok(mut warnings) = WARNINGS.lock() {
        warnings.push(message.to_string());
    }
    let _ = writeln!(
        io::stderr().lock(),
        "Warning: {}",
        oneshot::for_terminal(message, false)
    );
}

fn init_logging(verbose: bool) {
    let default = if verbose { "info" } else { "warn" };
    let level = std::env::var("TAU_LOG")
        .ok()
        .and_then(|l| l.parse::<tracing::Level>().ok())
        .unwrap_or_else(|| default.parse().unwrap_or(tracing::Level::WARN));
    // rmcp logs what a server answered as it came (an HTTP 401's body echoing the headers it
    // was sent); tau-mcp reports every server failure itself, with the server's env and
    // header values hidden (decision T96), so rmcp's own lines are left out.
    let targets = tracing_subscriber::filter::Targets::new()
        .with_default(level)
        .with_target("rmcp", tracing_subscriber::filter::LevelFilter::OFF);
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_max_level(level)
        .with_ansi(false)
        .with_target(false)
        .without_time()
        .finish()
        .with(targets)
        .init();
}

/// Prepares the run, then serves it in its mode.
fn run(options: RunOptions) -> anyhow::Result<u8> {
    match startup::prepare(options)? {
        startup::Start::Done(code) => Ok(code),
        startup::Start::Serve(prepared) => modes::serve(*prepared),
    }
}
