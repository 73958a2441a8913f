//! Which model and thinking level a session starts with (tools-resources §7.4–7.5): `--model`
//! (with `--provider`, a `:level` suffix and `--api-key`), else the first scoped model
//! (`--models` or settings `enabledModels`), else the settings' default, else the first
//! provider default with credentials.

use tau_ai::registry::{ApiKey, Registry, ScopedModel};
use tau_protocol::{Model, ThinkingLevel, clamp_thinking_level};

use crate::{SessionConfig, Settings};

/// The resolved starting point of a session.
#[derive(Debug, Clone)]
pub struct StartupModel {
    pub model: Option<Model>,
    pub thinking_level: ThinkingLevel,
    pub scope: Vec<ScopedModel>,
    /// Lines to print on stderr (pi's warnings: synthesized models, unmatched patterns).
    pub warnings: Vec<String>,
}

/// Resolves the startup model; the error is the text after `Error: ` (a startup failure).
pub fn resolve_startup_model(
    registry: &mut Registry,
    config: &SessionConfig,
    settings: &Settings,
) -> Result<StartupModel, String> {
    let mut warnings = Vec::new();
    // Reading models.json parses the catalog too; only pay for that when the file exists.
    if registry.agent_dir().join("models.json").exists()
        && let Some(error) = registry.models_json_error()
    {
        warnings.push(error.to_string());
    }
    let cli = match config.model_pattern.as_deref() {
        Some(pattern) => {
            let resolved = registry
                .resolve_cli_model_with_thinking(
                    config.provider.as_deref(),
                    pattern,
                    config.thinking,
                )
                .map_err(|e| e.to_string())?;
            warnings.extend(resolved.warning.clone());
            Some(resolved)
        }
        None => None,
    };
    let patterns: Vec<String> = if config.models_scope.is_empty() {
        settings
            .get::<Vec<String>>("enabledModels")
            .unwrap_or_default()
    } else {
        config.models_scope.clone()
    };
    if let Some(key) = config.api_key.as_deref() {
        let provider = match (&cli, patterns.first()) {
            (Some(cli), _) => cli.model.provider.clone(),
            (None, Some(first)) => {
                registry
                    .resolve_cli_model(config.provider.as_deref(), first)
                    .map_err(|e| e.to_string())?
                    .model
                    .provider
            }
            (None, None) => {
                return Err(
                    "--api-key requires a model to be specified via --model, --provider/--model, or --models"
                        .to_string(),
                );
            }
        };
        registry.set_runtime_api_key(&provider, ApiKey::new(key));
    }
    let scope = if patterns.is_empty() {
        Vec::new()
    } else {
        let scope = registry.resolve_scope(&patterns);
        warnings.extend(scope.warnings);
        scope.models
    };
    let default_provider = settings.get::<String>("defaultProvider");
    let default_model = settings.get::<String>("defaultModel");
    let (model, suffix_level) = match cli {
        Some(cli) => (Some(cli.model), cli.thinking_level),
        None => match scope_start(
            &scope,
            default_provider.as_deref(),
            default_model.as_deref(),
        ) {
            Some(scoped) => (Some(scoped.model.clone()), scoped.thinking_level),
            // Without any credentials and without a configured default there is no model to
            // find, and the catalog need not be read at all.
            None if default_model.is_none() && !registry.may_have_credentials() => (None, None),
            None => (
                registry
                    .default_model(default_provider.as_deref(), default_model.as_deref())
                    .cloned(),
                None,
            ),
        },
    };
    let requested = config
        .thinking
        .or(suffix_level)
        .unwrap_or_else(|| settings.default_thinking_level());
    Ok(StartupModel {
        thinking_level: clamp_thinking_level(requested, &supported_levels(model.as_ref())),
        model,
        scope,
        warnings,
    })
}

/// The first scoped model, preferring the saved default when it is in scope.
fn scope_start<'a>(
    scope: &'a [ScopedModel],
    provider: Option<&str>,
    id: Option<&str>,
) -> Option<&'a ScopedModel> {
    scope
        .iter()
        .find(|s| Some(s.model.provider.as_str()) == provider && Some(s.model.id.as_str()) == id)
        .or_else(|| scope.first())
}

/// The levels `model` supports (only `off` without a model).
pub fn supported_levels(model: Option<&Model>) -> Vec<ThinkingLevel> {
    model.map_or_else(
        || vec![ThinkingLevel::Off],
        Model::supported_thinking_levels,
    )
}
