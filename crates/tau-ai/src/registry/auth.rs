//! Credentials: `auth.json`, the per-provider environment variables, and the resolution of
//! configured values (`!command`, environment variable name, or literal). Secrets live in
//! types whose `Debug` never shows them.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tau_base::bounded::BoundedReadError;

/// How long a `!command` may run before it counts as failed (pi's limit).
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// A resolved API key. It is never logged: `Debug` redacts it and there is no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key itself, for the one place that needs it: the request to the provider.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// A configured value as written in `auth.json` or `models.json` (`!cmd`, an environment
/// variable name, or a literal). It may be a literal secret, so `Debug` redacts it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ConfigValue(pub(crate) String);

impl fmt::Debug for ConfigValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl ConfigValue {
    /// The shell command, when the value is `!command`.
    pub(crate) fn command(&self) -> Option<&str> {
        self.0.strip_prefix('!')
    }
}

/// One `auth.json` entry.
#[derive(Debug, Clone)]
pub(crate) enum Credential {
    ApiKey(ConfigValue),
    /// A subscription login made with pi (`"type":"oauth"`): its access token is used while
    /// it is valid; tau does not refresh it (decision T73).
    OAuth {
        access: Option<String>,
        /// When the access token stops working, in ms since the epoch.
        expires: Option<i64>,
    },
    /// An entry of another or malformed type: present, so it counts as configured, as in pi,
    /// but it yields no key.
    Other,
}

/// The parsed `auth.json`.
#[derive(Debug, Default)]
pub(crate) struct AuthFile {
    pub(crate) entries: HashMap<String, Credential>,
}

/// Reads `auth.json`. A missing file is an empty one; an unreadable or malformed file is
/// reported and treated as empty so that environment keys keep working.
pub(crate) fn load_auth_file(path: &Path) -> (AuthFile, Option<String>) {
    // A link in the agent folder can lead to a FIFO or a device: neither is waited on.
    let text = match tau_base::bounded::read_to_string(path, tau_base::bounded::CONFIG_CAP) {
        Ok(text) => text,
        Err(BoundedReadError::NotFound) => {
            return (AuthFile::default(), None);
        }
        Err(err) => {
            if matches!(
                err,
                BoundedReadError::NotRegular { .. } | BoundedReadError::TooLarge { .. }
            ) {
                // Said here: nothing else reports why `auth.json` was ignored, and without
                // this the user's keys are silently gone.
                tracing::warn!("ignoring {}: {err}", path.display());
            }
            return (
                AuthFile::default(),
                Some(format!(
                    "Failed to load auth.json: {err}\n\nFile: {}",
                    path.display()
                )),
            );
        }
    };
    if text.trim().is_empty() {
        return (AuthFile::default(), None);
    }
    let value: Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(err) => {
            return (
                AuthFile::default(),
                Some(format!(
                    "Failed to parse auth.json: {err}\n\nFile: {}",
                    path.display()
                )),
            );
        }
    };
    let Value::Object(map) = value else {
        return (
            AuthFile::default(),
            Some(format!(
                "Failed to load auth.json: expected an object of providers\n\nFile: {}",
                path.display()
            )),
        );
    };
    let entries = map
        .into_iter()
        .filter(|(_, entry)| !entry.is_null())
        .map(|(provider, entry)| {
            let credential = match entry.get("type").and_then(Value::as_str) {
                Some("api_key") => match entry.get("key").and_then(Value::as_str) {
                    Some(key) => Credential::ApiKey(ConfigValue(key.to_string())),
                    None => Credential::Other,
                },
                Some("oauth") => Credential::OAuth {
                    access: entry
                        .get("access")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    expires: entry.get("expires").and_then(Value::as_i64),
                },
                _ => Credential::Other,
            };
            (provider, credential)
        })
        .collect();
    (AuthFile { entries }, None)
}

/// The environment variables that hold a provider's key, in order of precedence
/// (tools-resources §7.3, plus the providers pi 0.79 added).
pub fn env_vars_for(provider: &str) -> &'static [&'static str] {
    match provider {
        "anthropic" => &["ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"],
        "github-copilot" => &["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"],
        "openai" => &["OPENAI_API_KEY"],
        "azure-openai-responses" => &["AZURE_OPENAI_API_KEY"],
        "ant-ling" => &["ANT_LING_API_KEY"],
        "nvidia" => &["NVIDIA_API_KEY"],
        "deepseek" => &["DEEPSEEK_API_KEY"],
        "google" => &["GEMINI_API_KEY"],
        "google-vertex" => &["GOOGLE_CLOUD_API_KEY"],
        "groq" => &["GROQ_API_KEY"],
        "cerebras" => &["CEREBRAS_API_KEY"],
        "xai" => &["XAI_API_KEY"],
        "openrouter" => &["OPENROUTER_API_KEY"],
        "vercel-ai-gateway" => &["AI_GATEWAY_API_KEY"],
        "zai" => &["ZAI_API_KEY"],
        "zai-coding-cn" => &["ZAI_CODING_CN_API_KEY"],
        "mistral" => &["MISTRAL_API_KEY"],
        "minimax" => &["MINIMAX_API_KEY"],
        "minimax-cn" => &["MINIMAX_CN_API_KEY"],
        "moonshotai" | "moonshotai-cn" => &["MOONSHOT_API_KEY"],
        "huggingface" => &["HF_TOKEN"],
        "fireworks" => &["FIREWORKS_API_KEY"],
        "together" => &["TOGETHER_API_KEY"],
        "opencode" | "opencode-go" => &["OPENCODE_API_KEY"],
        "kimi-coding" => &["KIMI_API_KEY"],
        "cloudflare-workers-ai" | "cloudflare-ai-gateway" => &["CLOUDFLARE_API_KEY"],
        "xiaomi" => &["XIAOMI_API_KEY"],
        "xiaomi-token-plan-cn" => &["XIAOMI_TOKEN_PLAN_CN_API_KEY"],
        "xiaomi-token-plan-ams" => &["XIAOMI_TOKEN_PLAN_AMS_API_KEY"],
        "xiaomi-token-plan-sgp" => &["XIAOMI_TOKEN_PLAN_SGP_API_KEY"],
        _ => &[],
    }
}

/// The key pi's `getEnvApiKey` gives a provider whose credentials are ambient (Vertex's
/// Application Default Credentials, AWS's chain): the provider itself finds the real ones.
pub const AMBIENT_KEY: &str = "<authenticated>";

/// Whether `provider` has ambient credentials as pi decides it: for `google-vertex` an ADC
/// file that exists (`GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's under `HOME`) with a
/// project and a location; for `amazon-bedrock` any of the variables the AWS chain starts
/// from. `env` answers non-empty values only.
pub(crate) fn has_ambient_credentials(
    provider: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> bool {
    match provider {
        "google-vertex" => {
            let file = env("GOOGLE_APPLICATION_CREDENTIALS")
                .map(std::path::PathBuf::from)
                .or_else(|| {
                    env("HOME").map(|home| {
                        Path::new(&home).join(".config/gcloud/application_default_credentials.json")
                    })
                });
            file.is_some_and(|f| f.exists())
                && (env("GOOGLE_CLOUD_PROJECT").is_some() || env("GCLOUD_PROJECT").is_some())
                && env("GOOGLE_CLOUD_LOCATION").is_some()
        }
        "amazon-bedrock" => {
            env("AWS_PROFILE").is_some()
                || (env("AWS_ACCESS_KEY_ID").is_some() && env("AWS_SECRET_ACCESS_KEY").is_some())
                || [
                    "AWS_BEARER_TOKEN_BEDROCK",
                    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                    "AWS_WEB_IDENTITY_TOKEN_FILE",
                ]
                .iter()
                .any(|name| env(name).is_some())
        }
        _ => false,
    }
}

/// Resolves a configured value that is not a command: the environment variable of that exact
/// name when it is set and non-empty, else the literal. Empty results count as nothing.
pub(crate) fn resolve_plain(value: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    env(value)
        .filter(|v| !v.is_empty())
        .or_else(|| Some(value.to_string()))
        .filter(|v| !v.is_empty())
}

/// Runs `command` with `sh -c` in `dir`, stdin closed and stderr discarded, and returns its
/// trimmed stdout. A failed start, a non-zero exit, a timeout or empty output all give `None`.
/// `dir` is the agent folder the command was configured in, never the project: a relative
/// name in the user's command (or a relative `PATH` entry) must not find a cloned
/// repository's file (docs/security.md).
pub(crate) fn run_shell(command: &str, dir: &std::path::Path, timeout: Duration) -> Option<String> {
    let mut shell = Command::new("sh");
    shell.arg("-c").arg(command);
    if dir.is_dir() {
        shell.current_dir(dir);
    }
    let mut child = shell
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    // Reading on a thread keeps a chatty command from blocking on a full pipe while we wait
    // for it to exit.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let result = stdout.read_to_end(&mut buf).map(|_| buf);
        let _ = tx.send(result);
    });

    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
        let now = Instant::now();
        if now >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            tracing::debug!("a configured shell command timed out after {timeout:?}");
            return None;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    };
    if !status.success() {
        return None;
    }
    // A background process that inherited stdout could keep the pipe open past the exit; the
    // deadline bounds that wait too.
    let remaining = deadline.saturating_duration_since(Instant::now());
    let output = rx.recv_timeout(remaining).ok()?.ok()?;
    let text = String::from_utf8_lossy(&output).trim().to_string();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_secrets() {
        let key = ApiKey::new("sk-secret-123");
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        assert_eq!(key.expose(), "sk-secret-123");
        let value = ConfigValue("sk-secret-123".into());
        assert!(!format!("{value:?}").contains("secret"));
        let cred = Credential::ApiKey(value);
        assert!(!format!("{cred:?}").contains("secret"));
    }

    #[test]
    fn plain_values_prefer_an_env_var_of_that_name() {
        let env = |name: &str| match name {
            "MY_KEY" => Some("from-env".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        assert_eq!(resolve_plain("MY_KEY", &env).as_deref(), Some("from-env"));
        assert_eq!(resolve_plain("EMPTY", &env).as_deref(), Some("EMPTY"));
        assert_eq!(resolve_plain("sk-lit", &env).as_deref(), Some("sk-lit"));
        assert_eq!(resolve_plain("", &env), None);
    }

    #[test]
    fn shell_commands_give_trimmed_stdout_or_nothing() {
        assert_eq!(
            run_shell(
                "printf '  key-1 \\n\\n'",
                std::path::Path::new("/"),
                COMMAND_TIMEOUT
            )
            .as_deref(),
            Some("key-1")
        );
        assert_eq!(
            run_shell(
                "echo out; exit 3",
                std::path::Path::new("/"),
                COMMAND_TIMEOUT
            ),
            None
        );
        assert_eq!(
            run_shell("printf '   '", std::path::Path::new("/"), COMMAND_TIMEOUT),
            None
        );
        assert_eq!(
            run_shell("echo oops >&2", std::path::Path::new("/"), COMMAND_TIMEOUT),
            None
        );
        // stdin is closed: `cat` ends at once with nothing.
        assert_eq!(
            run_shell("cat", std::path::Path::new("/"), COMMAND_TIMEOUT),
            None
        );
    }

    #[test]
    fn shell_commands_time_out() {
        let start = Instant::now();
        assert_eq!(
            run_shell(
                "sleep 5; echo late",
                std::path::Path::new("/"),
                Duration::from_millis(200)
            ),
            None
        );
        assert!(start.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn auth_file_entries_are_classified() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        std::fs::write(
            &path,
            r#"{"openai":{"type":"api_key","key":"sk-1"},
                "anthropic":{"type":"oauth","refresh":"r","access":"a","expires":1},
                "groq":{"type":"weird"}}"#,
        )
        .unwrap();
        let (auth, err) = load_auth_file(&path);
        assert!(err.is_none());
        assert!(matches!(auth.entries["openai"], Credential::ApiKey(ref v) if v.0 == "sk-1"));
        assert!(matches!(
            auth.entries["anthropic"],
            Credential::OAuth { .. }
        ));
        assert!(matches!(auth.entries["groq"], Credential::Other));

        std::fs::write(&path, "{nope").unwrap();
        let (auth, err) = load_auth_file(&path);
        assert!(auth.entries.is_empty());
        assert!(err.unwrap().starts_with("Failed to parse auth.json: "));

        let (auth, err) = load_auth_file(&dir.path().join("missing.json"));
        assert!(auth.entries.is_empty() && err.is_none());
    }

    #[test]
    fn ambient_credentials_are_decided_as_pi_decides() {
        let dir = tempfile::tempdir().unwrap();
        let adc = dir.path().join(".config/gcloud");
        std::fs::create_dir_all(&adc).unwrap();
        std::fs::write(adc.join("application_default_credentials.json"), "{}").unwrap();
        let home = dir.path().display().to_string();
        let with = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect();
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            }
        };
        let vertex =
            |pairs: &[(&str, &str)]| has_ambient_credentials("google-vertex", &with(pairs));
        assert!(vertex(&[
            ("HOME", &home),
            ("GCLOUD_PROJECT", "p"),
            ("GOOGLE_CLOUD_LOCATION", "us-central1")
        ]));
        assert!(!vertex(&[("HOME", &home), ("GCLOUD_PROJECT", "p")]));
        assert!(!vertex(&[
            ("HOME", &home),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent.json"),
            ("GCLOUD_PROJECT", "p"),
            ("GOOGLE_CLOUD_LOCATION", "l")
        ]));
        let bedrock =
            |pairs: &[(&str, &str)]| has_ambient_credentials("amazon-bedrock", &with(pairs));
        assert!(bedrock(&[("AWS_PROFILE", "work")]));
        assert!(bedrock(&[
            ("AWS_ACCESS_KEY_ID", "a"),
            ("AWS_SECRET_ACCESS_KEY", "s")
        ]));
        assert!(!bedrock(&[("AWS_ACCESS_KEY_ID", "a")]));
        assert!(bedrock(&[("AWS_BEARER_TOKEN_BEDROCK", "k")]));
        assert!(!has_ambient_credentials(
            "openai",
            &with(&[("AWS_PROFILE", "x")])
        ));
    }

    #[test]
    fn a_command_runs_in_the_folder_it_was_configured_in() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(
            run_shell("pwd -P", dir.path(), COMMAND_TIMEOUT).as_deref(),
            Some(real.to_str().unwrap())
        );
    }
}
