//! Changes an extension makes to a model object in place. pi hands extensions the registry's
//! own model objects (`ctx.model`, `ctx.modelRegistry.getAll()`), so an extension that lowers
//! a model's `contextWindow` changes what the session compacts at and what `get_state` shows;
//! the extension host reports such writes, and the registry keeps them across reloads.

use serde_json::{Map, Value};
use tau_protocol::Model;

/// The fields of a model an extension may change: those that describe the model to tau, not
/// where or how it is reached (`baseUrl`, `api`, headers stay with `registerProvider`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelPatch {
    pub name: Option<String>,
    pub reasoning: Option<bool>,
    pub context_window: Option<u64>,
    pub max_tokens: Option<u64>,
}

impl ModelPatch {
    /// The patch in the host's `patch` object (model JSON names); a field of the wrong type
    /// or another field is an error naming it.
    pub fn from_json(patch: &Map<String, Value>) -> Result<Self, String> {
        let mut out = Self::default();
        for (key, value) in patch {
            let positive = || {
                value
                    .as_u64()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("{key} must be a positive integer"))
            };
            match key.as_str() {
                "name" => {
                    out.name = Some(value.as_str().ok_or("name must be a string")?.to_string());
                }
                "reasoning" => {
                    out.reasoning = Some(value.as_bool().ok_or("reasoning must be a boolean")?);
                }
                "contextWindow" => out.context_window = Some(positive()?),
                "maxTokens" => out.max_tokens = Some(positive()?),
                other => return Err(format!("{other} cannot be changed on a model")),
            }
        }
        Ok(out)
    }

    /// Lays `later` over this patch.
    pub fn merge(&mut self, later: &ModelPatch) {
        if later.name.is_some() {
            self.name.clone_from(&later.name);
        }
        self.reasoning = later.reasoning.or(self.reasoning);
        self.context_window = later.context_window.or(self.context_window);
        self.max_tokens = later.max_tokens.or(self.max_tokens);
    }

    /// Applies the patch; true when the model changed.
    pub fn apply(&self, model: &mut Model) -> bool {
        let before = (
            model.name.clone(),
            model.reasoning,
            model.context_window,
            model.max_tokens,
        );
        if let Some(name) = &self.name {
            model.name.clone_from(name);
        }
        model.reasoning = self.reasoning.unwrap_or(model.reasoning);
        model.context_window = self.context_window.unwrap_or(model.context_window);
        model.max_tokens = self.max_tokens.unwrap_or(model.max_tokens);
        before
            != (
                model.name.clone(),
                model.reasoning,
                model.context_window,
                model.max_tokens,
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn reads_the_fields_an_extension_may_change_and_refuses_the_rest() {
        let patch = ModelPatch::from_json(&map(json!({"contextWindow": 200000, "name": "Capped"})));
        assert_eq!(
            patch,
            Ok(ModelPatch {
                name: Some("Capped".into()),
                context_window: Some(200_000),
                ..ModelPatch::default()
            })
        );
        assert!(ModelPatch::from_json(&map(json!({"contextWindow": 0}))).is_err());
        assert!(ModelPatch::from_json(&map(json!({"contextWindow": "big"}))).is_err());
        assert!(ModelPatch::from_json(&map(json!({"baseUrl": "http://x"}))).is_err());
    }

    #[test]
    fn a_later_patch_wins_field_by_field() {
        let mut first = ModelPatch {
            context_window: Some(100),
            max_tokens: Some(10),
            ..ModelPatch::default()
        };
        first.merge(&ModelPatch {
            context_window: Some(200),
            ..ModelPatch::default()
        });
        assert_eq!(first.context_window, Some(200));
        assert_eq!(first.max_tokens, Some(10));
    }
}
