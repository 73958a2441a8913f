//! The modes a prepared run is served in: RPC on stdin/stdout, ACP, the terminal UI and the
//! one-shot text and JSON modes. The last two and the terminal are clients of the RPC server
//! over in-process pipes (T111), so every mode runs the same session core.

use std::io;

use tau_rpc::ExitReason;

use crate::cli::{self, RunMode};
use crate::process::{redirect_stderr, restore_stderr};
use crate::startup::{Prepared, Run};
use crate::{WARNINGS, oneshot};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Serves the run in its mode; returns the process's exit code.
pub(crate) fn serve(prepared: Prepared) -> anyhow::Result<u8> {
    let Prepared { run, runtime } = prepared;
    let served = match run.mode {
        RunMode::Rpc => Ok((serve_rpc(run, &runtime), 0)),
        RunMode::Acp => serve_acp(run, &runtime).map(|reason| (reason, 0)),
        RunMode::Interactive => serve_terminal(run, &runtime),
        RunMode::Text | RunMode::Json => serve_one_shot(run, &runtime),
    };
    if let Ok((ExitReason::Signal(_), _)) = served {
        // The aborted run already killed its shells; this catches any that were still
        // starting, since the process exits without running their destructors.
        tau_tools::bash::kill_running_shells();
    }
    // The stdin reader thread may still be blocked in read(); do not wait for it.
    runtime.shutdown_background();
    // The bash overflow logs were for this run's client and model only.
    tau_tools::bash::remove_spill_files();
    let (reason, decided) = served?;
    Ok(match reason {
        ExitReason::InputClosed => decided,
        ExitReason::OutputFailed => 1,
        ExitReason::Signal(code) => u8::try_from(code).unwrap_or(1),
    })
}

fn serve_rpc(run: Run, runtime: &tokio::runtime::Runtime) -> ExitReason {
    let Run {
        extensions,
        session,
        cli,
        protocol_out,
        signals,
        ..
    } = run;
    let shape = match cli.message_updates {
        cli::MessageUpdates::Full => tau_rpc::UpdateShape::Full,
        cli::MessageUpdates::Lean => tau_rpc::UpdateShape::Lean,
    };
    let serving = tau_rpc::serve(
        io::stdin(),
        protocol_out,
        VERSION,
        shape,
        move |sink| session.into_session(sink),
        extensions.take(),
        signals.first(),
    );
    on_worker(runtime, "the RPC loop", serving).unwrap_or(ExitReason::OutputFailed)
}

/// Runs a front-end's loop on the runtime's worker rather than on this thread, so that it
/// shares the thread that carries the runs: the worker that decodes a reply's bytes carries
/// its events through the loop itself (one wake-up fewer per chunk, T131), and every record
/// is written from that one thread (T136). `None`, logged, when the loop panicked.
fn on_worker<F>(runtime: &tokio::runtime::Runtime, what: &str, serving: F) -> Option<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    match runtime.block_on(async { tokio::spawn(serving).await }) {
        Ok(output) => Some(output),
        Err(err) => {
            tracing::error!("{what} ended abnormally: {err}");
            None
        }
    }
}

fn serve_acp(run: Run, runtime: &tokio::runtime::Runtime) -> anyhow::Result<ExitReason> {
    let Run {
        extensions,
        acp_launcher,
        protocol_out,
        signals,
        ..
    } = run;
    let Some(launcher) = acp_launcher else {
        anyhow::bail!("the ACP launcher was not prepared");
    };
    let extensions = extensions.take().map(|loaded| tau_acp::AcpExtensions {
        set: loaded.set,
        actions: loaded.actions,
        outlet: loaded.outlet,
    });
    let serving = tau_acp::serve(
        io::stdin(),
        protocol_out,
        launcher,
        extensions,
        signals.first(),
    );
    Ok(match on_worker(runtime, "the ACP connection", serving) {
        Some(tau_acp::ExitReason::InputClosed) => ExitReason::InputClosed,
        Some(tau_acp::ExitReason::Signal(code)) => ExitReason::Signal(code),
        Some(tau_acp::ExitReason::OutputFailed) | None => ExitReason::OutputFailed,
    })
}

fn serve_terminal(run: Run, runtime: &tokio::runtime::Runtime) -> anyhow::Result<(ExitReason, u8)> {
    let Run {
        extensions,
        session,
        cli,
        prompts,
        agent_dir,
        cwd,
        listing_dir,
        resumed,
        theme,
        protocol_out,
        signals,
        ..
    } = run;
    let options = tau_tui::Options {
        cwd_label: home_relative(&cwd),
        history_file: Some(history_file(&agent_dir, &cwd)),
        cwd,
        session_dir: Some(listing_dir),
        show_history: resumed,
        resume: cli.resume,
        initial_prompt: prompts.into_iter().next().map(|p| p.text),
        warnings: WARNINGS.lock().map(|w| w.clone()).unwrap_or_default(),
        theme,
        version: VERSION.to_string(),
        no_model: (!session.has_model()).then(|| no_model_help(&agent_dir)),
    };
    // What tau and its extension processes write to stderr would land on the screen the UI
    // draws: it goes to a log file in the agent directory while the UI runs.
    let stderr_log = redirect_stderr(&agent_dir);
    // The UI gets pi's lean stream: it adds up the deltas itself.
    let served = serve_in_process(
        runtime,
        InProcess {
            extensions,
            session,
            signals,
            shape: tau_rpc::UpdateShape::Lean,
            thread: "tau-tui",
        },
        move |records, commands| tau_tui::run(records, commands, protocol_out, options),
    );
    restore_stderr(stderr_log);
    let (reason, code) = served?;
    match code {
        Ok(Ok(code)) => Ok((reason, code)),
        Ok(Err(e)) => anyhow::bail!("the terminal UI failed: {e}"),
        Err(_) => Ok((reason, 1)),
    }
}

fn serve_one_shot(run: Run, runtime: &tokio::runtime::Runtime) -> anyhow::Result<(ExitReason, u8)> {
    if !run.session.has_model() {
        anyhow::bail!(
            "No models available. Set a provider's API key in the environment (for example \
             ANTHROPIC_API_KEY or OPENAI_API_KEY), store one in auth.json, or add a model to \
             models.json in the agent directory."
        );
    }
    let Run {
        extensions,
        session,
        mode,
        prompts,
        header,
        protocol_out,
        signals,
        ..
    } = run;
    let driver = oneshot::Driver {
        output: match mode {
            RunMode::Json => oneshot::Output::Json,
            _ => oneshot::Output::Text,
        },
        prompts,
        header,
        progress: io::IsTerminal::is_terminal(&io::stderr()),
    };
    // The one-shot modes print pi's full event shape.
    let (reason, code) = serve_in_process(
        runtime,
        InProcess {
            extensions,
            session,
            signals,
            shape: tau_rpc::UpdateShape::Full,
            thread: "tau-oneshot",
        },
        move |records, commands| driver.drive(records, commands, protocol_out),
    )?;
    Ok((reason, code.unwrap_or(1)))
}

/// What a client in this process is served with.
struct InProcess {
    extensions: crate::extensions::Started,
    session: crate::startup::SessionParts,
    signals: crate::process::TerminationSignals,
    shape: tau_rpc::UpdateShape,
    thread: &'static str,
}

/// Serves the RPC protocol to a client of this process (the terminal, the one-shot modes:
/// T71, T111), which runs on a thread of its own over a pair of pipes; returns how serving
/// ended and what the client's thread returned.
fn serve_in_process<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    served: InProcess,
    client: impl FnOnce(io::PipeReader, io::PipeWriter) -> T + Send + 'static,
) -> io::Result<(ExitReason, std::thread::Result<T>)> {
    let (commands_in, commands_out) = io::pipe()?;
    let (records_in, records_out) = io::pipe()?;
    let driving = std::thread::Builder::new()
        .name(served.thread.into())
        .spawn(move || client(records_in, commands_out))?;
    let InProcess {
        extensions,
        session,
        signals,
        shape,
        ..
    } = served;
    let serving = tau_rpc::serve(
        commands_in,
        records_out,
        VERSION,
        shape,
        move |sink| session.into_session(sink),
        extensions.take(),
        signals.first(),
    );
    let reason =
        on_worker(runtime, "the in-process RPC loop", serving).unwrap_or(ExitReason::OutputFailed);
    Ok((reason, driving.join()))
}

/// What the terminal says when no model can answer: where tau looked, and the shortest ways
/// on (issue 48).
fn no_model_help(agent_dir: &std::path::Path) -> String {
    let agent = agent_dir.display();
    format!(
        "no model can answer yet: tau found no key for any provider. It looked in the \
         environment (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, OPENROUTER_API_KEY and \
         the other providers' variables), in {agent}/auth.json, and for models of your own in \
         {agent}/models.json.\nTo go on: set one variable and start tau again (export \
         ANTHROPIC_API_KEY=...), or type /login to store a key, or try tau without a key with \
         tau-mock-llm (README: \"tau-mock-llm: an LLM without a key\")."
    )
}

/// The folder as the terminal UI's footer shows it: `~/…` below the home directory.
fn home_relative(cwd: &std::path::Path) -> String {
    match std::env::var_os("HOME").map(std::path::PathBuf::from) {
        Some(home) if cwd.starts_with(&home) && home.as_os_str().len() > 1 => format!(
            "~/{}",
            cwd.strip_prefix(&home)
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        )
        .trim_end_matches('/')
        .to_string(),
        _ => cwd.display().to_string(),
    }
}

/// The terminal UI's prompt history for this folder (one file per folder, in the agent
/// directory, named as the folder's default session directory is).
fn history_file(agent_dir: &std::path::Path, cwd: &std::path::Path) -> std::path::PathBuf {
    let sessions = tau_store::paths::default_session_dir(agent_dir, cwd);
    let name = sessions
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "default".into());
    agent_dir.join("history").join(format!("{name}.jsonl"))
}
