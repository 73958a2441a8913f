//! The built-in model catalog and the per-provider default models.
//!
//! The catalog is `crates/tau-ai/data/models.json`, generated from pi's published catalog by
//! `scripts/gen-catalog.mjs` (decision 21) and embedded in the binary. It is parsed the first
//! time something asks for it, never at startup: a `tau --mode rpc` that answers `get_state`
//! without a model must not pay for ~800 models.

use std::sync::OnceLock;

use tau_protocol::Model;

const CATALOG_JSON: &str = include_str!("../../data/models.json");

static CATALOG: OnceLock<Vec<Model>> = OnceLock::new();

/// The built-in models in pi's registry order (providers in catalog order, then each provider's
/// models in catalog order).
pub fn builtin_models() -> &'static [Model] {
    CATALOG.get_or_init(|| match parse_catalog() {
        Ok(models) => models,
        Err(err) => {
            // Unreachable with the checked-in file (a test parses it); if it happens anyway,
            // models.json custom models keep working.
            tracing::error!("the built-in model catalog does not parse: {err}");
            Vec::new()
        }
    })
}

fn parse_catalog() -> Result<Vec<Model>, serde_json::Error> {
    serde_json::from_str(CATALOG_JSON)
}

/// The model each provider starts with when nothing else picks one (tools-resources §7.4),
/// in the order the initial-model search walks it. The table is pi 0.73's; the providers pi
/// 0.79 added (ant-ling, nvidia, zai-coding-cn, together) sit where 0.79 puts them. Entries
/// for providers tau has no catalog models for are kept so that a `models.json` defining them
/// behaves as in pi.
pub const DEFAULT_MODEL_PER_PROVIDER: &[(&str, &str)] = &[
    ("amazon-bedrock", "us.anthropic.claude-opus-4-6-v1"),
    ("ant-ling", "Ring-2.6-1T"),
    ("anthropic", "claude-opus-4-7"),
    ("openai", "gpt-5.4"),
    ("azure-openai-responses", "gpt-5.4"),
    ("openai-codex", "gpt-5.5"),
    ("nvidia", "nvidia/nemotron-3-super-120b-a12b"),
    ("deepseek", "deepseek-v4-pro"),
    ("google", "gemini-3.1-pro-preview"),
    ("google-vertex", "gemini-3.1-pro-preview"),
    ("github-copilot", "gpt-5.4"),
    ("openrouter", "moonshotai/kimi-k2.6"),
    ("vercel-ai-gateway", "zai/glm-5.1"),
    ("xai", "grok-4.20-0309-reasoning"),
    ("groq", "openai/gpt-oss-120b"),
    ("cerebras", "zai-glm-4.7"),
    ("zai", "glm-5.1"),
    ("zai-coding-cn", "glm-5.1"),
    ("mistral", "devstral-medium-latest"),
    ("minimax", "MiniMax-M2.7"),
    ("minimax-cn", "MiniMax-M2.7"),
    ("moonshotai", "kimi-k2.6"),
    ("moonshotai-cn", "kimi-k2.6"),
    ("huggingface", "moonshotai/Kimi-K2.6"),
    ("fireworks", "accounts/fireworks/models/kimi-k2p6"),
    ("together", "moonshotai/Kimi-K2.6"),
    ("opencode", "kimi-k2.6"),
    ("opencode-go", "kimi-k2.6"),
    ("kimi-coding", "kimi-for-coding"),
    ("cloudflare-workers-ai", "@cf/moonshotai/kimi-k2.6"),
    (
        "cloudflare-ai-gateway",
        "workers-ai/@cf/moonshotai/kimi-k2.6",
    ),
    ("xiaomi", "mimo-v2.5-pro"),
    ("xiaomi-token-plan-cn", "mimo-v2.5-pro"),
    ("xiaomi-token-plan-ams", "mimo-v2.5-pro"),
    ("xiaomi-token-plan-sgp", "mimo-v2.5-pro"),
];

/// The default model id for `provider`, if the table names one.
pub fn default_model_id(provider: &str) -> Option<&'static str> {
    DEFAULT_MODEL_PER_PROVIDER
        .iter()
        .find(|(p, _)| *p == provider)
        .map(|(_, id)| *id)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::time::Instant;

    use super::*;

    const APIS: [&str; 4] = [
        "anthropic-messages",
        "openai-completions",
        "openai-responses",
        "google-generative-ai",
    ];

    #[test]
    fn catalog_parses_and_holds_only_supported_apis() {
        let models = parse_catalog().expect("catalog parses");
        assert!(models.len() > 700, "only {} models", models.len());
        for m in &models {
            assert!(
                APIS.contains(&m.api.as_str()),
                "{}/{}: {}",
                m.provider,
                m.id,
                m.api
            );
        }
        let mut seen = HashSet::new();
        for m in &models {
            assert!(
                seen.insert((&m.provider, &m.id)),
                "duplicate {}/{}",
                m.provider,
                m.id
            );
        }
        let providers: HashSet<&str> = models.iter().map(|m| m.provider.as_str()).collect();
        for p in [
            "anthropic",
            "openai",
            "google",
            "groq",
            "cerebras",
            "xai",
            "openrouter",
            "vercel-ai-gateway",
            "zai",
            "mistral",
            "minimax",
            "minimax-cn",
            "moonshotai",
            "moonshotai-cn",
            "huggingface",
            "fireworks",
            "opencode",
            "opencode-go",
            "kimi-coding",
            "deepseek",
            "github-copilot",
            "xiaomi",
            "cloudflare-workers-ai",
            "cloudflare-ai-gateway",
        ] {
            assert!(providers.contains(p), "missing provider {p}");
        }
        for p in [
            "amazon-bedrock",
            "google-vertex",
            "openai-codex",
            "azure-openai-responses",
        ] {
            assert!(!providers.contains(p), "{p} should be left out");
        }
    }

    #[test]
    fn catalog_matches_the_spec_example() {
        let m = builtin_models()
            .iter()
            .find(|m| m.provider == "anthropic" && m.id == "claude-sonnet-4-5")
            .expect("claude-sonnet-4-5");
        assert_eq!(m.api, "anthropic-messages");
        assert_eq!(m.base_url, "https://api.anthropic.com");
        assert!(m.reasoning);
        assert_eq!(m.input.len(), 2);
        assert_eq!(
            (
                m.cost.input,
                m.cost.output,
                m.cost.cache_read,
                m.cost.cache_write
            ),
            (3.0, 15.0, 0.3, 3.75)
        );
        assert_eq!((m.context_window, m.max_tokens), (200_000, 64_000));
    }

    #[test]
    fn catalog_keeps_pi_provider_order() {
        let models = builtin_models();
        let mut order: Vec<&str> = Vec::new();
        for m in models {
            if order.last() != Some(&m.provider.as_str()) {
                assert!(
                    !order.contains(&m.provider.as_str()),
                    "{} is split",
                    m.provider
                );
                order.push(&m.provider);
            }
        }
        let pos = |p: &str| order.iter().position(|x| *x == p).expect(p);
        assert!(pos("anthropic") < pos("openai"));
        assert!(pos("openai") < pos("openrouter"));
        assert!(pos("openrouter") < pos("zai"));
    }

    #[test]
    fn every_default_of_a_catalog_provider_exists() {
        let models = builtin_models();
        for (provider, id) in DEFAULT_MODEL_PER_PROVIDER {
            if models.iter().any(|m| m.provider == *provider) {
                assert!(
                    models
                        .iter()
                        .any(|m| m.provider == *provider && m.id == *id),
                    "{provider}/{id} is not in the catalog"
                );
            }
        }
        assert_eq!(default_model_id("anthropic"), Some("claude-opus-4-7"));
        assert_eq!(default_model_id("nope"), None);
    }

    /// Measures what the first registry use costs. Run with `--release --nocapture` for the
    /// number that matters; the bound here only catches an order-of-magnitude regression in
    /// unoptimised test builds.
    #[test]
    fn catalog_parse_time() {
        let start = Instant::now();
        let models = parse_catalog().expect("catalog parses");
        let elapsed = start.elapsed();
        eprintln!(
            "parsed {} built-in models in {:.2} ms",
            models.len(),
            elapsed.as_secs_f64() * 1000.0
        );
        assert!(elapsed.as_millis() < 2000, "catalog parse took {elapsed:?}");
    }
}
