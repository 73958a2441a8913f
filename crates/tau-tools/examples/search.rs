//! Runs the in-process `grep`, `find` or `ls` tool once and prints its text, for benchmarks
//! against rg and fd (`bench/search.sh`) and for trying the tools by hand:
//!
//! ```sh
//! cargo run --release -p tau-tools --example search -- grep 'fn main' ~/src --limit 1000000
//! cargo run --release -p tau-tools --example search -- find '*.rs' ~/src
//! ```
//!
//! Options become tool arguments: `--limit N`, `--context N`, `--glob G`, `-i`
//! (`ignoreCase`), `--literal`; `--details` also writes the result's `details` to stderr. The
//! exit status is 1 when the tool reports an error.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::{Map, json};
use tau_protocol::UserContentBlock;
use tau_tools::ToolEnv;
use tau_tools::find::FindTool;
use tau_tools::grep::GrepTool;
use tau_tools::ls::LsTool;
use tokio_util::sync::CancellationToken;

const USAGE: &str = "usage: search grep|find <pattern> [dir] [--limit N] [--context N] [--glob G] [-i] [--literal] [--details]\n       search ls [dir] [--limit N] [--details]";

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "{message}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let mut args = std::env::args().skip(1);
    let tool = args.next().ok_or(USAGE)?;
    let mut arguments = Map::new();
    let mut positional = Vec::new();
    let mut show_details = false;
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--limit" => {
                let n: f64 = value("--limit")?
                    .parse()
                    .map_err(|_| "--limit: not a number")?;
                arguments.insert("limit".into(), json!(n));
            }
            "--context" => {
                let n: f64 = value("--context")?
                    .parse()
                    .map_err(|_| "--context: not a number")?;
                arguments.insert("context".into(), json!(n));
            }
            "--glob" => {
                arguments.insert("glob".into(), json!(value("--glob")?));
            }
            "-i" => {
                arguments.insert("ignoreCase".into(), json!(true));
            }
            "--literal" => {
                arguments.insert("literal".into(), json!(true));
            }
            "--details" => show_details = true,
            _ => positional.push(arg),
        }
    }
    let mut positional = positional.into_iter();
    if tool != "ls" {
        arguments.insert("pattern".into(), json!(positional.next().ok_or(USAGE)?));
    }
    if let Some(dir) = positional.next() {
        arguments.insert("path".into(), json!(dir));
    }

    let cwd = std::env::current_dir().map_err(|err| err.to_string())?;
    let env = Arc::new(ToolEnv::new(cwd, std::env::temp_dir()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|err| err.to_string())?;
    let cancel = CancellationToken::new();
    let result = runtime.block_on(async {
        match tool.as_str() {
            "grep" => GrepTool::new(env).run(&arguments, &cancel).await,
            "find" => FindTool::new(env).run(&arguments, &cancel).await,
            "ls" => LsTool::new(env).run(&arguments, &cancel).await,
            _ => Err(USAGE.to_string()),
        }
    });

    let mut out = std::io::stdout().lock();
    let (text, code) = match result {
        Ok(result) => {
            if show_details && let Some(details) = &result.details {
                let _ = writeln!(std::io::stderr(), "{details}");
            }
            let text: Vec<&str> = result
                .content
                .iter()
                .filter_map(|block| match block {
                    UserContentBlock::Text(text) => Some(text.text.as_str()),
                    UserContentBlock::Image(_) => None,
                })
                .collect();
            (text.join("\n"), ExitCode::SUCCESS)
        }
        Err(message) => (message, ExitCode::from(1)),
    };
    writeln!(out, "{text}").map_err(|err| err.to_string())?;
    Ok(code)
}
