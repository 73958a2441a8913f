//! `/tree`: the session's entries (the `get_tree` answer) as the lines of a picker. Only the
//! entries a person navigates by are listed (messages, shell commands, summaries); the others
//! (tool results, model and label changes) pass their place to their children. A chain stays at
//! one indent; a fork indents each branch under it, as a file tree does.

use serde::Deserialize;
use serde_json::Value;
use tau_protocol::AssistantContent;

/// One line of the picker.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeRow {
    pub entry_id: String,
    /// What the line shows, indent included.
    pub label: String,
    /// On the path from the root to the current leaf.
    pub on_path: bool,
}

/// The rows of `tree` (the `tree` array of `get_tree`), depth first, oldest branch first, and
/// the index of the row of the current leaf (or of its nearest listed ancestor).
pub fn rows(tree: &[Value], leaf_id: Option<&str>) -> (Vec<TreeRow>, usize) {
    let mut path = Vec::new();
    if let Some(leaf) = leaf_id {
        find_path(tree, leaf, &mut path);
    }
    let mut out = Vec::new();
    walk(tree, "", &path, &mut out);
    let selected = path
        .iter()
        .rev()
        .find_map(|id| out.iter().position(|row| row.entry_id == *id))
        .unwrap_or(out.len().saturating_sub(1));
    (out, selected)
}

/// Fills `path` with the ids from a root to `target`; false when it is not in `nodes`.
fn find_path(nodes: &[Value], target: &str, path: &mut Vec<String>) -> bool {
    for node in nodes {
        let id = node["entry"]["id"].as_str().unwrap_or_default();
        path.push(id.to_string());
        if id == target || find_path(children(node), target, path) {
            return true;
        }
        path.pop();
    }
    false
}

fn children(node: &Value) -> &[Value] {
    node["children"].as_array().map_or(&[], Vec::as_slice)
}

/// The listed nodes among `nodes`: a node that is not listed stands for its children.
fn listed(nodes: &[Value]) -> Vec<&Value> {
    let mut out = Vec::new();
    for node in nodes {
        if describe(node).is_some() {
            out.push(node);
        } else {
            out.extend(listed(children(node)));
        }
    }
    out
}

/// `indent` is what every line of this level starts with: the bars of the forks above.
fn walk(nodes: &[Value], indent: &str, path: &[String], out: &mut Vec<TreeRow>) {
    let shown = listed(nodes);
    let forked = shown.len() > 1;
    for (i, node) in shown.iter().enumerate() {
        let id = node["entry"]["id"].as_str().unwrap_or_default().to_string();
        let on_path = path.contains(&id);
        let last = i + 1 == shown.len();
        let (branch, below) = match (forked, last) {
            (false, _) => ("", String::from(indent)),
            (true, false) => ("├─ ", format!("{indent}│  ")),
            (true, true) => ("└─ ", format!("{indent}   ")),
        };
        let mark = if on_path { "● " } else { "  " };
        let mut label = format!(
            "{indent}{branch}{mark}{}",
            describe(node).unwrap_or_default()
        );
        if let Some(name) = node["label"].as_str() {
            label.push_str(&format!("  [{name}]"));
        }
        out.push(TreeRow {
            entry_id: id,
            label,
            on_path,
        });
        walk(children(node), &below, path, out);
    }
}

/// What a listed entry's line says; `None` for an entry that is not listed.
fn describe(node: &Value) -> Option<String> {
    let entry = &node["entry"];
    match entry["type"].as_str()? {
        "message" => {
            let message = &entry["message"];
            match message["role"].as_str()? {
                "user" => Some(format!(
                    "user: {}",
                    one_line(&crate::text::entry_content_text(&message["content"]))
                )),
                "assistant" => {
                    let content = Vec::<AssistantContent>::deserialize(&message["content"]).ok()?;
                    let text = crate::text::assistant_text(&content);
                    if !text.trim().is_empty() {
                        return Some(format!("assistant: {}", one_line(&text)));
                    }
                    let tools: Vec<&str> = content
                        .iter()
                        .filter_map(|block| match block {
                            AssistantContent::ToolCall(call) => Some(call.name.as_str()),
                            _ => None,
                        })
                        .collect();
                    if tools.is_empty() {
                        let error = message["errorMessage"].as_str().unwrap_or("(no text)");
                        Some(format!("assistant: {}", one_line(error)))
                    } else {
                        Some(format!("assistant → {}", tools.join(", ")))
                    }
                }
                "bashExecution" => Some(format!(
                    "$ {}",
                    one_line(message["command"].as_str().unwrap_or_default())
                )),
                "custom" => Some(format!(
                    "{}: {}",
                    message["customType"].as_str().unwrap_or("extension"),
                    one_line(&crate::text::entry_content_text(&message["content"]))
                )),
                _ => None,
            }
        }
        "compaction" => Some("── compaction ──".into()),
        "branch_summary" => Some(format!(
            "branch summary: {}",
            one_line(entry["summary"].as_str().unwrap_or_default())
        )),
        "custom_message" => Some(format!(
            "{}: {}",
            entry["customType"].as_str().unwrap_or("extension"),
            one_line(&crate::text::entry_content_text(&entry["content"]))
        )),
        _ => None,
    }
}

/// A text on one line of the picker.
fn one_line(text: &str) -> String {
    crate::text::one_line(text, 90)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(id: &str, role: &str, text: &str, children: Vec<Value>) -> Value {
        json!({
            "entry": {"type": "message", "id": id, "message": {"role": role, "content": [{"type": "text", "text": text}]}},
            "children": children,
        })
    }

    #[test]
    fn a_fork_indents_its_branches_and_the_leaf_path_is_marked() {
        let tool_result = json!({
            "entry": {"type": "message", "id": "r1", "message": {"role": "toolResult", "content": []}},
            "children": [
                message("a2", "assistant", "done", vec![
                    message("u2", "user", "second", vec![message("a3", "assistant", "two", vec![])]),
                    message("u3", "user", "other second", vec![]),
                ]),
            ],
        });
        let tree = vec![json!({
            "entry": {"type": "model_change", "id": "m"},
            "children": [message("u1", "user", "first\nline", vec![tool_result])],
        })];
        let (rows, selected) = rows(&tree, Some("a3"));
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "● user: first line",
                "● assistant: done",
                "├─ ● user: second",
                "│  ● assistant: two",
                "└─   user: other second",
            ]
        );
        assert_eq!(rows[selected].entry_id, "a3");
        assert!(!rows[4].on_path);
    }

    #[test]
    fn a_leaf_that_is_not_listed_selects_its_nearest_listed_ancestor() {
        let tree = vec![message(
            "u1",
            "user",
            "hi",
            vec![json!({"entry": {"type": "label", "id": "l"}, "children": []})],
        )];
        let (rows, selected) = rows(&tree, Some("l"));
        assert_eq!(rows.len(), 1);
        assert_eq!(selected, 0);
    }
}
