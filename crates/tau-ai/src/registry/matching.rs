//! Matching a user's model pattern against a list of models: exact references, fuzzy
//! substring matches with alias preference, and `:<thinking level>` suffixes
//! (tools-resources §7.4 step 5).

use std::cmp::Ordering;

use tau_protocol::{Model, ThinkingLevel};

/// How an unknown `:suffix` is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SuffixMode {
    /// `--model`: the suffix must be a thinking level, else nothing matches, so that a typo
    /// never silently selects a different model.
    Strict,
    /// `--models`/`enabledModels`: an invalid suffix is dropped with a warning.
    Lenient,
}

/// The outcome of [`parse_model_pattern`].
#[derive(Debug, Default)]
pub(crate) struct PatternMatch<'a> {
    pub(crate) model: Option<&'a Model>,
    pub(crate) thinking_level: Option<ThinkingLevel>,
    pub(crate) warning: Option<String>,
}

/// Whether `id` names a moving alias rather than a dated snapshot: it ends in `-latest`, or
/// does not end in `-YYYYMMDD`.
pub(crate) fn is_alias(id: &str) -> bool {
    if id.ends_with("-latest") {
        return true;
    }
    let bytes = id.as_bytes();
    let dated = bytes.len() >= 9
        && bytes[bytes.len() - 9] == b'-'
        && bytes[bytes.len() - 8..].iter().all(u8::is_ascii_digit);
    !dated
}

/// ASCII characters in the order ICU's root collation sorts them (what JavaScript's
/// `localeCompare` uses): punctuation and symbols, then digits, then letters with each
/// lowercase letter before its uppercase form.
const ICU_ASCII_ORDER: &str = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789aAbBcCdDeEfFgGhHiIjJkKlLmMnNoOpPqQrRsStTuUvVwWxXyYzZ";

/// The primary weight of a character: letters of either case weigh the same.
fn primary_weight(c: char) -> u32 {
    let folded = c.to_ascii_lowercase();
    match ICU_ASCII_ORDER.find(folded) {
        Some(pos) if c.is_ascii() => pos as u32,
        // Beyond ASCII, lower-cased code point order is a close enough stand-in; model ids
        // are ASCII in practice.
        _ => 0x100 + c.to_lowercase().next().map_or(c as u32, |l| l as u32),
    }
}

/// Compares two strings the way JavaScript's default `localeCompare` does for ASCII text:
/// first by characters ignoring case (with ICU's punctuation order), then lowercase first.
pub(crate) fn locale_compare(a: &str, b: &str) -> Ordering {
    let primary = a
        .chars()
        .map(primary_weight)
        .cmp(b.chars().map(primary_weight));
    primary.then_with(|| {
        a.chars()
            .map(|c| c.is_uppercase())
            .cmp(b.chars().map(|c| c.is_uppercase()))
    })
}

/// An exact `provider/id` or bare `id` reference (case-insensitive). An ambiguous reference
/// matches nothing, so that the caller falls through to fuzzy matching.
pub(crate) fn find_exact_reference<'a>(reference: &str, models: &[&'a Model]) -> Option<&'a Model> {
    let trimmed = reference.trim();
    if trimmed.is_empty() {
        return None;
    }
    let lower = trimmed.to_lowercase();

    let canonical: Vec<&Model> = models
        .iter()
        .copied()
        .filter(|m| format!("{}/{}", m.provider, m.id).to_lowercase() == lower)
        .collect();
    match canonical.len() {
        1 => return Some(canonical[0]),
        n if n > 1 => return None,
        _ => {}
    }

    if let Some((provider, id)) = trimmed.split_once('/') {
        let (provider, id) = (provider.trim().to_lowercase(), id.trim().to_lowercase());
        if !provider.is_empty() && !id.is_empty() {
            let matches: Vec<&Model> = models
                .iter()
                .copied()
                .filter(|m| m.provider.to_lowercase() == provider && m.id.to_lowercase() == id)
                .collect();
            match matches.len() {
                1 => return Some(matches[0]),
                n if n > 1 => return None,
                _ => {}
            }
        }
    }

    let mut by_id = models
        .iter()
        .copied()
        .filter(|m| m.id.to_lowercase() == lower);
    match (by_id.next(), by_id.next()) {
        (Some(m), None) => Some(m),
        _ => None,
    }
}

/// An exact reference, else the best substring match on id or name: aliases before dated
/// snapshots, and within each group the id that sorts last.
pub(crate) fn try_match<'a>(pattern: &str, models: &[&'a Model]) -> Option<&'a Model> {
    if let Some(exact) = find_exact_reference(pattern, models) {
        return Some(exact);
    }
    let needle = pattern.to_lowercase();
    let matches: Vec<&Model> = models
        .iter()
        .copied()
        .filter(|m| {
            m.id.to_lowercase().contains(&needle) || m.name.to_lowercase().contains(&needle)
        })
        .collect();
    let (mut aliases, mut dated): (Vec<&Model>, Vec<&Model>) =
        matches.into_iter().partition(|m| is_alias(&m.id));
    let group = if aliases.is_empty() {
        &mut dated
    } else {
        &mut aliases
    };
    // Stable, so models with equal ids keep registry order.
    group.sort_by(|a, b| locale_compare(&b.id, &a.id));
    group.first().copied()
}

/// Splits `pattern` at its last colon when what follows is a thinking level.
pub(crate) fn split_level_suffix(pattern: &str) -> (&str, Option<ThinkingLevel>) {
    match pattern.rsplit_once(':') {
        Some((prefix, suffix)) => match suffix.parse::<ThinkingLevel>() {
            Ok(level) => (prefix, Some(level)),
            Err(_) => (pattern, None),
        },
        None => (pattern, None),
    }
}

/// Matches the whole pattern first (ids may contain colons, like `llama3:8b`), then peels
/// `:suffix` parts off the end, each of which may name a thinking level.
pub(crate) fn parse_model_pattern<'a>(
    pattern: &str,
    models: &[&'a Model],
    mode: SuffixMode,
) -> PatternMatch<'a> {
    if let Some(model) = try_match(pattern, models) {
        return PatternMatch {
            model: Some(model),
            ..PatternMatch::default()
        };
    }
    let Some((prefix, suffix)) = pattern.rsplit_once(':') else {
        return PatternMatch::default();
    };
    match suffix.parse::<ThinkingLevel>() {
        Ok(level) => {
            let mut inner = parse_model_pattern(prefix, models, mode);
            if inner.model.is_some() && inner.warning.is_none() {
                inner.thinking_level = Some(level);
            }
            inner
        }
        Err(_) if mode == SuffixMode::Strict => PatternMatch::default(),
        Err(_) => {
            let inner = parse_model_pattern(prefix, models, mode);
            match inner.model {
                Some(model) => PatternMatch {
                    model: Some(model),
                    thinking_level: None,
                    warning: Some(format!(
                        "Invalid thinking level \"{suffix}\" in pattern \"{pattern}\". Using default instead."
                    )),
                },
                None => inner,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(provider: &str, id: &str) -> Model {
        Model {
            id: id.into(),
            name: id.into(),
            api: "openai-completions".into(),
            provider: provider.into(),
            base_url: "http://x".into(),
            reasoning: true,
            thinking_level_map: None,
            input: vec![tau_protocol::InputModality::Text],
            cost: tau_protocol::ModelCost::default(),
            context_window: 1000,
            max_tokens: 100,
            headers: None,
            compat: None,
        }
    }

    #[test]
    fn aliases_are_undated_or_latest() {
        assert!(is_alias("claude-sonnet-4-5"));
        assert!(is_alias("claude-3-5-haiku-latest"));
        assert!(!is_alias("claude-sonnet-4-5-20250929"));
        assert!(is_alias("model-2025092")); // seven digits is not a date
        assert!(is_alias("20250929"));
    }

    #[test]
    fn locale_compare_follows_icu_root_order() {
        // Each pair was checked against Node's `a.localeCompare(b)`.
        let cases = [
            ("a", "A", Ordering::Less),
            ("a-b", "a_b", Ordering::Greater),
            ("a.b", "a-b", Ordering::Greater),
            ("a:b", "a.b", Ordering::Less),
            ("ab", "a-b", Ordering::Greater),
            ("a1", "ab", Ordering::Less),
            ("abc", "ab-", Ordering::Greater),
            ("Ab", "aa", Ordering::Greater),
            ("aB", "ab", Ordering::Greater),
            ("a-1", "a1", Ordering::Less),
            ("gpt-4o", "gpt-4.1", Ordering::Greater),
            ("x/y", "x-y", Ordering::Greater),
            ("claude-sonnet-4-5", "claude-sonnet-4", Ordering::Greater),
        ];
        for (a, b, want) in cases {
            assert_eq!(locale_compare(a, b), want, "{a} vs {b}");
        }
    }

    #[test]
    fn exact_references_reject_ambiguity() {
        let a = model("p1", "shared");
        let b = model("p2", "shared");
        let c = model("p2", "only");
        let models = vec![&a, &b, &c];
        assert_eq!(
            find_exact_reference("ONLY", &models).map(|m| &m.provider[..]),
            Some("p2")
        );
        assert_eq!(
            find_exact_reference("p1/Shared", &models).map(|m| &m.provider[..]),
            Some("p1")
        );
        assert!(find_exact_reference("shared", &models).is_none());
        assert!(find_exact_reference("  ", &models).is_none());
    }

    #[test]
    fn fuzzy_matches_prefer_the_highest_alias() {
        let models = [
            model("a", "claude-sonnet-4-20250514"),
            model("a", "claude-sonnet-4-5"),
            model("a", "claude-sonnet-4-5-20250929"),
            model("a", "claude-sonnet-4-0"),
            model("a", "claude-3-7-sonnet-20250219"),
        ];
        let refs: Vec<&Model> = models.iter().collect();
        assert_eq!(try_match("sonnet", &refs).unwrap().id, "claude-sonnet-4-5");
        // Only dated ids match: the newest wins.
        assert_eq!(
            try_match("2025", &refs[..1]).unwrap().id,
            "claude-sonnet-4-20250514"
        );
        let dated = [model("a", "x-20240101"), model("a", "x-20250101")];
        let refs: Vec<&Model> = dated.iter().collect();
        assert_eq!(try_match("x", &refs).unwrap().id, "x-20250101");
    }

    #[test]
    fn suffixes_split_on_the_last_colon() {
        let plain = model("ollama", "llama3:8b");
        let other = model("or", "openai/gpt-4o:extended");
        let models = vec![&plain, &other];
        let m = parse_model_pattern("llama3:8b", &models, SuffixMode::Strict);
        assert_eq!(m.model.unwrap().id, "llama3:8b");
        assert_eq!(m.thinking_level, None);
        let m = parse_model_pattern("llama3:8b:high", &models, SuffixMode::Strict);
        assert_eq!(m.model.unwrap().id, "llama3:8b");
        assert_eq!(m.thinking_level, Some(ThinkingLevel::High));
        // Strict: an unknown suffix is part of the id, which matches nothing.
        let m = parse_model_pattern("llama3:8b:turbo", &models, SuffixMode::Strict);
        assert!(m.model.is_none());
        // Lenient: dropped with pi's warning.
        let m = parse_model_pattern("llama3:8b:turbo", &models, SuffixMode::Lenient);
        assert_eq!(m.model.unwrap().id, "llama3:8b");
        assert_eq!(
            m.warning.as_deref(),
            Some(
                "Invalid thinking level \"turbo\" in pattern \"llama3:8b:turbo\". Using default instead."
            )
        );
        // A warning from deeper down suppresses the outer level.
        let m = parse_model_pattern("llama3:8b:turbo:high", &models, SuffixMode::Lenient);
        assert_eq!(m.model.unwrap().id, "llama3:8b");
        assert_eq!(m.thinking_level, None);
        assert!(m.warning.is_some());
    }

    #[test]
    fn level_suffix_split_only_for_levels() {
        assert_eq!(
            split_level_suffix("m:high"),
            ("m", Some(ThinkingLevel::High))
        );
        assert_eq!(split_level_suffix("llama3:8b"), ("llama3:8b", None));
        assert_eq!(split_level_suffix("m"), ("m", None));
    }
}
