//! Where tau keeps its files: the agent directory ([`agent_dir`]: `$TAU_AGENT_DIR`, pi's
//! `$PI_CODING_AGENT_DIR`, `~/.tau/agent`, a pi user's `~/.pi/agent`; decisions 14 and T84)
//! and pi's session-file naming inside it.

use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use tau_base::paths::{expand_tilde, home_dir};

/// Environment variable naming the agent directory.
pub const AGENT_DIR_ENV: &str = "TAU_AGENT_DIR";

/// pi's variable for the same folder: a pi client that sets it gets that folder in tau too.
pub const PI_AGENT_DIR_ENV: &str = "PI_CODING_AGENT_DIR";

/// The agent directory, first that applies: `$TAU_AGENT_DIR`, then `$PI_CODING_AGENT_DIR`
/// (both tilde-expanded, empty meaning unset); then `~/.tau/agent` if it exists; then a pi
/// user's `~/.pi/agent` if it exists (its settings, keys, models, extensions and sessions
/// are the user's, and tau reads and writes them in pi's formats); else `~/.tau/agent`.
pub fn agent_dir() -> Option<PathBuf> {
    for variable in [AGENT_DIR_ENV, PI_AGENT_DIR_ENV] {
        if let Ok(dir) = std::env::var(variable)
            && !dir.is_empty()
        {
            return Some(expand_tilde(&dir));
        }
    }
    let home = home_dir()?;
    let tau = home.join(".tau").join("agent");
    let pi = home.join(".pi").join("agent");
    Some(if !tau.is_dir() && pi.is_dir() {
        pi
    } else {
        tau
    })
}

/// pi's directory name for a working directory: one leading separator dropped, every `/`,
/// `\` and `:` replaced by `-`, wrapped in `--…--` (`/home/u/work` → `--home-u-work--`).
pub fn encode_cwd(cwd: &Path) -> String {
    let text = cwd.to_string_lossy();
    let trimmed = text
        .strip_prefix('/')
        .or_else(|| text.strip_prefix('\\'))
        .unwrap_or(&text);
    let encoded: String = trimmed
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("--{encoded}--")
}

/// Default session directory for `cwd`.
pub fn default_session_dir(agent_dir: &Path, cwd: &Path) -> PathBuf {
    agent_dir.join("sessions").join(encode_cwd(cwd))
}

/// `<ISO time with ':' and '.' as '-'>_<session id>.jsonl`.
pub fn session_file_name(created: DateTime<Utc>, session_id: &str) -> String {
    let stamp = iso_timestamp(created).replace([':', '.'], "-");
    format!("{stamp}_{session_id}.jsonl")
}

/// ISO-8601 in UTC with milliseconds and `Z`, as JavaScript's `toISOString`.
pub fn iso_timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_encoding_matches_pi() {
        assert_eq!(encode_cwd(Path::new("/home/u/work")), "--home-u-work--");
        assert_eq!(
            encode_cwd(Path::new("C:\\Users\\me\\p")),
            "--C--Users-me-p--"
        );
        assert_eq!(encode_cwd(Path::new("/")), "----");
    }

    #[test]
    fn file_name_matches_pi() {
        let at = DateTime::parse_from_rfc3339("2026-11-22T00:18:09.481Z")
            .unwrap()
            .to_utc();
        assert_eq!(
            session_file_name(at, "01a2009e-13c9-716f-9266-e01318c25d76"),
            "2026-11-22T00-18-09-481Z_01a2009e-13c9-716f-9266-e01318c25d76.jsonl"
        );
        assert_eq!(iso_timestamp(at), "2026-11-22T00:18:09.481Z");
    }
}
