//! The model and the thinking level as session config options (`session/set_config_option`,
//! stable in protocol v1; `session/set_model` is not): one select of every model with
//! credentials in tau's registry, as `provider/id`, and one of the levels the current model
//! accepts.

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
};
use tau_protocol::ThinkingLevel;
use tau_session::AgentSession;

use crate::AcpError;

/// The option id of the model select.
pub const MODEL: &str = "model";
/// The option id of the thinking-level select.
pub const THINKING: &str = "thinking";

/// The session's options as they stand. None without a model (nothing to choose from).
pub fn current(session: &AgentSession) -> Vec<SessionConfigOption> {
    let models = session.models();
    let Some(model) = models.model() else {
        return Vec::new();
    };
    let mut choices: Vec<SessionConfigSelectOption> = models
        .available_models()
        .iter()
        .map(|m| {
            SessionConfigSelectOption::new(format!("{}/{}", m.provider, m.id), m.name.clone())
                .description(format!("{}/{}", m.provider, m.id))
        })
        .collect();
    let current_model = format!("{}/{}", model.provider, model.id);
    if !choices.iter().any(|c| c.value.0.as_ref() == current_model) {
        // Chosen with `--model` or from the session file without being listed as available.
        choices.insert(
            0,
            SessionConfigSelectOption::new(current_model.clone(), model.name.clone()),
        );
    }
    let levels: Vec<SessionConfigSelectOption> = models
        .available_thinking_levels()
        .into_iter()
        .map(|level| SessionConfigSelectOption::new(level_id(level), level_name(level)))
        .collect();
    vec![
        SessionConfigOption::select(MODEL, "Model", current_model, choices)
            .category(SessionConfigOptionCategory::Model),
        SessionConfigOption::select(
            THINKING,
            "Thinking",
            level_id(models.thinking_level()),
            levels,
        )
        .category(SessionConfigOptionCategory::ThoughtLevel),
    ]
}

/// Applies one choice through the session (which records and announces it).
pub async fn set(session: &mut AgentSession, option: &str, value: &str) -> Result<(), AcpError> {
    match option {
        MODEL => {
            let (provider, id) = value.split_once('/').ok_or_else(|| {
                AcpError::InvalidParams(format!("\"{value}\" is not a provider/model id"))
            })?;
            session
                .set_model(provider, id)
                .await
                .map(|_| ())
                .map_err(|e| AcpError::InvalidParams(e.to_string()))
        }
        THINKING => {
            let level = parse_level(value).ok_or_else(|| {
                AcpError::InvalidParams(format!("\"{value}\" is not a thinking level"))
            })?;
            session.set_thinking_level(level).await;
            Ok(())
        }
        other => Err(AcpError::InvalidParams(format!(
            "tau has no config option \"{other}\""
        ))),
    }
}

fn level_id(level: ThinkingLevel) -> String {
    serde_json::to_value(level)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn level_name(level: ThinkingLevel) -> String {
    let id = level_id(level);
    let mut chars = id.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => id,
    }
}

fn parse_level(value: &str) -> Option<ThinkingLevel> {
    serde_json::from_value(serde_json::Value::String(value.to_string())).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_round_trip_through_their_ids() {
        for level in ThinkingLevel::ALL {
            assert_eq!(parse_level(&level_id(level)), Some(level));
        }
        assert_eq!(level_name(ThinkingLevel::Xhigh), "Xhigh");
        assert_eq!(parse_level("extreme"), None);
    }
}
