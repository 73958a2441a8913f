//! `<agentDir>/models.json`: reading it (with `//` comments and trailing commas), validating it
//! with pi's error texts, turning it into custom models and overrides, and merging those into
//! the built-in catalog (tools-resources §7.2).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};
use tau_protocol::{InputModality, Model, ModelCost, ThinkingLevelMap};

use super::auth::ConfigValue;
use super::schema::validate_models_json;

/// Why `models.json` was not used. The `Display` texts are pi's; built-in models stay
/// available whatever the error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelsJsonError {
    /// The document does not match the schema; one line per violation.
    #[error("Invalid models.json schema:\n{}\n\nFile: {file}", format_schema_errors(.errors))]
    Schema { errors: Vec<String>, file: String },
    /// The file is not JSON (after comments and trailing commas are stripped).
    #[error("Failed to parse models.json: {message}\n\nFile: {file}")]
    Parse { message: String, file: String },
    /// The file could not be read, or a rule beyond the schema failed.
    #[error("Failed to load models.json: {message}\n\nFile: {file}")]
    Load { message: String, file: String },
}

fn format_schema_errors(errors: &[String]) -> String {
    if errors.is_empty() {
        return "Unknown schema error".to_string();
    }
    errors
        .iter()
        .map(|e| format!("  - {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Removes `//` line comments and commas that directly precede `}` or `]` (whitespace
/// between allowed), leaving string literals untouched.
pub(crate) fn strip_comments_and_trailing_commas(input: &str) -> String {
    let without_comments = strip_line_comments(input);
    strip_trailing_commas(&without_comments)
}

/// Copies a string literal starting at `chars[start]` (the opening quote) into `out` and
/// returns the index after it. An unterminated literal runs to the end.
fn copy_string(chars: &[char], start: usize, out: &mut String) -> usize {
    out.push(chars[start]);
    let mut i = start + 1;
    while i < chars.len() {
        let c = chars[i];
        out.push(c);
        i += 1;
        if c == '\\' {
            if let Some(&next) = chars.get(i) {
                out.push(next);
                i += 1;
            }
        } else if c == '"' {
            break;
        }
    }
    i
}

/// Copies `input` with its string literals passed through whole; every other character goes
/// to `step`, which writes what it keeps to `out` and returns the index to go on from.
fn rewrite_outside_strings(
    input: &str,
    step: impl Fn(&[char], usize, &mut String) -> usize,
) -> String {
    let chars: Vec<char> = input.chars().collect();
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    while i < chars.len() {
        i = if chars[i] == '"' {
            copy_string(&chars, i, &mut out)
        } else {
            step(&chars, i, &mut out)
        };
    }
    out
}

fn strip_line_comments(input: &str) -> String {
    rewrite_outside_strings(input, |chars, mut i, out| {
        if chars[i] == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else {
            out.push(chars[i]);
            i += 1;
        }
        i
    })
}

fn strip_trailing_commas(input: &str) -> String {
    rewrite_outside_strings(input, |chars, i, out| {
        // Only whitespace between the comma and a closing bracket makes it a trailing one.
        let trailing = chars[i] == ','
            && matches!(
                chars[i + 1..].iter().find(|c| !c.is_whitespace()),
                Some('}' | ']')
            );
        if !trailing {
            out.push(chars[i]);
        }
        i + 1
    })
}

/// Request-time settings of one provider from `models.json`.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProviderRequest {
    pub(crate) api_key: Option<ConfigValue>,
    pub(crate) headers: Vec<(String, ConfigValue)>,
    pub(crate) auth_header: bool,
}

/// Everything `models.json` contributes, ready to merge.
#[derive(Debug, Default)]
pub(crate) struct CustomConfig {
    /// Provider-level `baseUrl`/`compat` applied to every built-in model of the provider.
    overrides: HashMap<String, (Option<String>, Option<Value>)>,
    /// `modelOverrides`, per provider, per built-in model id.
    model_overrides: HashMap<String, HashMap<String, ModelOverride>>,
    /// Custom models in file order.
    models: Vec<Model>,
    pub(crate) requests: HashMap<String, ProviderRequest>,
    /// Per-model request headers, keyed by (provider, id).
    pub(crate) model_headers: HashMap<(String, String), Vec<(String, ConfigValue)>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProviderConfig {
    base_url: Option<String>,
    api_key: Option<String>,
    api: Option<String>,
    headers: Option<Map<String, Value>>,
    compat: Option<Value>,
    auth_header: Option<bool>,
    models: Option<Vec<ModelDefinition>>,
    model_overrides: Option<Map<String, Value>>,
}

/// A custom model of `models`: what names it and where it is served, then the settings an
/// override may change too.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelDefinition {
    id: String,
    api: Option<String>,
    base_url: Option<String>,
    #[serde(flatten)]
    settings: ModelSettings<ModelCost>,
}

/// What a custom model and a `modelOverrides` entry may both set. A custom model's `cost` gives
/// all four prices ([`ModelCost`]); an override's may change any of them ([`PartialCost`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelSettings<Cost> {
    name: Option<String>,
    reasoning: Option<bool>,
    thinking_level_map: Option<ThinkingLevelMap>,
    input: Option<Vec<InputModality>>,
    cost: Option<Cost>,
    context_window: Option<f64>,
    max_tokens: Option<f64>,
    headers: Option<Map<String, Value>>,
    compat: Option<Value>,
}

type ModelOverride = ModelSettings<PartialCost>;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartialCost {
    input: Option<f64>,
    output: Option<f64>,
    cache_read: Option<f64>,
    cache_write: Option<f64>,
}

// JSON numbers arrive as f64; token counts are whole, and the schema has already made sure
// they are numbers.
fn tokens(value: f64) -> u64 {
    value as u64
}

fn string_headers(headers: &Option<Map<String, Value>>) -> Vec<(String, ConfigValue)> {
    headers
        .iter()
        .flatten()
        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), ConfigValue(v.to_string()))))
        .collect()
}

/// Reads and interprets `path`, with `extra` providers (extensions' `registerProvider`, later
/// names replacing earlier ones and the file's) added to its `providers`. `Ok(None)` when there
/// is neither a file nor an extra provider.
pub(crate) fn load(
    path: &Path,
    builtins: &[Model],
    extra: &[(String, Value)],
) -> Result<Option<CustomConfig>, ModelsJsonError> {
    let file = path.display().to_string();
    // A link in the agent folder can lead to a FIFO or a device: neither is waited on.
    let mut value = match tau_base::bounded::read_to_string(path, tau_base::bounded::CONFIG_CAP) {
        Ok(text) => parse_text(&text, &file)?,
        Err(tau_base::bounded::BoundedReadError::NotFound) if extra.is_empty() => {
            return Ok(None);
        }
        Err(tau_base::bounded::BoundedReadError::NotFound) => Value::Object(Map::new()),
        Err(err) => {
            return Err(ModelsJsonError::Load {
                message: err.to_string(),
                file,
            });
        }
    };
    add_providers(&mut value, extra);
    parse_value(value, &file, builtins).map(Some)
}

/// `extra` providers on their own, for when `models.json` itself cannot be used.
pub(crate) fn load_extra(builtins: &[Model], extra: &[(String, Value)]) -> Option<CustomConfig> {
    if extra.is_empty() {
        return None;
    }
    let mut value = Value::Object(Map::new());
    add_providers(&mut value, extra);
    parse_value(value, "registerProvider", builtins).ok()
}

fn add_providers(value: &mut Value, extra: &[(String, Value)]) {
    if extra.is_empty() {
        return;
    }
    let Value::Object(root) = value else { return };
    let providers = root
        .entry("providers")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(providers) = providers {
        for (name, config) in extra {
            providers.insert(name.clone(), config.clone());
        }
    }
}

fn parse_text(text: &str, file: &str) -> Result<Value, ModelsJsonError> {
    serde_json::from_str(&strip_comments_and_trailing_commas(text)).map_err(|err| {
        ModelsJsonError::Parse {
            message: err.to_string(),
            file: file.to_string(),
        }
    })
}

/// Checks and interprets a models.json document (or one provider an extension registers,
/// `file` then naming it).
pub(crate) fn parse_value(
    value: Value,
    file: &str,
    builtins: &[Model],
) -> Result<CustomConfig, ModelsJsonError> {
    let errors = validate_models_json(&value);
    if !errors.is_empty() {
        return Err(ModelsJsonError::Schema {
            errors,
            file: file.to_string(),
        });
    }
    let load_error = |message: String| ModelsJsonError::Load {
        message,
        file: file.to_string(),
    };

    let providers = match value.get("providers") {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    let mut configs = Vec::with_capacity(providers.len());
    for (name, raw) in providers {
        // The schema has been checked, so this only fails on numbers serde cannot hold.
        let config: ProviderConfig = serde_json::from_value(raw)
            .map_err(|err| load_error(format!("Provider {name}: {err}")))?;
        configs.push((name, config));
    }

    let builtin_providers: HashSet<&str> = provider_names(builtins).into_iter().collect();
    check_rules(&configs, &builtin_providers).map_err(load_error)?;

    let mut custom = CustomConfig::default();
    for (name, config) in &configs {
        if config.base_url.is_some() || config.compat.is_some() {
            custom.overrides.insert(
                name.clone(),
                (config.base_url.clone(), config.compat.clone()),
            );
        }
        let auth_header = config.auth_header.unwrap_or(false);
        if config.api_key.is_some() || config.headers.is_some() || auth_header {
            custom.requests.insert(
                name.clone(),
                ProviderRequest {
                    api_key: config.api_key.clone().map(ConfigValue),
                    headers: string_headers(&config.headers),
                    auth_header,
                },
            );
        }
        if let Some(overrides) = &config.model_overrides {
            let mut parsed = HashMap::new();
            for (id, raw) in overrides {
                let o: ModelOverride = serde_json::from_value(raw.clone())
                    .map_err(|err| load_error(format!("Provider {name}, model {id}: {err}")))?;
                set_model_headers(&mut custom.model_headers, name, id, &o.headers);
                parsed.insert(id.clone(), o);
            }
            custom.model_overrides.insert(name.clone(), parsed);
        }
    }

    for (name, config) in &configs {
        let defaults = builtins.iter().find(|m| m.provider == *name);
        for def in config.models.iter().flatten() {
            let Some(api) = def
                .api
                .clone()
                .or_else(|| config.api.clone())
                .or_else(|| defaults.map(|m| m.api.clone()))
            else {
                continue;
            };
            let Some(base_url) = def
                .base_url
                .clone()
                .or_else(|| config.base_url.clone())
                .or_else(|| defaults.map(|m| m.base_url.clone()))
            else {
                continue;
            };
            let settings = &def.settings;
            set_model_headers(&mut custom.model_headers, name, &def.id, &settings.headers);
            custom.models.push(Model {
                id: def.id.clone(),
                name: settings.name.clone().unwrap_or_else(|| def.id.clone()),
                api,
                provider: name.clone(),
                base_url,
                reasoning: settings.reasoning.unwrap_or(false),
                thinking_level_map: settings.thinking_level_map.clone(),
                input: settings
                    .input
                    .clone()
                    .unwrap_or_else(|| vec![InputModality::Text]),
                cost: settings.cost.clone().unwrap_or_default(),
                context_window: settings.context_window.map_or(128_000, tokens),
                max_tokens: settings.max_tokens.map_or(16_384, tokens),
                headers: None,
                compat: merge_compat(config.compat.as_ref(), settings.compat.as_ref()),
            });
        }
    }
    Ok(custom)
}

/// A later definition of the same model's headers replaces an earlier one, and a definition
/// without headers clears them (pi keeps one header set per model).
fn set_model_headers(
    store: &mut HashMap<(String, String), Vec<(String, ConfigValue)>>,
    provider: &str,
    id: &str,
    headers: &Option<Map<String, Value>>,
) {
    let key = (provider.to_string(), id.to_string());
    let headers = string_headers(headers);
    if headers.is_empty() {
        store.remove(&key);
    } else {
        store.insert(key, headers);
    }
}

/// The rules beyond the schema; the first violation wins.
fn check_rules(
    configs: &[(String, ProviderConfig)],
    builtins: &HashSet<&str>,
) -> Result<(), String> {
    for (name, config) in configs {
        let is_builtin = builtins.contains(name.as_str());
        let models = config.models.as_deref().unwrap_or_default();
        let has_overrides = config
            .model_overrides
            .as_ref()
            .is_some_and(|o| !o.is_empty());
        if models.is_empty() {
            if config.base_url.is_none()
                && config.headers.is_none()
                && config.compat.is_none()
                && !has_overrides
            {
                return Err(format!(
                    "Provider {name}: must specify \"baseUrl\", \"headers\", \"compat\", \"modelOverrides\", or \"models\"."
                ));
            }
        } else if !is_builtin {
            if config.base_url.is_none() {
                return Err(format!(
                    "Provider {name}: \"baseUrl\" is required when defining custom models."
                ));
            }
            if config.api_key.is_none() {
                return Err(format!(
                    "Provider {name}: \"apiKey\" is required when defining custom models."
                ));
            }
        }
        for def in models {
            if config.api.is_none() && def.api.is_none() && !is_builtin {
                return Err(format!(
                    "Provider {name}, model {}: no \"api\" specified. Set at provider or model level.",
                    def.id
                ));
            }
            if def.settings.context_window.is_some_and(|v| v <= 0.0) {
                return Err(format!(
                    "Provider {name}, model {}: invalid contextWindow",
                    def.id
                ));
            }
            if def.settings.max_tokens.is_some_and(|v| v <= 0.0) {
                return Err(format!(
                    "Provider {name}, model {}: invalid maxTokens",
                    def.id
                ));
            }
        }
    }
    Ok(())
}

/// Compat keys whose objects merge one level deeper instead of being replaced.
const DEEP_COMPAT_KEYS: [&str; 3] = [
    "openRouterRouting",
    "vercelGatewayRouting",
    "chatTemplateKwargs",
];

/// `base` with `over`'s keys on top; the routing objects merge key by key.
pub(crate) fn merge_compat(base: Option<&Value>, over: Option<&Value>) -> Option<Value> {
    let Some(over) = over else {
        return base.cloned();
    };
    let (Some(Value::Object(base_map)), Value::Object(over_map)) = (base, over) else {
        return Some(over.clone());
    };
    let mut merged = base_map.clone();
    for (k, v) in over_map {
        merged.insert(k.clone(), v.clone());
    }
    for key in DEEP_COMPAT_KEYS {
        if let (Some(Value::Object(b)), Some(Value::Object(o))) =
            (base_map.get(key), over_map.get(key))
        {
            let mut inner = b.clone();
            for (k, v) in o {
                inner.insert(k.clone(), v.clone());
            }
            merged.insert(key.to_string(), Value::Object(inner));
        }
    }
    Some(Value::Object(merged))
}

fn apply_override(model: &mut Model, o: &ModelOverride) {
    if let Some(name) = &o.name {
        model.name = name.clone();
    }
    if let Some(reasoning) = o.reasoning {
        model.reasoning = reasoning;
    }
    if let Some(map) = &o.thinking_level_map {
        let mut merged = model.thinking_level_map.clone().unwrap_or_default();
        for (k, v) in map {
            merged.insert(k.clone(), v.clone());
        }
        model.thinking_level_map = Some(merged);
    }
    if let Some(input) = &o.input {
        model.input = input.clone();
    }
    if let Some(v) = o.context_window {
        model.context_window = tokens(v);
    }
    if let Some(v) = o.max_tokens {
        model.max_tokens = tokens(v);
    }
    if let Some(cost) = &o.cost {
        let c = &mut model.cost;
        c.input = cost.input.unwrap_or(c.input);
        c.output = cost.output.unwrap_or(c.output);
        c.cache_read = cost.cache_read.unwrap_or(c.cache_read);
        c.cache_write = cost.cache_write.unwrap_or(c.cache_write);
    }
    model.compat = merge_compat(model.compat.as_ref(), o.compat.as_ref());
}

/// The built-in models with provider overrides and `modelOverrides` applied, then the custom
/// models upserted by (provider, id).
/// The models a registry knows, in registry order: the built-in catalog, then the custom
/// models `models.json` adds. The catalog stays borrowed while nothing changes any of its
/// models, which is the usual `models.json` (a local server's provider): copying its ~800
/// models cost a start-up with a model ~1 M instructions, ~0.6 MB of heap, and indexing them
/// by (provider, id) as many again.
#[derive(Debug, Clone)]
pub struct Models {
    builtins: Cow<'static, [Model]>,
    added: Vec<Model>,
}

impl Models {
    fn builtin(builtins: &'static [Model]) -> Self {
        Self {
            builtins: Cow::Borrowed(builtins),
            added: Vec::new(),
        }
    }

    /// Every model, in registry order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Model> + Clone {
        self.builtins.iter().chain(self.added.iter())
    }

    pub fn len(&self) -> usize {
        self.builtins.len() + self.added.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The model at `index` in registry order.
    pub fn get(&self, index: usize) -> Option<&Model> {
        match index.checked_sub(self.builtins.len()) {
            None => self.builtins.get(index),
            Some(at) => self.added.get(at),
        }
    }

    /// Whether the catalog was copied to be changed (tests check that it is not otherwise).
    #[cfg(test)]
    pub(crate) fn copies_catalog(&self) -> bool {
        matches!(self.builtins, Cow::Owned(_))
    }

    /// Whether the list is the built-in catalog as it is.
    pub fn is_builtin_catalog(&self) -> bool {
        matches!(self.builtins, Cow::Borrowed(_)) && self.added.is_empty()
    }

    /// The model with this provider and id, to change (a built-in one is copied out first).
    pub(crate) fn find_mut(&mut self, provider: &str, id: &str) -> Option<&mut Model> {
        let is = |m: &Model| m.provider == provider && m.id == id;
        if let Some(at) = self.added.iter().position(is) {
            return self.added.get_mut(at);
        }
        let at = self.builtins.iter().position(is)?;
        self.builtins.to_mut().get_mut(at)
    }
}

/// Equal when the same models are in the same order, however the list holds them.
impl PartialEq for Models {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<[Model]> for Models {
    fn eq(&self, other: &[Model]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl serde::Serialize for Models {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

/// The names of the catalog's providers, once each (the catalog lists a provider's models
/// together, so this compares ~800 names, where a set would hash them).
pub(crate) fn provider_names(builtins: &[Model]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for model in builtins {
        if names.last() != Some(&model.provider.as_str()) && !names.contains(&&*model.provider) {
            names.push(&model.provider);
        }
    }
    names
}

pub(crate) fn merge(builtins: &'static [Model], custom: Option<&CustomConfig>) -> Models {
    let mut models = Models::builtin(builtins);
    let Some(custom) = custom else {
        return models;
    };
    let providers = provider_names(builtins);
    let is_builtin_provider = |name: &str| providers.contains(&name);
    let changes_catalog = custom.overrides.keys().any(|p| is_builtin_provider(p))
        || custom
            .model_overrides
            .keys()
            .any(|p| is_builtin_provider(p));
    if changes_catalog {
        models.builtins = Cow::Owned(
            builtins
                .iter()
                .map(|builtin| {
                    let mut model = builtin.clone();
                    if let Some((base_url, compat)) = custom.overrides.get(&model.provider) {
                        if let Some(url) = base_url {
                            model.base_url = url.clone();
                        }
                        model.compat = merge_compat(model.compat.as_ref(), compat.as_ref());
                    }
                    if let Some(o) = custom
                        .model_overrides
                        .get(&model.provider)
                        .and_then(|per_model| per_model.get(&model.id))
                    {
                        apply_override(&mut model, o);
                    }
                    model
                })
                .collect(),
        );
    }
    // A custom model takes the place of the built-in or earlier custom model of the same
    // provider and id; the catalog is searched only for its own providers' models.
    let mut added: HashMap<(&str, &str), usize> = HashMap::new();
    for model in &custom.models {
        let key = (model.provider.as_str(), model.id.as_str());
        if let Some(&at) = added.get(&key) {
            models.added[at] = model.clone();
            continue;
        }
        let builtin_at = if is_builtin_provider(&model.provider) {
            models
                .builtins
                .iter()
                .position(|m| m.provider == model.provider && m.id == model.id)
        } else {
            None
        };
        match builtin_at {
            Some(at) => {
                if let Some(slot) = models.builtins.to_mut().get_mut(at) {
                    *slot = model.clone();
                }
            }
            None => {
                added.insert(key, models.added.len());
                models.added.push(model.clone());
            }
        }
    }
    models
}
