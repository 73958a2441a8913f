//! Keeping a server's secrets out of what tau says about it (decision T96): its env values,
//! header values (and the words after the first, so `Bearer <token>` also hides a bare
//! `<token>`),
//! and whatever `${VAR}` expansion put into its entry. Every message tau makes about a
//! server (its failure, the tail of its stderr, a call's error) passes through
//! [`Redactor::redact`] before it reaches a state, an event, stderr or a tool result.

use std::borrow::Cow;

use crate::config::{McpServer, ServerConfig};

/// What a secret becomes in a message.
pub const REDACTED: &str = "[redacted]";

/// Values shorter than this are not hidden: `1`, `on` or `dev` are settings, not tokens, and
/// hiding them would garble every message that happens to hold them.
pub const MIN_SECRET_LEN: usize = 4;

/// The secret values of one server.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret holding another is replaced whole.
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl Redactor {
    /// The secrets of `server`'s entry.
    pub fn for_server(server: &McpServer) -> Self {
        let mut values: Vec<String> = server.expanded.clone();
        match &server.config {
            ServerConfig::Stdio(stdio) => values.extend(stdio.env.values().cloned()),
            ServerConfig::Http(http) => {
                for value in http.headers.values() {
                    values.push(value.clone());
                    // The words after the scheme (`Bearer`, `Basic`, …), which is no secret.
                    values.extend(value.split_whitespace().skip(1).map(str::to_string));
                }
            }
        }
        Self::new(values)
    }

    /// Hides each of `values` (those of at least [`MIN_SECRET_LEN`] characters).
    pub fn new<I, S>(values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut secrets: Vec<String> = values
            .into_iter()
            .map(Into::into)
            .map(|value| value.trim().to_string())
            .filter(|value| value.chars().count() >= MIN_SECRET_LEN)
            .collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Self { secrets }
    }

    /// `text` with every secret replaced by [`REDACTED`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
        out
    }

    /// [`Redactor::redact`] for an owned message.
    pub fn redact_owned(&self, text: String) -> String {
        match self.redact(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(redacted) => redacted,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::{HttpConfig, HttpTransport, StdioConfig};

    #[test]
    fn env_header_and_expanded_values_are_hidden_short_ones_are_not() {
        let stdio = McpServer {
            name: "s".into(),
            config: ServerConfig::Stdio(StdioConfig {
                command: "srv".into(),
                args: Vec::new(),
                env: BTreeMap::from([
                    ("TOKEN".to_string(), "tok-123456".to_string()),
                    ("DEBUG".to_string(), "1".to_string()),
                ]),
                cwd: None,
                inherit_env: Default::default(),
            }),
            expanded: vec!["from-var".into()],
            roots: true,
        };
        let redactor = Redactor::for_server(&stdio);
        assert_eq!(
            redactor.redact("tok-123456 and from-var, DEBUG=1"),
            "[redacted] and [redacted], DEBUG=1"
        );
        let http = McpServer::new(
            "h",
            ServerConfig::Http(HttpConfig {
                url: "https://example.com".into(),
                headers: BTreeMap::from([("Authorization".to_string(), "Bearer abc.def".into())]),
                transport: HttpTransport::StreamableHttp,
                oauth_client_id: None,
            }),
        );
        let redactor = Redactor::for_server(&http);
        assert_eq!(
            redactor.redact("got 'Bearer abc.def', token abc.def"),
            "got '[redacted]', token [redacted]"
        );
        assert_eq!(redactor.redact("Bearer"), "Bearer");
        assert!(matches!(redactor.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_secret_inside_another_is_hidden_whole() {
        let redactor = Redactor::new(["abcd", "xxabcdxx"]);
        assert_eq!(redactor.redact("xxabcdxx abcd"), "[redacted] [redacted]");
    }
}
