//! An MCP server's form through the editor (decision T129): when the client declared
//! `elicitation.form`, the server's message and schema go to it as ACP's
//! `elicitation/create` and the editor draws the form; its answer goes back to the server as
//! it came. A request the client fails is a cancellation, never an acceptance.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{CreateElicitationRequest, CreateElicitationResponse};
use serde_json::{Map, Value, json};
use tau_mcp::{ElicitationAnswer, ElicitationRequest};
use tau_session::mcp_client::FormFrontEnd;

/// One session's way to the editor's forms.
pub struct ClientForms {
    pub cx: ConnectionTo<Client>,
    pub session: String,
}

impl FormFrontEnd for ClientForms {
    fn ask<'a>(
        &'a self,
        server: &'a str,
        request: &'a ElicitationRequest,
    ) -> std::pin::Pin<Box<dyn Future<Output = ElicitationAnswer> + Send + 'a>> {
        Box::pin(async move {
            // Built from JSON: the schema passes as the server wrote it, and ACP's types
            // read it with their own defaults.
            let asked = json!({
                "mode": "form",
                "sessionId": self.session,
                "message": format!("MCP server \"{server}\": {}", request.message),
                "requestedSchema": request.schema,
            });
            let asked: CreateElicitationRequest = match serde_json::from_value(asked) {
                Ok(asked) => asked,
                Err(err) => {
                    tracing::warn!("{server}'s form cannot be sent to the editor: {err}");
                    return ElicitationAnswer::Cancel;
                }
            };
            match self.cx.send_request(asked).block_task().await {
                Ok(answer) => answer_of(&answer),
                Err(err) => {
                    tracing::debug!("elicitation/create failed: {err}");
                    ElicitationAnswer::Cancel
                }
            }
        })
    }
}

/// The editor's answer in tau's terms (read from its JSON: the action's shape is flattened).
fn answer_of(answer: &CreateElicitationResponse) -> ElicitationAnswer {
    let value = serde_json::to_value(answer).unwrap_or(Value::Null);
    match value["action"].as_str() {
        Some("accept") => ElicitationAnswer::Accept(
            value["content"]
                .as_object()
                .cloned()
                .unwrap_or_else(Map::new),
        ),
        Some("decline") => ElicitationAnswer::Decline,
        _ => ElicitationAnswer::Cancel,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_editors_answers_map_to_the_servers() {
        let accept: CreateElicitationResponse =
            serde_json::from_value(json!({"action": "accept", "content": {"name": "Ada", "n": 3}}))
                .unwrap();
        assert_eq!(
            answer_of(&accept),
            ElicitationAnswer::Accept(json!({"name": "Ada", "n": 3}).as_object().unwrap().clone())
        );
        let decline: CreateElicitationResponse =
            serde_json::from_value(json!({"action": "decline"})).unwrap();
        assert_eq!(answer_of(&decline), ElicitationAnswer::Decline);
        let cancel: CreateElicitationResponse =
            serde_json::from_value(json!({"action": "cancel"})).unwrap();
        assert_eq!(answer_of(&cancel), ElicitationAnswer::Cancel);
    }
}
