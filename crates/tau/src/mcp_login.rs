//! `tau mcp login <server> [--no-browser]` and `tau mcp logout <server>`: OAuth for a remote
//! MCP server (decision T127), carried out by `tau_mcp::oauth`. The server is looked up in
//! the list a session would start (the user's settings, a trusted project's, `--mcp-config`
//! files). Everything said goes to stderr, the address to open included; `tau mcp` alone
//! prints the usage.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use tau_mcp::oauth::{AuthFile, LOGIN_WAIT, LoginOptions};
use tau_resources::settings::Settings;

const USAGE: &str = "Usage:
  tau mcp login <server> [--no-browser] [--mcp-config <file>] [--approve|--no-approve]
  tau mcp logout <server>

Authorize tau for an MCP server reached over HTTP that asks for OAuth, or forget its tokens.
The server is one of the configured mcpServers (settings, a trusted project's .mcp.json,
--mcp-config files). Login opens the authorization page in your browser and waits for it to
come back to tau; with --no-browser, or when no browser opens, open the printed address
yourself, and if that browser cannot reach this machine, paste the address it was sent to.
The tokens are kept in mcp-auth.json in the agent folder (mode 0600).

Options:
  --no-browser           Print the address instead of opening a browser
  --mcp-config <file>    Also read servers from this file (repeatable)
  -a, --approve          Trust the project for this command
  -na, --no-approve      Ignore the project for this command
";

/// The exit of `tau mcp …`, or `None` when the arguments are for a mode.
pub fn dispatch(args: &[OsString]) -> Option<ExitCode> {
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if words.first().map(String::as_str) != Some("mcp") {
        return None;
    }
    Some(match run(&words[1..]) {
        Ok(code) => code,
        Err(message) => {
            say(&format!("Error: {message}"));
            ExitCode::FAILURE
        }
    })
}

#[derive(Debug, Default)]
struct Parsed {
    server: Option<String>,
    no_browser: bool,
    trust: Option<bool>,
    files: Vec<PathBuf>,
    help: bool,
}

fn parse(command: &str, args: &[String]) -> Result<Parsed, String> {
    let mut parsed = Parsed::default();
    let mut args = args.iter();
    let login = command == "login";
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => parsed.help = true,
            "--no-browser" if login => parsed.no_browser = true,
            "-a" | "--approve" if login => parsed.trust = Some(true),
            "-na" | "--no-approve" if login => parsed.trust = Some(false),
            "--mcp-config" if login => match args.next() {
                Some(file) => parsed.files.push(PathBuf::from(file)),
                None => return Err(format!("Missing value for --mcp-config.\n{USAGE}")),
            },
            _ if arg.starts_with('-') => {
                return Err(format!(
                    "Unknown option {arg} for \"mcp {command}\".\n{USAGE}"
                ));
            }
            _ if parsed.server.is_none() => parsed.server = Some(arg.clone()),
            _ => return Err(format!("Unexpected argument {arg}.\n{USAGE}")),
        }
    }
    Ok(parsed)
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let command = match args.first().map(String::as_str) {
        None | Some("-h" | "--help" | "help") => {
            let _ = std::io::stdout().lock().write_all(USAGE.as_bytes());
            return Ok(ExitCode::SUCCESS);
        }
        Some(command @ ("login" | "logout")) => command,
        Some(other) => return Err(format!("Unknown command \"mcp {other}\".\n{USAGE}")),
    };
    let parsed = parse(command, &args[1..])?;
    if parsed.help {
        let _ = std::io::stdout().lock().write_all(USAGE.as_bytes());
        return Ok(ExitCode::SUCCESS);
    }
    let server = parsed
        .server
        .clone()
        .ok_or_else(|| format!("Missing server name.\n{USAGE}"))?;
    let agent_dir = tau_store::paths::agent_dir()
        .ok_or("cannot locate the agent directory: set TAU_AGENT_DIR or HOME")?;
    if command == "logout" {
        return logout(&agent_dir, &server);
    }
    login(&agent_dir, &server, &parsed)
}

/// Forgets the server's tokens; it need not be configured any more.
fn logout(agent_dir: &Path, server: &str) -> Result<ExitCode, String> {
    let file = AuthFile::in_dir(agent_dir);
    if file.remove(server).map_err(|e| e.to_string())? {
        say(&format!(
            "Removed the authorization of MCP server \"{server}\" from {}.",
            file.path().display()
        ));
    } else {
        say(&format!(
            "No authorization is stored for MCP server \"{server}\"."
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn login(agent_dir: &Path, name: &str, parsed: &Parsed) -> Result<ExitCode, String> {
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the working directory: {e}"))?;
    // The session's own rule: a project's servers only once it is trusted.
    let trusted = crate::packages::project_trusted(agent_dir, &cwd, parsed.trust, false);
    let settings = Settings::load_for(agent_dir, &cwd, trusted);
    for warning in settings.warnings() {
        say(&format!("Warning: {warning}"));
    }
    let files = crate::startup::mcp_config_files(&parsed.files, &cwd);
    let configured = tau_session::mcp::configured_servers(
        tau_session::mcp::McpSources {
            settings: &settings,
            cwd: &cwd,
            project_trusted: trusted,
            files: &files,
        },
        &tau_mcp::process_env,
    );
    for warning in &configured.warnings {
        say(&format!("Warning: {warning}"));
    }
    let server = configured
        .servers
        .iter()
        .find(|server| server.name == name)
        .ok_or_else(|| format!("no MCP server named \"{name}\" is configured"))?;
    let tau_mcp::ServerConfig::Http(http) = &server.config else {
        return Err(tau_mcp::oauth::OAuthError::NotHttp(name.to_string()).to_string());
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let login = tau_mcp::oauth::start_login(LoginOptions {
            server: name,
            http,
            agent_dir,
            client_name: "tau",
        })
        .await
        .map_err(|e| e.to_string())?;
        say(&format!(
            "To authorize tau for MCP server \"{name}\", open this address:\n\n  {}\n",
            login.authorization_url()
        ));
        if !parsed.no_browser {
            match open_browser(login.authorization_url()) {
                Ok(()) => say("Opened it in your browser."),
                Err(reason) => say(&format!("Could not open a browser ({reason}).")),
            }
        }
        say(&format!(
            "Waiting for the browser to come back to {} … If the browser runs on another \
             machine, paste the address it was sent to here and press Enter.",
            login.redirect_uri()
        ));
        let redirect = wait_for_redirect(&login).await?;
        login.finish(&redirect).await.map_err(|e| e.to_string())?;
        say(&format!(
            "Authorized: tau keeps the tokens of \"{name}\" in {}.",
            AuthFile::in_dir(agent_dir).path().display()
        ));
        Ok(ExitCode::SUCCESS)
    })
}

/// The redirected address: from the listener, or a line pasted on stdin (a browser on
/// another machine cannot reach the listener), whichever comes first.
async fn wait_for_redirect(login: &tau_mcp::oauth::Login) -> Result<String, String> {
    let (pasted_tx, mut pasted) = tokio::sync::mpsc::unbounded_channel::<String>();
    // A thread, not a task: reading stdin blocks, and the process ends without waiting for it.
    std::thread::spawn(move || {
        let mut line = String::new();
        while std::io::stdin()
            .read_line(&mut line)
            .is_ok_and(|read| read > 0)
        {
            if line.contains("code=") || line.contains("error=") {
                let _ = pasted_tx.send(std::mem::take(&mut line));
            } else {
                line.clear();
            }
        }
    });
    // A mistyped paste is said and waited past; a refusal ends the login.
    let from_stdin = async {
        loop {
            let Some(line) = pasted.recv().await else {
                // Closed stdin: only the listener is left.
                return std::future::pending().await;
            };
            match login.check_redirect(&line) {
                Ok(redirect) => return Ok(redirect),
                Err(error @ tau_mcp::oauth::OAuthError::Denied(_)) => return Err(error.to_string()),
                Err(error) => say(&format!(
                    "{error}; paste the address the browser was sent to."
                )),
            }
        }
    };
    let waited = tokio::time::timeout(LOGIN_WAIT, async {
        tokio::select! {
            redirect = login.wait_for_redirect() => redirect.map_err(|e| e.to_string()),
            line = from_stdin => line,
        }
    })
    .await;
    match waited {
        Ok(redirect) => redirect,
        Err(_) => Err(tau_mcp::oauth::OAuthError::TimedOut(LOGIN_WAIT).to_string()),
    }
}

/// Opens `url` with the desktop's opener; an error when there is none or it fails at once.
fn open_browser(url: &str) -> Result<(), String> {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let mut child = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("{opener}: {e}"))?;
    // xdg-open without a desktop fails at once; a browser it starts may keep it running.
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < deadline {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("{opener} exited with {status}")),
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("{opener}: {e}")),
        }
    }
    Ok(())
}

fn say(text: &str) {
    let _ = writeln!(
        std::io::stderr().lock(),
        "{}",
        crate::oneshot::for_terminal(text, false)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn login_and_logout_arguments() {
        let parsed = parse(
            "login",
            &words(&["srv", "--no-browser", "--mcp-config", "a.json", "-a"]),
        )
        .unwrap();
        assert_eq!(parsed.server.as_deref(), Some("srv"));
        assert!(parsed.no_browser);
        assert_eq!(parsed.trust, Some(true));
        assert_eq!(parsed.files, vec![PathBuf::from("a.json")]);
        assert!(parse("login", &words(&["a", "b"])).is_err());
        assert!(parse("login", &words(&["--mcp-config"])).is_err());
        assert!(parse("logout", &words(&["srv", "--no-browser"])).is_err());
        assert!(dispatch(&[OsString::from("install")]).is_none());
    }
}
