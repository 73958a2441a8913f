//! What one tool call needs in every tool: the abort text and racing work against
//! cancellation, argument checks for calls that skipped the loop's schema validation, result
//! text blocks, and numbers printed as pi's template strings print them.

use serde_json::{Map, Value};
use tau_protocol::{TextContent, UserContentBlock};
use tokio_util::sync::CancellationToken;

pub(crate) const ABORTED: &str = "Operation aborted";

/// `Operation aborted` once `cancel` has fired. The file tools ask before they start and again
/// right before their change lands.
pub(crate) fn abort_if_cancelled(cancel: &CancellationToken) -> Result<(), String> {
    if cancel.is_cancelled() {
        Err(ABORTED.into())
    } else {
        Ok(())
    }
}

/// Runs `future` unless `cancel` fires first, in which case the call is aborted.
pub(crate) async fn until_cancelled<F: Future>(
    cancel: &CancellationToken,
    future: F,
) -> Result<F::Output, String> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(ABORTED.into()),
        output = future => Ok(output),
    }
}

pub(crate) fn text_block(text: String) -> UserContentBlock {
    UserContentBlock::Text(TextContent {
        text,
        text_signature: None,
    })
}

/// A number as JavaScript prints it in a template string (`3`, not `3.0`; `-0` as `0`), since
/// pi's messages echo arguments that way.
pub(crate) fn js_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e21 {
        format!("{:.0}", n + 0.0)
    } else {
        n.to_string()
    }
}

/// pi's `Validation failed for tool …` text, as the agent loop words it, so a tool called
/// without the loop fails the same way.
pub(crate) fn validation_error(
    tool: &str,
    problems: &[String],
    arguments: &Map<String, Value>,
) -> String {
    let list: Vec<String> = problems.iter().map(|p| format!("  - {p}")).collect();
    let received = serde_json::to_string_pretty(arguments).unwrap_or_default();
    format!(
        "Validation failed for tool \"{tool}\":\n{}\n\nReceived arguments:\n{received}",
        list.join("\n")
    )
}

/// The file tools' argument checks, strict as the schema (the search tools coerce first, see
/// `walk::Args`).
pub(crate) mod args {
    use serde_json::{Map, Value};

    use super::validation_error;

    /// A required string argument.
    pub(crate) fn string(
        tool: &str,
        arguments: &Map<String, Value>,
        key: &str,
    ) -> Result<String, String> {
        match arguments.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            None => Err(validation_error(
                tool,
                &[format!("{key}: must have required property '{key}'")],
                arguments,
            )),
            Some(_) => Err(validation_error(
                tool,
                &[format!("{key}: must be string")],
                arguments,
            )),
        }
    }

    /// An optional number; numeric strings are accepted as the loop's coercion would.
    pub(crate) fn optional_number(
        tool: &str,
        arguments: &Map<String, Value>,
        key: &str,
    ) -> Result<Option<f64>, String> {
        let parsed = match arguments.get(key) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Number(n)) => n.as_f64(),
            Some(Value::String(s)) if !s.trim().is_empty() => {
                s.trim().parse::<f64>().ok().filter(|x| x.is_finite())
            }
            Some(_) => None,
        };
        match parsed {
            Some(x) => Ok(Some(x)),
            None => Err(validation_error(
                tool,
                &[format!("{key}: must be number")],
                arguments,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_like_javascript() {
        assert_eq!(js_number(3000.0), "3000");
        assert_eq!(js_number(5.0), "5");
        assert_eq!(js_number(2.5), "2.5");
        assert_eq!(js_number(0.25), "0.25");
        assert_eq!(js_number(-1.0), "-1");
        assert_eq!(js_number(-0.0), "0");
    }
}
