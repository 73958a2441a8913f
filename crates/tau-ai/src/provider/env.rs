//! [`ProviderEnv`]: the environment the cloud providers read at request time (Azure's
//! resource and API version, Vertex's project, location and key file, AWS's keys, profile and
//! region), injectable so that tests never touch the process environment.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// An injected variable lookup.
type Lookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// Looks up environment variables for a provider request: the process environment by
/// default, or an injected lookup. Empty values count as unset, as in pi.
#[derive(Clone, Default)]
pub struct ProviderEnv(Option<Arc<Lookup>>);

impl ProviderEnv {
    /// An environment answered by `lookup` alone (the process environment is not consulted).
    pub fn new(lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        ProviderEnv(Some(Arc::new(lookup)))
    }

    /// The variable's value, `None` when unset or empty.
    pub fn get(&self, name: &str) -> Option<String> {
        let value = match &self.0 {
            Some(lookup) => lookup(name),
            None => std::env::var(name).ok(),
        };
        value.filter(|v| !v.is_empty())
    }

    /// The user's home folder (`HOME`), where the AWS and gcloud tools keep their files.
    pub(crate) fn home(&self) -> Option<PathBuf> {
        self.get("HOME").map(PathBuf::from)
    }
}

impl fmt::Debug for ProviderEnv {
    // The values are credentials: neither they nor the lookup are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Some(_) => "ProviderEnv(<injected>)",
            None => "ProviderEnv(<process>)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_values_are_unset_and_debug_hides_values() {
        let env = ProviderEnv::new(|name| match name {
            "SET" => Some("secret-value".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        });
        assert_eq!(env.get("SET").as_deref(), Some("secret-value"));
        assert_eq!(env.get("EMPTY"), None);
        assert_eq!(env.get("UNSET"), None);
        assert!(!format!("{env:?}").contains("secret"));
    }
}
