//! The model description pi puts on the wire, and thinking levels.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Reasoning effort requested from a model. Models without reasoning run at `Off`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    Off,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
}

impl ThinkingLevel {
    /// Every level, in increasing order of effort.
    pub const ALL: [ThinkingLevel; 6] = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
        ThinkingLevel::Xhigh,
    ];

    /// The level's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh => "xhigh",
        }
    }

    /// The allowed names, for error messages.
    pub fn names() -> String {
        Self::ALL.map(Self::as_str).join(", ")
    }
}

impl fmt::Display for ThinkingLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no thinking level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid thinking level \"{0}\". Valid levels: off, minimal, low, medium, high, xhigh")]
pub struct UnknownThinkingLevel(pub String);

impl FromStr for ThinkingLevel {
    type Err = UnknownThinkingLevel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|level| level.as_str() == s)
            .ok_or_else(|| UnknownThinkingLevel(s.to_string()))
    }
}

/// Per-model mapping of thinking levels to provider values. A missing key uses the provider's
/// default mapping, `null` marks the level unsupported, and `xhigh` exists only when present.
pub type ThinkingLevelMap = serde_json::Map<String, Value>;

/// What a model accepts as input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InputModality {
    Text,
    Image,
}

/// Prices in dollars per million tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelCost {
    #[serde(serialize_with = "crate::js_number::serialize")]
    pub input: f64,
    #[serde(serialize_with = "crate::js_number::serialize")]
    pub output: f64,
    #[serde(serialize_with = "crate::js_number::serialize")]
    pub cache_read: f64,
    #[serde(serialize_with = "crate::js_number::serialize")]
    pub cache_write: f64,
}

/// A model as pi describes it on the wire (`get_state.model`, `set_model`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Model {
    pub id: String,
    pub name: String,
    /// The wire API: `anthropic-messages`, `openai-completions`, `openai-responses`,
    /// `google-generative-ai`, or another name pi knows.
    pub api: String,
    pub provider: String,
    pub base_url: String,
    pub reasoning: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level_map: Option<ThinkingLevelMap>,
    pub input: Vec<InputModality>,
    pub cost: ModelCost,
    pub context_window: u64,
    pub max_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<serde_json::Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compat: Option<Value>,
}

impl Model {
    /// The thinking levels this model supports, lowest first (pi 0.79's rule).
    pub fn supported_thinking_levels(&self) -> Vec<ThinkingLevel> {
        if !self.reasoning {
            return vec![ThinkingLevel::Off];
        }
        let map = self.thinking_level_map.as_ref();
        let entry = |level: ThinkingLevel| map.and_then(|m| m.get(level.as_str()));
        ThinkingLevel::ALL
            .into_iter()
            .filter(|&level| match level {
                ThinkingLevel::Xhigh => matches!(entry(level), Some(v) if !v.is_null()),
                _ => !matches!(entry(level), Some(Value::Null)),
            })
            .collect()
    }
}

/// Clamps `requested` to what `supported` offers: the first supported level at or above it,
/// else the nearest below it (pi's rule). With no model only `off` is supported.
pub fn clamp_thinking_level(
    requested: ThinkingLevel,
    supported: &[ThinkingLevel],
) -> ThinkingLevel {
    let up = supported.iter().copied().filter(|&l| l >= requested).min();
    let down = supported.iter().copied().filter(|&l| l < requested).max();
    up.or(down).unwrap_or(ThinkingLevel::Off)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(reasoning: bool, map: Option<Value>) -> Model {
        Model {
            id: "m".into(),
            name: "M".into(),
            api: "openai-completions".into(),
            provider: "p".into(),
            base_url: String::new(),
            reasoning,
            thinking_level_map: map.and_then(|v| v.as_object().cloned()),
            input: vec![InputModality::Text],
            cost: ModelCost::default(),
            context_window: 1000,
            max_tokens: 100,
            headers: None,
            compat: None,
        }
    }

    #[test]
    fn levels_parse_and_reject_unknown() {
        assert_eq!("xhigh".parse::<ThinkingLevel>(), Ok(ThinkingLevel::Xhigh));
        let err = "bogus".parse::<ThinkingLevel>().unwrap_err();
        assert!(
            err.to_string()
                .contains("off, minimal, low, medium, high, xhigh")
        );
    }

    #[test]
    fn supported_levels_follow_the_map() {
        assert_eq!(
            model(false, None).supported_thinking_levels(),
            vec![ThinkingLevel::Off]
        );
        assert_eq!(model(true, None).supported_thinking_levels().len(), 5);
        let gpt = model(
            true,
            Some(serde_json::json!({"off": null, "xhigh": "xhigh"})),
        );
        assert_eq!(
            gpt.supported_thinking_levels(),
            vec![
                ThinkingLevel::Minimal,
                ThinkingLevel::Low,
                ThinkingLevel::Medium,
                ThinkingLevel::High,
                ThinkingLevel::Xhigh
            ]
        );
    }

    #[test]
    fn clamping_searches_up_then_down() {
        use ThinkingLevel::*;
        assert_eq!(
            clamp_thinking_level(Xhigh, &[Off, Minimal, Low, Medium, High]),
            High
        );
        assert_eq!(clamp_thinking_level(Off, &[Minimal, Low]), Minimal);
        assert_eq!(clamp_thinking_level(Medium, &[Off]), Off);
        assert_eq!(clamp_thinking_level(High, &[]), Off);
    }
}
