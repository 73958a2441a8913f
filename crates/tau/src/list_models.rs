//! `--list-models [search]`: the models that have credentials, as pi prints them (a table of
//! provider, model, context, max output, thinking and image support, sorted by provider and
//! id), narrowed by pi's fuzzy search when a search is given.

use tau_protocol::{InputModality, Model};

/// The table's text, or the line pi prints when nothing is there.
pub fn table(models: &[&Model], search: Option<&str>) -> String {
    if models.is_empty() {
        return "No models available. Set a provider's API key in the environment, store one \
                in auth.json, or add a model to models.json in the agent directory.\n"
            .to_string();
    }
    let mut shown: Vec<&Model> = match search.map(str::trim).filter(|s| !s.is_empty()) {
        Some(query) => models
            .iter()
            .copied()
            .filter(|m| matches_all(query, &format!("{} {}", m.provider, m.id)))
            .collect(),
        None => models.to_vec(),
    };
    if shown.is_empty() {
        return format!("No models matching \"{}\"\n", search.unwrap_or_default());
    }
    shown.sort_by(|a, b| {
        (a.provider.to_lowercase(), a.id.to_lowercase())
            .cmp(&(b.provider.to_lowercase(), b.id.to_lowercase()))
    });
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
    let mut rows = vec![[
        "provider".to_string(),
        "model".into(),
        "context".into(),
        "max-out".into(),
        "thinking".into(),
        "images".into(),
    ]];
    for m in shown {
        rows.push([
            m.provider.clone(),
            m.id.clone(),
            tokens(m.context_window),
            tokens(m.max_tokens),
            yes_no(m.reasoning),
            yes_no(m.input.contains(&InputModality::Image)),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(&cells.join("  "));
        out.push('\n');
    }
    out
}

/// `200000` → `200K`, `1000000` → `1M`, `1500000` → `1.5M`.
fn tokens(count: u64) -> String {
    let scaled = |n: f64, unit: &str| {
        if n.fract() == 0.0 {
            format!("{n}{unit}")
        } else {
            format!("{n:.1}{unit}")
        }
    };
    if count >= 1_000_000 {
        scaled(count as f64 / 1_000_000.0, "M")
    } else if count >= 1_000 {
        scaled(count as f64 / 1_000.0, "K")
    } else {
        count.to_string()
    }
}

/// pi's fuzzy filter: every whitespace- or slash-separated token of the query is found in the
/// text as a subsequence (ignoring case), or, for a token like `gpt4`/`4o`, with its letters
/// and digits swapped.
fn matches_all(query: &str, text: &str) -> bool {
    let text = text.to_lowercase();
    query
        .split(|c: char| c.is_whitespace() || c == '/')
        .filter(|t| !t.is_empty())
        .all(|token| {
            let token = token.to_lowercase();
            subsequence(&token, &text) || swapped(&token).is_some_and(|s| subsequence(&s, &text))
        })
}

fn subsequence(needle: &str, haystack: &str) -> bool {
    let mut chars = haystack.chars();
    needle.chars().all(|c| chars.any(|h| h == c))
}

fn swapped(token: &str) -> Option<String> {
    let split = token
        .find(|c: char| c.is_ascii_digit() != token.starts_with(|d: char| d.is_ascii_digit()))?;
    let (head, tail) = token.split_at(split);
    let uniform = |s: &str, digits: bool| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_digit() == digits && c.is_ascii_alphanumeric())
    };
    let head_digits = head.starts_with(|c: char| c.is_ascii_digit());
    (uniform(head, head_digits) && uniform(tail, !head_digits)).then(|| format!("{tail}{head}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_search_and_table_follow_pi() {
        assert_eq!(tokens(200_000), "200K");
        assert_eq!(tokens(1_000_000), "1M");
        assert_eq!(tokens(1_500_000), "1.5M");
        assert_eq!(tokens(128_500), "128.5K");
        assert_eq!(tokens(999), "999");
        assert!(matches_all("son 4", "anthropic claude-sonnet-4-5"));
        assert!(matches_all(
            "anthropic/sonnet",
            "anthropic claude-sonnet-4-5"
        ));
        assert!(!matches_all("gemini", "anthropic claude-sonnet-4-5"));
        assert!(matches_all("4o", "openai gpt-4o"));
        assert!(matches_all("o4", "openai gpt-4o"));
        assert_eq!(swapped("gpt4"), Some("4gpt".into()));
        assert_eq!(swapped("4o"), Some("o4".into()));
        assert_eq!(swapped("g4o"), None);
    }
}
