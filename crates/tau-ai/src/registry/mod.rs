//! The model registry: the built-in catalog, `models.json` custom providers and models,
//! API keys from `auth.json` and the environment, and model-pattern resolution
//! (tools-resources §7).
//!
//! A [`Registry`] does no work when it is built. The catalog is parsed and `models.json` and
//! `auth.json` are read the first time a question needs them, so that a process that never
//! looks at models keeps its cold start. Everything is synchronous; the only slow path is a
//! `!command` key, which runs for at most ten seconds.

mod auth;
mod catalog;
mod catalog_data;
mod matching;
mod models_json;
mod patch;
mod schema;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use globset::GlobBuilder;
use tau_protocol::{Model, ThinkingLevel};

pub use auth::{AMBIENT_KEY, ApiKey, env_vars_for};
pub(crate) use auth::{COMMAND_TIMEOUT, run_shell};
pub use catalog::{
    DEFAULT_MODEL_PER_PROVIDER, builtin_models, builtin_models_json, default_model_id,
};
pub use models_json::{Models, ModelsJsonError};
pub use patch::ModelPatch;

use auth::{AuthFile, ConfigValue, Credential};
use matching::{SuffixMode, parse_model_pattern, split_level_suffix};
use models_json::ProviderRequest;

/// Looks up an environment variable. Injected so that tests never touch the process
/// environment; [`Registry::from_process_env`] uses the real one.
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Why `--model`/`--provider` did not resolve. The texts are pi's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("No models available. Check your installation or add models to models.json.")]
    NoModels,
    #[error("Unknown provider \"{0}\". Use --list-models to see available providers/models.")]
    UnknownProvider(String),
    /// Carries what pi displays: `provider/pattern` when a provider is known, else the input.
    #[error("Model \"{0}\" not found. Use --list-models to see available models.")]
    ModelNotFound(String),
}

/// Why a key or request setting could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// `auth.json` holds a subscription login whose access token has expired (or is missing);
    /// refreshing it is pi's job (decision T73).
    #[error(
        "The {provider} login in auth.json has expired and tau does not refresh logins: run pi once to refresh it, or set an API key for {provider}"
    )]
    OAuthExpired { provider: String },
    /// A configured `!command` failed, timed out or printed nothing. `what` is e.g.
    /// `API key for provider "openai"` or `provider "openai" header "X-Key"`.
    #[error("Failed to resolve {what} from shell command: {command}")]
    Command { what: String, command: String },
    /// `authHeader: true` in `models.json` but no key anywhere.
    #[error("No API key found for \"{provider}\"")]
    NoKeyForAuthHeader { provider: String },
    /// A `{VAR}` placeholder in a Cloudflare base URL names an unset variable.
    #[error("{name} is required for provider {provider} but is not set.")]
    MissingBaseUrlVariable { name: String, provider: String },
}

/// A model chosen by `--model`, with the level from a `:level` suffix and pi's warning when
/// the model had to be synthesized.
#[derive(Debug, Clone, PartialEq)]
pub struct CliModel {
    pub model: Model,
    pub thinking_level: Option<ThinkingLevel>,
    pub warning: Option<String>,
}

/// One entry of the scoped-model list (`--models`, `enabledModels`).
#[derive(Debug, Clone, PartialEq)]
pub struct ScopedModel {
    pub model: Model,
    /// The level a `:level` suffix asked for.
    pub thinking_level: Option<ThinkingLevel>,
}

/// The scoped models and the warnings to print, worded as pi prints them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scope {
    pub models: Vec<ScopedModel>,
    pub warnings: Vec<String>,
}

/// What a provider request needs besides the model: the key, the extra headers (model, then
/// provider, then per-model headers from `models.json`, later winning) and the base URL with
/// any placeholders filled in.
#[derive(Clone, PartialEq, Eq)]
pub struct RequestConfig {
    pub api_key: Option<ApiKey>,
    pub headers: Vec<(String, String)>,
    pub base_url: String,
}

impl fmt::Debug for RequestConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values can carry credentials (`Authorization`), so only names are shown.
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("RequestConfig")
            .field("api_key", &self.api_key)
            .field("headers", &names)
            .field("base_url", &self.base_url)
            .finish()
    }
}

/// Everything read from disk, built on first use.
struct Loaded {
    models: Models,
    models_error: Option<ModelsJsonError>,
    auth: AuthFile,
    auth_error: Option<String>,
    requests: HashMap<String, ProviderRequest>,
    model_headers: HashMap<(String, String), Vec<(String, ConfigValue)>>,
}

/// The models tau knows and the credentials to use them.
pub struct Registry {
    agent_dir: PathBuf,
    env: EnvLookup,
    runtime_keys: HashMap<String, ApiKey>,
    /// `auth.json` command results live as long as the process (pi's rule); `models.json`
    /// commands run on every request.
    command_cache: Mutex<HashMap<String, Option<String>>>,
    command_timeout: Duration,
    /// Providers extensions registered (`pi.registerProvider`), in the order given; each is a
    /// models.json provider entry laid over the file's.
    extension_providers: Vec<(String, serde_json::Value)>,
    /// Extensions' changes to model objects, by provider and id, laid over every load.
    model_patches: Vec<((String, String), ModelPatch)>,
    loaded: OnceLock<Loaded>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut runtime: Vec<&str> = self.runtime_keys.keys().map(String::as_str).collect();
        runtime.sort_unstable();
        f.debug_struct("Registry")
            .field("agent_dir", &self.agent_dir)
            .field("loaded_models", &self.loaded.get().map(|l| l.models.len()))
            .field("runtime_key_providers", &runtime)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// A registry over `<agent_dir>/models.json` and `<agent_dir>/auth.json`, reading
    /// environment variables through `env`. Nothing is read until first use.
    pub fn new(
        agent_dir: impl Into<PathBuf>,
        env: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        Registry {
            agent_dir: agent_dir.into(),
            env: Arc::new(env),
            runtime_keys: HashMap::new(),
            command_cache: Mutex::new(HashMap::new()),
            command_timeout: COMMAND_TIMEOUT,
            extension_providers: Vec::new(),
            model_patches: Vec::new(),
            loaded: OnceLock::new(),
        }
    }

    /// A registry reading the process environment.
    pub fn from_process_env(agent_dir: impl Into<PathBuf>) -> Self {
        Self::new(agent_dir, |name| std::env::var(name).ok())
    }

    /// The agent directory this registry reads.
    pub fn agent_dir(&self) -> &Path {
        &self.agent_dir
    }

    /// Forgets what was read so that the next question re-reads `models.json` and
    /// `auth.json` (pi re-reads on `/model` and refresh). Runtime keys and cached command
    /// results stay.
    pub fn reload(&mut self) {
        self.loaded = OnceLock::new();
    }

    /// An extension's `registerProvider` (ext §2.5) with its data members: the same shape as a
    /// `models.json` provider entry (`models` replaces the provider's models, `baseUrl` alone
    /// moves the existing ones), checked on its own before it takes effect. A later call for
    /// the same name replaces the earlier one.
    pub fn register_provider(
        &mut self,
        name: &str,
        mut config: serde_json::Value,
    ) -> Result<(), ModelsJsonError> {
        if let serde_json::Value::Object(map) = &mut config {
            // pi's display name and the function members have no models.json counterpart.
            for key in ["name", "oauth", "streamSimple"] {
                map.remove(key);
            }
        }
        let document = serde_json::json!({ "providers": { name: config } });
        models_json::parse_value(document, &format!("provider \"{name}\""), builtin_models())?;
        self.extension_providers.retain(|(n, _)| n != name);
        self.extension_providers.push((name.to_string(), config));
        self.loaded = OnceLock::new();
        Ok(())
    }

    /// An extension's change to a model object in place (see [`ModelPatch`]); false when no
    /// model has this provider and id. Kept across reloads.
    pub fn patch_model(&mut self, provider: &str, id: &str, patch: &ModelPatch) -> bool {
        if self.find_any(provider, id).is_none() {
            return false;
        }
        let key = (provider.to_string(), id.to_string());
        match self.model_patches.iter_mut().find(|(k, _)| *k == key) {
            Some((_, earlier)) => earlier.merge(patch),
            None => self.model_patches.push((key, patch.clone())),
        }
        if let Some(loaded) = self.loaded.get_mut()
            && let Some(model) = loaded.models.find_mut(provider, id)
        {
            patch.apply(model);
        }
        true
    }

    /// `pi.unregisterProvider`: the provider's registration is forgotten (built-in models and
    /// `models.json` entries of that name stay).
    pub fn unregister_provider(&mut self, name: &str) {
        self.extension_providers.retain(|(n, _)| n != name);
        self.loaded = OnceLock::new();
    }

    /// Binds a `--api-key` to a provider for this process. It wins over every other source.
    pub fn set_runtime_api_key(&mut self, provider: &str, key: ApiKey) {
        self.runtime_keys.insert(provider.to_string(), key);
    }

    #[cfg(test)]
    fn with_command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    fn loaded(&self) -> &Loaded {
        self.loaded.get_or_init(|| {
            let builtins = builtin_models();
            let models_path = self.agent_dir.join("models.json");
            let extra = &self.extension_providers;
            let (custom, models_error) = match models_json::load(&models_path, builtins, extra) {
                Ok(custom) => (custom, None),
                Err(err) => (models_json::load_extra(builtins, extra), Some(err)),
            };
            let mut models = models_json::merge(builtins, custom.as_ref());
            for ((provider, id), patch) in &self.model_patches {
                if let Some(model) = models.find_mut(provider, id) {
                    patch.apply(model);
                }
            }
            let (requests, model_headers) = custom
                .map(|c| (c.requests, c.model_headers))
                .unwrap_or_default();
            let (auth, auth_error) = auth::load_auth_file(&self.agent_dir.join("auth.json"));
            Loaded {
                models,
                models_error,
                auth,
                auth_error,
                requests,
                model_headers,
            }
        })
    }

    /// Why `models.json` was ignored, for the caller to report. Built-in models are available
    /// regardless.
    pub fn models_json_error(&self) -> Option<&ModelsJsonError> {
        self.loaded().models_error.as_ref()
    }

    /// Why `auth.json` was ignored, if it was.
    pub fn auth_json_error(&self) -> Option<&str> {
        self.loaded().auth_error.as_deref()
    }

    /// Whether any provider could have credentials, decided without parsing the catalog: a
    /// runtime key, an `auth.json` or `models.json` file, or a provider key variable in the
    /// environment. When this is false no model is available, and a process that never
    /// selects one (`tau --mode rpc` answering `get_state`) skips the catalog entirely.
    pub fn may_have_credentials(&self) -> bool {
        if !self.runtime_keys.is_empty()
            || self.agent_dir.join("auth.json").exists()
            || self.agent_dir.join("models.json").exists()
        {
            return true;
        }
        DEFAULT_MODEL_PER_PROVIDER
            .iter()
            .flat_map(|(provider, _)| env_vars_for(provider))
            .any(|name| self.env_var(name).is_some())
            || ["google-vertex", "amazon-bedrock"]
                .iter()
                .any(|provider| self.has_ambient(provider))
    }

    /// Whether the provider's credentials are ambient ones (see [`AMBIENT_KEY`]).
    fn has_ambient(&self, provider: &str) -> bool {
        auth::has_ambient_credentials(provider, &|name| self.env_var(name))
    }

    /// Every model, built-in and custom, in registry order, with or without credentials.
    pub fn all_models(&self) -> &Models {
        &self.loaded().models
    }

    /// [`Registry::all_models`] as JSON text (extensions' `allModels`); the built-in catalog's
    /// text, made once per process, when nothing changed it. `None` if serialising failed,
    /// which plain data does not.
    pub fn all_models_json(&self) -> Option<Box<serde_json::value::RawValue>> {
        let models = &self.loaded().models;
        if models.is_builtin_catalog() {
            builtin_models_json().map(ToOwned::to_owned)
        } else {
            serde_json::value::to_raw_value(models).ok()
        }
    }

    /// The models whose provider has credentials configured, in registry order.
    pub fn available_models(&self) -> Vec<&Model> {
        // A provider's models are listed together: its verdict is kept while they pass,
        // rather than hashing every model's provider name (~800 of them).
        let mut verdicts: HashMap<&str, bool> = HashMap::new();
        let mut last: Option<(&str, bool)> = None;
        self.all_models()
            .iter()
            .filter(|m| {
                let provider = m.provider.as_str();
                if let Some((name, verdict)) = last
                    && name == provider
                {
                    return verdict;
                }
                let verdict = *verdicts
                    .entry(provider)
                    .or_insert_with(|| self.has_auth(provider));
                last = Some((provider, verdict));
                verdict
            })
            .collect()
    }

    /// The model with exactly this provider and id, if its provider has credentials (what
    /// RPC `set_model` may select).
    pub fn find(&self, provider: &str, id: &str) -> Option<&Model> {
        self.find_any(provider, id)
            .filter(|_| self.has_auth(provider))
    }

    /// The model with exactly this provider and id, credentials or not.
    pub fn find_any(&self, provider: &str, id: &str) -> Option<&Model> {
        self.all_models()
            .iter()
            .find(|m| m.provider == provider && m.id == id)
    }

    fn env_var(&self, name: &str) -> Option<String> {
        (self.env)(name).filter(|v| !v.is_empty())
    }

    /// Whether any credential is configured for `provider`: a runtime key, an `auth.json`
    /// entry (API key or login), a non-empty environment variable, ambient cloud credentials
    /// (Vertex's ADC, AWS's), or a `models.json` `apiKey`. Never runs a command, so it is
    /// cheap enough for listing models.
    pub fn has_auth(&self, provider: &str) -> bool {
        if self.runtime_keys.contains_key(provider) {
            return true;
        }
        let loaded = self.loaded();
        loaded.auth.entries.contains_key(provider)
            || env_vars_for(provider)
                .iter()
                .any(|v| self.env_var(v).is_some())
            || self.has_ambient(provider)
            || loaded
                .requests
                .get(provider)
                .is_some_and(|r| r.api_key.is_some())
    }

    /// The API key for `provider`, looked up in pi's order: runtime key, `auth.json` API key,
    /// `auth.json` login, environment (ambient cloud credentials give [`AMBIENT_KEY`]),
    /// `models.json` `apiKey`. `Ok(None)` when nothing is configured.
    pub fn api_key(&self, provider: &str) -> Result<Option<ApiKey>, KeyError> {
        if let Some(key) = self.runtime_keys.get(provider) {
            return Ok(Some(key.clone()));
        }
        let loaded = self.loaded();
        let what = || format!("API key for provider \"{provider}\"");
        let mut failed_command = None;
        match loaded.auth.entries.get(provider) {
            Some(Credential::ApiKey(value)) => match self.resolve_cached(value) {
                Some(key) => return Ok(Some(ApiKey::new(key))),
                // pi then skips the environment and asks models.json; with nothing there
                // the failed command is the most useful thing to report.
                None => failed_command = value.command().map(str::to_string),
            },
            Some(Credential::OAuth { access, expires }) => {
                // A minute's margin: the request must arrive while the token still works.
                let valid = expires.is_some_and(|at| at > crate::now_ms() + 60_000);
                return match access {
                    Some(token) if valid => Ok(Some(ApiKey::new(token.as_str()))),
                    _ => Err(KeyError::OAuthExpired {
                        provider: provider.to_string(),
                    }),
                };
            }
            Some(Credential::Other) | None => {
                if let Some(key) = env_vars_for(provider)
                    .iter()
                    .find_map(|name| self.env_var(name))
                {
                    return Ok(Some(ApiKey::new(key)));
                }
                if self.has_ambient(provider) {
                    return Ok(Some(ApiKey::new(AMBIENT_KEY)));
                }
            }
        }
        if let Some(value) = loaded
            .requests
            .get(provider)
            .and_then(|r| r.api_key.as_ref())
        {
            return self
                .resolve_uncached(value, &what)
                .map(|v| v.map(ApiKey::new));
        }
        match failed_command {
            Some(command) => Err(KeyError::Command {
                what: what(),
                command,
            }),
            None => Ok(None),
        }
    }

    /// Resolves a value, remembering command results for the life of the process.
    fn resolve_cached(&self, value: &ConfigValue) -> Option<String> {
        let Some(command) = value.command() else {
            return auth::resolve_plain(&value.0, &*self.env);
        };
        let mut cache = self
            .command_cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cache
            .entry(value.0.clone())
            .or_insert_with(|| auth::run_shell(command, &self.agent_dir, self.command_timeout))
            .clone()
    }

    /// Resolves a value afresh; a command that yields nothing is an error naming `what`.
    fn resolve_uncached(
        &self,
        value: &ConfigValue,
        what: &dyn Fn() -> String,
    ) -> Result<Option<String>, KeyError> {
        match value.command() {
            Some(command) => {
                match auth::run_shell(command, &self.agent_dir, self.command_timeout) {
                    Some(v) => Ok(Some(v)),
                    None => Err(KeyError::Command {
                        what: what(),
                        command: command.to_string(),
                    }),
                }
            }
            None => Ok(auth::resolve_plain(&value.0, &*self.env)),
        }
    }

    /// The key, headers and base URL for a request to `model`. Values from `models.json` are
    /// resolved now, not cached, as pi does.
    pub fn request_config(&self, model: &Model) -> Result<RequestConfig, KeyError> {
        let provider = model.provider.as_str();
        let api_key = self.api_key(provider)?;
        let loaded = self.loaded();

        let mut headers: Vec<(String, String)> = Vec::new();
        let mut set = |name: &str, value: String| match headers.iter_mut().find(|(k, _)| k == name)
        {
            Some(slot) => slot.1 = value,
            None => headers.push((name.to_string(), value)),
        };
        for (name, value) in model.headers.iter().flatten() {
            if let Some(v) = value.as_str() {
                set(name, v.to_string());
            }
        }
        let request = loaded.requests.get(provider);
        for (name, value) in request.map(|r| r.headers.as_slice()).unwrap_or_default() {
            let what = || format!("provider \"{provider}\" header \"{name}\"");
            if let Some(v) = self.resolve_uncached(value, &what)? {
                set(name, v);
            }
        }
        let key = (provider.to_string(), model.id.clone());
        for (name, value) in loaded.model_headers.get(&key).into_iter().flatten() {
            let what = || format!("model \"{provider}/{}\" header \"{name}\"", model.id);
            if let Some(v) = self.resolve_uncached(value, &what)? {
                set(name, v);
            }
        }
        if request.is_some_and(|r| r.auth_header) {
            let Some(key) = &api_key else {
                return Err(KeyError::NoKeyForAuthHeader {
                    provider: provider.to_string(),
                });
            };
            set("Authorization", format!("Bearer {}", key.expose()));
        }

        Ok(RequestConfig {
            api_key,
            headers,
            base_url: self.expand_base_url(model)?,
        })
    }

    /// Fills `{VAR}` placeholders in Cloudflare base URLs from the environment.
    fn expand_base_url(&self, model: &Model) -> Result<String, KeyError> {
        let url = &model.base_url;
        if !matches!(
            model.provider.as_str(),
            "cloudflare-workers-ai" | "cloudflare-ai-gateway"
        ) || !url.contains('{')
        {
            return Ok(url.clone());
        }
        let mut out = String::with_capacity(url.len());
        let mut rest = url.as_str();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let close = after.find('}');
            let name = close.map(|c| &after[..c]);
            match name.filter(|n| is_placeholder_name(n)) {
                Some(name) => {
                    let value =
                        self.env_var(name)
                            .ok_or_else(|| KeyError::MissingBaseUrlVariable {
                                name: name.to_string(),
                                provider: model.provider.clone(),
                            })?;
                    out.push_str(&value);
                    rest = &after[name.len() + 1..];
                }
                None => {
                    out.push('{');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        Ok(out)
    }

    /// Resolves `--model` (with `--provider` when given) the way pi's `resolveCliModel` does
    /// (tools-resources §7.4 steps 1-8). All models are candidates, not only those with
    /// credentials, so that `--api-key` works on first use.
    pub fn resolve_cli_model(
        &self,
        provider: Option<&str>,
        pattern: &str,
    ) -> Result<CliModel, ResolveError> {
        self.resolve_cli_model_with_thinking(provider, pattern, None)
    }

    /// [`Registry::resolve_cli_model`] when `--thinking` was also given: then a synthesized
    /// model keeps a `:level`-looking tail in its id, and any requested level other than
    /// `off` marks it as reasoning.
    pub fn resolve_cli_model_with_thinking(
        &self,
        cli_provider: Option<&str>,
        cli_model: &str,
        cli_thinking: Option<ThinkingLevel>,
    ) -> Result<CliModel, ResolveError> {
        // pi treats an empty `--model` as absent; here that is simply no match, rather than
        // the substring match every id would give.
        if cli_model.is_empty() {
            return Err(ResolveError::ModelNotFound(String::new()));
        }
        let all: Vec<&Model> = self.all_models().iter().collect();
        if all.is_empty() {
            return Err(ResolveError::NoModels);
        }
        // Later models win a case clash, as in pi's map.
        let mut providers: HashMap<String, &str> = HashMap::new();
        for m in &all {
            providers.insert(m.provider.to_lowercase(), &m.provider);
        }
        let canonical = |name: &str| providers.get(&name.to_lowercase()).copied();

        // Step 1.
        let mut provider = match cli_provider {
            Some(p) => {
                Some(canonical(p).ok_or_else(|| ResolveError::UnknownProvider(p.to_string()))?)
            }
            None => None,
        };

        // Step 2: `provider/pattern`.
        let mut pattern = cli_model;
        let mut inferred = false;
        if provider.is_none()
            && let Some((head, rest)) = cli_model.split_once('/')
            && let Some(p) = canonical(head)
        {
            provider = Some(p);
            pattern = rest;
            inferred = true;
        }

        // Step 3: ids that contain slashes themselves.
        if provider.is_none()
            && let Some(model) = exact_id_or_reference(&all, cli_model)
        {
            return Ok(CliModel::plain(model));
        }

        // Step 4.
        if cli_provider.is_some()
            && let Some(p) = provider
        {
            let prefix = format!("{p}/").to_lowercase();
            if let Some(head) = cli_model.get(..prefix.len())
                && head.to_lowercase() == prefix
            {
                pattern = &cli_model[prefix.len()..];
            }
        }

        // Step 5.
        let candidates: Vec<&Model> = match provider {
            Some(p) => all.iter().copied().filter(|m| m.provider == p).collect(),
            None => all.clone(),
        };
        let found = parse_model_pattern(pattern, &candidates, SuffixMode::Strict);
        if let Some(model) = found.model {
            // `xiaomi/mimo-v2.5-pro` may be a provider/id pair without credentials and also
            // the literal id of a model elsewhere that has them; prefer the usable one.
            if inferred && !self.has_auth(&model.provider) {
                let lower = cli_model.to_lowercase();
                let usable: Vec<&Model> = all
                    .iter()
                    .copied()
                    .filter(|m| m.id.to_lowercase() == lower && !same_model(m, model))
                    .filter(|m| self.has_auth(&m.provider))
                    .collect();
                if let [only] = usable.as_slice() {
                    return Ok(CliModel::plain(only));
                }
            }
            return Ok(CliModel {
                model: model.clone(),
                thinking_level: found.thinking_level,
                warning: found.warning,
            });
        }

        // Step 6: OpenRouter-style ids such as `openai/gpt-4o:extended`.
        if inferred {
            if let Some(model) = exact_id_or_reference(&all, cli_model) {
                return Ok(CliModel::plain(model));
            }
            let retry = parse_model_pattern(cli_model, &all, SuffixMode::Strict);
            if let Some(model) = retry.model {
                return Ok(CliModel {
                    model: model.clone(),
                    thinking_level: retry.thinking_level,
                    warning: retry.warning,
                });
            }
        }

        // Step 7: a model the catalog does not list yet, on a provider it does.
        if let Some(p) = provider {
            let (id, level) = if cli_thinking.is_none() {
                split_level_suffix(pattern)
            } else {
                (pattern, None)
            };
            let provider_models: Vec<&Model> =
                all.iter().copied().filter(|m| m.provider == p).collect();
            let base = default_model_id(p)
                .and_then(|d| provider_models.iter().copied().find(|m| m.id == d))
                .or_else(|| provider_models.first().copied());
            if let Some(base) = base {
                let mut model = base.clone();
                model.id = id.to_string();
                model.name = id.to_string();
                if cli_thinking
                    .or(level)
                    .is_some_and(|l| l != ThinkingLevel::Off)
                {
                    model.reasoning = true;
                }
                let note = format!(
                    "Model \"{id}\" not found for provider \"{p}\". Using custom model id."
                );
                let warning = match found.warning {
                    Some(w) => format!("{w} {note}"),
                    None => note,
                };
                return Ok(CliModel {
                    model,
                    thinking_level: level,
                    warning: Some(warning),
                });
            }
        }

        // Step 8.
        Err(ResolveError::ModelNotFound(match provider {
            Some(p) => format!("{p}/{pattern}"),
            None => cli_model.to_string(),
        }))
    }

    /// Resolves `--models` / `enabledModels` patterns against the models with credentials
    /// (tools-resources §7.5). Globs (`*`, `?`, `[`) match `provider/id` or `id`
    /// case-insensitively and may end in `:level`; other patterns match like `--model` but
    /// drop an invalid `:suffix` with a warning. Duplicates are dropped.
    pub fn resolve_scope<S: AsRef<str>>(&self, patterns: &[S]) -> Scope {
        let available = self.available_models();
        let mut scope = Scope::default();
        let add = |scope: &mut Scope, model: &Model, level: Option<ThinkingLevel>| {
            if !scope.models.iter().any(|s| same_model(&s.model, model)) {
                scope.models.push(ScopedModel {
                    model: model.clone(),
                    thinking_level: level,
                });
            }
        };
        for pattern in patterns.iter().map(AsRef::as_ref) {
            if pattern.contains(['*', '?', '[']) {
                let (glob, level) = split_level_suffix(pattern);
                let matched: Vec<&Model> = match GlobBuilder::new(glob)
                    .case_insensitive(true)
                    // minimatch's `*` stops at `/`.
                    .literal_separator(true)
                    .build()
                {
                    Ok(glob) => {
                        let matcher = glob.compile_matcher();
                        available
                            .iter()
                            .copied()
                            .filter(|m| {
                                matcher.is_match(format!("{}/{}", m.provider, m.id))
                                    || matcher.is_match(&m.id)
                            })
                            .collect()
                    }
                    Err(_) => Vec::new(),
                };
                if matched.is_empty() {
                    scope.warnings.push(no_match_warning(pattern));
                }
                for model in matched {
                    add(&mut scope, model, level);
                }
                continue;
            }
            let found = parse_model_pattern(pattern, &available, SuffixMode::Lenient);
            if let Some(warning) = found.warning {
                scope.warnings.push(format!("Warning: {warning}"));
            }
            match found.model {
                Some(model) => add(&mut scope, model, found.thinking_level),
                None => scope.warnings.push(no_match_warning(pattern)),
            }
        }
        scope
    }

    /// The model to start with when `--model` is absent and neither the scope nor the session
    /// chose one (tools-resources §7.4, "Initial model" steps 3-5): the settings'
    /// `defaultProvider`/`defaultModel`, else the first provider default (in table order)
    /// that has credentials, else the first model with credentials.
    pub fn default_model(
        &self,
        default_provider: Option<&str>,
        default_model: Option<&str>,
    ) -> Option<&Model> {
        if let (Some(provider), Some(id)) = (default_provider, default_model)
            && let Some(model) = self.find_any(provider, id)
        {
            return Some(model);
        }
        let available = self.available_models();
        DEFAULT_MODEL_PER_PROVIDER
            .iter()
            .find_map(|(provider, id)| {
                available
                    .iter()
                    .copied()
                    .find(|m| m.provider == *provider && m.id == *id)
            })
            .or_else(|| available.first().copied())
    }
}

impl CliModel {
    fn plain(model: &Model) -> Self {
        CliModel {
            model: model.clone(),
            thinking_level: None,
            warning: None,
        }
    }
}

fn same_model(a: &Model, b: &Model) -> bool {
    a.provider == b.provider && a.id == b.id
}

fn no_match_warning(pattern: &str) -> String {
    format!("Warning: No models match pattern \"{pattern}\"")
}

fn is_placeholder_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The first model whose id, or `provider/id`, equals `text` ignoring case.
fn exact_id_or_reference<'a>(models: &[&'a Model], text: &str) -> Option<&'a Model> {
    let lower = text.to_lowercase();
    models.iter().copied().find(|m| {
        m.id.to_lowercase() == lower || format!("{}/{}", m.provider, m.id).to_lowercase() == lower
    })
}

#[cfg(test)]
mod tests;
