//! The model and thinking level a session runs with, and the rules that change them: set a
//! model, cycle through the scope (`--models`, `enabledModels`) or the available models,
//! restore a resumed branch's choice, clamp a level to what the model supports. Plain state:
//! the session records and announces whatever a method reports as [`Changed`].

use tau_ai::registry::{Registry, ScopedModel};
use tau_protocol::{Model, ThinkingLevel, clamp_thinking_level};

use crate::SessionError;
use crate::models::supported_levels;

/// What a change did, for the session to record (`model_change` and
/// `thinking_level_change` entries) and announce (`thinking_level_changed`).
#[derive(Debug, Default, PartialEq)]
pub struct Changed {
    /// The model switched to (also when it is the same model again, as pi records it).
    pub model: Option<Model>,
    /// The effective thinking level, when it changed.
    pub thinking_level: Option<ThinkingLevel>,
}

/// The current model and thinking level, with what is needed to change them.
#[derive(Debug)]
pub struct ModelChoice {
    registry: Registry,
    scope: Vec<ScopedModel>,
    model: Option<Model>,
    thinking_level: ThinkingLevel,
    /// The settings' level, for a switch away from a model without reasoning.
    default_level: ThinkingLevel,
}

impl ModelChoice {
    pub fn new(
        registry: Registry,
        scope: Vec<ScopedModel>,
        model: Option<Model>,
        thinking_level: ThinkingLevel,
        default_level: ThinkingLevel,
    ) -> Self {
        Self {
            registry,
            scope,
            model,
            thinking_level,
            default_level,
        }
    }

    pub fn model(&self) -> Option<&Model> {
        self.model.as_ref()
    }

    pub fn thinking_level(&self) -> ThinkingLevel {
        self.thinking_level
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// `pi.registerProvider` after start-up: the provider's models join the registry (the
    /// current model is kept).
    pub fn register_provider(
        &mut self,
        name: &str,
        config: serde_json::Value,
    ) -> Result<(), SessionError> {
        self.registry
            .register_provider(name, config)
            .map_err(|e| SessionError::Store(e.to_string()))
    }

    pub fn unregister_provider(&mut self, name: &str) {
        self.registry.unregister_provider(name);
    }

    /// The model and level now: what the extensions are told a later change replaced.
    pub fn choice(&self) -> (Option<Model>, ThinkingLevel) {
        (self.model.clone(), self.thinking_level)
    }

    /// Whether a run or a summary can start: a model whose provider has a key.
    pub fn check_credentials(&self) -> Result<(), SessionError> {
        let Some(model) = &self.model else {
            return Err(SessionError::NoApiKey("the selected model".to_string()));
        };
        match self.registry.request_config(model) {
            Ok(config) if config.api_key.is_some() => Ok(()),
            Ok(_) => Err(SessionError::NoApiKey(model.provider.clone())),
            Err(err) => Err(SessionError::Credentials(err.to_string())),
        }
    }

    /// An extension's change to a model object (`ctx.model.contextWindow = …`): in the
    /// registry, and in the current model when it is that one. False for an unknown model.
    pub fn patch_model(
        &mut self,
        provider: &str,
        id: &str,
        patch: &tau_ai::registry::ModelPatch,
    ) -> bool {
        if !self.registry.patch_model(provider, id, patch) {
            return false;
        }
        if let Some(model) = self
            .model
            .as_mut()
            .filter(|m| m.provider == provider && m.id == id)
        {
            patch.apply(model);
        }
        true
    }

    /// The thinking levels the current model supports (only `off` without a model).
    pub fn available_thinking_levels(&self) -> Vec<ThinkingLevel> {
        supported_levels(self.model.as_ref())
    }

    /// Models whose provider has credentials, in registry order.
    pub fn available_models(&self) -> Vec<Model> {
        self.registry
            .available_models()
            .into_iter()
            .cloned()
            .collect()
    }

    /// Switches to `provider/id` (only models with credentials count) and re-applies the
    /// thinking level.
    pub fn set_model(&mut self, provider: &str, id: &str) -> Result<Changed, SessionError> {
        if self.registry.find(provider, id).is_none() {
            // A key stored since the files were read (`/login`, another terminal) counts.
            self.registry.reload();
        }
        let model = self.registry.find(provider, id).cloned().ok_or_else(|| {
            SessionError::ModelNotFound {
                provider: provider.to_string(),
                id: id.to_string(),
            }
        })?;
        Ok(self.switch_to(model, None))
    }

    /// Reads `auth.json` and `models.json` again (as pi does when models are listed) when the
    /// session has no usable model: a key stored since start (`/login`, another terminal)
    /// then counts, and a session that started with no model at all takes the default model
    /// the keys now allow (the settings' default first), as it would have at start.
    pub fn pick_up_credentials(
        &mut self,
        default_provider: Option<&str>,
        default_model: Option<&str>,
    ) -> Option<Changed> {
        if self.check_credentials().is_ok() {
            return None;
        }
        self.registry.reload();
        if self.model.is_some() {
            return None;
        }
        let model = self
            .registry
            .default_model(default_provider, default_model)
            .cloned()?;
        Some(self.switch_to(model, None))
    }

    /// The next model of the scope (when one is set) or of all available models, and whether
    /// a scope was used; `None` when there are fewer than two to choose from.
    pub fn cycle_model(&mut self) -> Option<(Changed, bool)> {
        let is_scoped = !self.scope.is_empty();
        let candidates: Vec<ScopedModel> = if is_scoped {
            self.scope
                .iter()
                .filter(|s| self.registry.has_auth(&s.model.provider))
                .cloned()
                .collect()
        } else {
            self.available_models()
                .into_iter()
                .map(|model| ScopedModel {
                    model,
                    thinking_level: None,
                })
                .collect()
        };
        if candidates.len() < 2 {
            return None;
        }
        let current = self.model.as_ref().and_then(|m| {
            candidates
                .iter()
                .position(|c| c.model.provider == m.provider && c.model.id == m.id)
        });
        let next = candidates[(current.unwrap_or(0) + 1) % candidates.len()].clone();
        Some((self.switch_to(next.model, next.thinking_level), is_scoped))
    }

    /// A new model keeps the current level when the old one reasoned, else starts from the
    /// settings' default; a scope entry's `:level` wins over both.
    fn switch_to(&mut self, model: Model, level: Option<ThinkingLevel>) -> Changed {
        let previous_reasons = self.model.as_ref().is_some_and(|m| m.reasoning);
        let requested = level.unwrap_or(if previous_reasons {
            self.thinking_level
        } else {
            self.default_level
        });
        self.model = Some(model.clone());
        Changed {
            model: Some(model),
            thinking_level: self.set_thinking_level(requested),
        }
    }

    /// The settings' level changed (a level set over RPC is saved as the default, as in pi).
    pub fn set_default_level(&mut self, level: ThinkingLevel) {
        self.default_level = level;
    }

    /// Sets the level, clamped to the model; the effective level when it changed.
    pub fn set_thinking_level(&mut self, requested: ThinkingLevel) -> Option<ThinkingLevel> {
        let effective = clamp_thinking_level(requested, &self.available_thinking_levels());
        (effective != self.thinking_level).then(|| {
            self.thinking_level = effective;
            effective
        })
    }

    /// The next supported level, wrapping; `None` for a model without reasoning. The level
    /// after the call is `thinking_level()`.
    pub fn cycle_thinking_level(&mut self) -> Option<Option<ThinkingLevel>> {
        if !self.model.as_ref().is_some_and(|m| m.reasoning) {
            return None;
        }
        let levels = self.available_thinking_levels();
        let current = levels
            .iter()
            .position(|l| *l == self.thinking_level)
            .unwrap_or(0);
        let next = *levels.get((current + 1) % levels.len().max(1))?;
        Some(self.set_thinking_level(next))
    }

    /// A resumed branch's choice: its model if it still exists with credentials (unless the
    /// command line named one, `keep_model`), its level (else the current one), clamped.
    /// Nothing is recorded: the branch already holds both.
    pub fn restore(
        &mut self,
        model: Option<&(String, String)>,
        level: Option<ThinkingLevel>,
        keep_model: bool,
    ) {
        if let Some((provider, id)) = model
            && !keep_model
            && self.registry.has_auth(provider)
            && let Some(found) = self.registry.find(provider, id)
        {
            self.model = Some(found.clone());
        }
        let level = level.unwrap_or(self.thinking_level);
        self.thinking_level = clamp_thinking_level(level, &self.available_thinking_levels());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry with `models` (id, reasoning) of provider `p`, which has a key; the
    /// built-in catalog's providers have none (the environment is empty).
    fn choice(models: &[(&str, bool)], scope: &[&str]) -> (tempfile::TempDir, ModelChoice) {
        let dir = tempfile::tempdir().unwrap();
        let list: Vec<serde_json::Value> = models
            .iter()
            .map(|(id, reasoning)| serde_json::json!({"id": id, "reasoning": reasoning}))
            .collect();
        let json = serde_json::json!({"providers": {
            "p": {"baseUrl": "http://127.0.0.1:1", "api": "openai-completions", "apiKey": "k",
                  "models": list},
        }});
        std::fs::write(dir.path().join("models.json"), json.to_string()).unwrap();
        let registry = Registry::new(dir.path(), |_| None);
        let scope = scope
            .iter()
            .map(|id| ScopedModel {
                model: registry.find_any("p", id).unwrap().clone(),
                thinking_level: None,
            })
            .collect();
        let first = registry.find("p", models[0].0).cloned();
        let choice = ModelChoice::new(
            registry,
            scope,
            first,
            ThinkingLevel::Medium,
            ThinkingLevel::Low,
        );
        (dir, choice)
    }

    /// A catalog model whose provider has no key.
    fn without_key(c: &ModelChoice) -> (String, String) {
        let model = c
            .registry()
            .all_models()
            .iter()
            .find(|m| m.provider == "anthropic")
            .unwrap();
        (model.provider.clone(), model.id.clone())
    }

    #[test]
    fn set_model_needs_credentials_and_keeps_a_reasoning_level() {
        let (_dir, mut c) = choice(&[("a", true), ("b", true)], &[]);
        let changed = c.set_model("p", "b").unwrap();
        assert_eq!(changed.model.map(|m| m.id), Some("b".to_string()));
        assert_eq!(changed.thinking_level, None, "medium carries over");
        let (provider, id) = without_key(&c);
        assert_eq!(
            c.set_model(&provider, &id).unwrap_err(),
            SessionError::ModelNotFound { provider, id }
        );
        assert_eq!(c.model().map(|m| m.id.as_str()), Some("b"));
    }

    #[test]
    fn a_model_without_reasoning_clamps_to_off_and_the_next_starts_from_the_default() {
        let (_dir, mut c) = choice(&[("a", true), ("plain", false), ("c", true)], &[]);
        let changed = c.set_model("p", "plain").unwrap();
        assert_eq!(changed.thinking_level, Some(ThinkingLevel::Off));
        assert_eq!(c.cycle_thinking_level(), None);
        let changed = c.set_model("p", "c").unwrap();
        assert_eq!(changed.thinking_level, Some(ThinkingLevel::Low));
    }

    #[test]
    fn cycling_wraps_and_prefers_the_scope() {
        let (_dir, mut c) = choice(&[("a", true), ("b", true), ("c", true)], &[]);
        let ids: Vec<String> = (0..3)
            .map(|_| c.cycle_model().unwrap().0.model.unwrap().id)
            .collect();
        assert_eq!(ids, ["b", "c", "a"]);
        let (_dir, mut scoped) = choice(&[("a", true), ("b", true), ("c", true)], &["c", "a"]);
        let (changed, is_scoped) = scoped.cycle_model().unwrap();
        assert!(is_scoped);
        assert_eq!(changed.model.unwrap().id, "c");
        let (_dir, mut single) = choice(&[("a", true)], &[]);
        assert!(single.cycle_model().is_none());
    }

    #[test]
    fn thinking_levels_cycle_through_what_the_model_supports() {
        let (_dir, mut c) = choice(&[("a", true)], &[]);
        let levels = c.available_thinking_levels();
        assert!(
            levels.len() > 2 && levels[0] == ThinkingLevel::Off,
            "{levels:?}"
        );
        let start = c.thinking_level();
        let mut seen = vec![start];
        for _ in 1..levels.len() {
            assert!(c.cycle_thinking_level().unwrap().is_some());
            seen.push(c.thinking_level());
        }
        seen.sort();
        assert_eq!(seen, levels, "every level once");
        assert_eq!(c.set_thinking_level(c.thinking_level()), None);
    }

    #[test]
    fn credentials_are_checked_for_the_current_model() {
        let (_dir, mut c) = choice(&[("a", true)], &[]);
        assert_eq!(c.check_credentials(), Ok(()));
        let (provider, id) = without_key(&c);
        let keyless = c.registry().find_any(&provider, &id).cloned();
        c.model = keyless;
        assert_eq!(
            c.check_credentials(),
            Err(SessionError::NoApiKey(provider.clone()))
        );
        c.model = None;
        assert_eq!(
            c.check_credentials(),
            Err(SessionError::NoApiKey("the selected model".into()))
        );
    }

    #[test]
    fn restore_takes_the_branch_model_unless_the_command_line_named_one() {
        let (_dir, mut c) = choice(&[("a", true), ("plain", false)], &[]);
        let branch = ("p".to_string(), "plain".to_string());
        c.restore(Some(&branch), Some(ThinkingLevel::High), true);
        assert_eq!(c.model().unwrap().id, "a");
        assert_eq!(c.thinking_level(), ThinkingLevel::High);
        c.restore(Some(&branch), None, false);
        assert_eq!(c.model().unwrap().id, "plain");
        assert_eq!(c.thinking_level(), ThinkingLevel::Off);
        let gone = without_key(&c);
        c.restore(Some(&gone), None, false);
        assert_eq!(c.model().unwrap().id, "plain", "no credentials, not taken");
    }
}
