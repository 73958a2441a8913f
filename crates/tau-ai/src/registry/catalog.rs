//! The built-in model catalog and the per-provider default models.
//!
//! The catalog is `crates/tau-ai/data/models.json`, generated from pi's published catalog by
//! `scripts/gen-catalog.mjs` (decision 21), and turned into Rust data (`catalog_data.rs`) that
//! the binary carries. The models are built the first time something asks for them, never at
//! startup: a `tau --mode rpc` that answers `get_state` without a model must not pay for ~800.

use std::sync::OnceLock;

use serde_json::value::RawValue;

use tau_protocol::{InputModality, Model, ModelCost};

/// The catalog as pi publishes it: the source of `catalog_data.rs`, which tests keep equal to it.
#[cfg(test)]
const CATALOG_JSON: &str = include_str!("../../data/models.json");

static CATALOG: OnceLock<Vec<Model>> = OnceLock::new();

/// The built-in models in pi's registry order (providers in catalog order, then each provider's
/// models in catalog order).
pub fn builtin_models() -> &'static [Model] {
    CATALOG.get_or_init(|| {
        super::catalog_data::BUILTIN
            .iter()
            .map(BuiltinModel::to_model)
            .collect()
    })
}

static CATALOG_TEXT: OnceLock<Option<Box<RawValue>>> = OnceLock::new();

/// The built-in models as JSON text, what extensions receive as `allModels` when nothing
/// changes the catalog (`None` if serialising failed, which plain data does not). Made once
/// per process: it is 300 KB.
pub fn builtin_models_json() -> Option<&'static RawValue> {
    CATALOG_TEXT
        .get_or_init(|| serde_json::value::to_raw_value(builtin_models()).ok())
        .as_deref()
}

/// A built-in model as data laid out by the compiler (`catalog_data.rs`, generated from
/// `data/models.json`). Why not the JSON: parsing its 290 KB was most of the instructions of a
/// start-up that needs a model (9.8 M of them, 4.2 M without). Why spans into one text and no
/// `&str`s: every pointer in a static costs a relocation the loader applies at every start,
/// whether the catalog is used or not (6,600 of them, ~300 KB touched).
pub(super) struct BuiltinModel {
    pub id: Span,
    pub name: Span,
    pub api: Span,
    pub provider: Span,
    pub base_url: Span,
    pub reasoning: bool,
    /// `input` is `["text", "image"]` (else `["text"]`, the only two in the catalog).
    pub image: bool,
    /// `input`, `output`, `cacheRead`, `cacheWrite`.
    pub cost: [f64; 4],
    pub context_window: u64,
    pub max_tokens: u64,
    /// The fields that are JSON objects in the catalog, as their JSON text (few models have
    /// them; parsing these small texts costs little).
    pub thinking_level_map: Option<Span>,
    pub headers: Option<Span>,
    pub compat: Option<Span>,
}

/// A piece of `catalog_data::TEXT`: its byte offset and length.
#[derive(Clone, Copy)]
pub(super) struct Span(pub u32, pub u32);

impl Span {
    fn text(self) -> &'static str {
        let (at, len) = (self.0 as usize, self.1 as usize);
        super::catalog_data::TEXT
            .get(at..at + len)
            .unwrap_or_default()
    }
}

impl BuiltinModel {
    fn to_model(&self) -> Model {
        fn json<T: serde::de::DeserializeOwned>(span: Option<Span>) -> Option<T> {
            span.and_then(|s| serde_json::from_str(s.text()).ok())
        }
        Model {
            id: self.id.text().to_owned(),
            name: self.name.text().to_owned(),
            api: self.api.text().to_owned(),
            provider: self.provider.text().to_owned(),
            base_url: self.base_url.text().to_owned(),
            reasoning: self.reasoning,
            thinking_level_map: json(self.thinking_level_map),
            input: if self.image {
                vec![InputModality::Text, InputModality::Image]
            } else {
                vec![InputModality::Text]
            },
            cost: ModelCost {
                input: self.cost[0],
                output: self.cost[1],
                cache_read: self.cost[2],
                cache_write: self.cost[3],
            },
            context_window: self.context_window,
            max_tokens: self.max_tokens,
            headers: json(self.headers),
            compat: json(self.compat),
        }
    }
}

#[cfg(test)]
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
    use std::fmt::Write as _;
    use std::time::Instant;

    use serde_json::Value;

    use super::*;

    const DATA_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/registry/catalog_data.rs");

    /// `catalog_data.rs` as `data/models.json` gives it.
    fn generated_source() -> String {
        let models: Vec<Value> = serde_json::from_str(CATALOG_JSON).expect("catalog parses");
        // Each distinct text once (providers, apis and base URLs repeat across models).
        let mut text = String::new();
        let mut spans: std::collections::HashMap<String, (usize, usize)> = Default::default();
        let mut span = |piece: String| {
            let (at, len) = *spans.entry(piece.clone()).or_insert_with(|| {
                text.push_str(&piece);
                (text.len() - piece.len(), piece.len())
            });
            format!("Span({at}, {len})")
        };
        let mut rows = String::new();
        for m in &models {
            let mut field = |key: &str| span(m[key].as_str().expect("a string").to_string());
            let (id, name, api, provider, base_url) = (
                field("id"),
                field("name"),
                field("api"),
                field("provider"),
                field("baseUrl"),
            );
            let mut json = |key: &str| match m.get(key) {
                Some(v) => format!("Some({})", span(v.to_string())),
                None => "None".to_string(),
            };
            let (levels, headers, compat) =
                (json("thinkingLevelMap"), json("headers"), json("compat"));
            let input: Vec<&str> = m["input"]
                .as_array()
                .expect("input")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            assert!(
                input == ["text"] || input == ["text", "image"],
                "input {input:?}"
            );
            let cost: Vec<String> = ["input", "output", "cacheRead", "cacheWrite"]
                .iter()
                .map(|k| format!("{:?}", m["cost"][k].as_f64().expect("a cost")))
                .collect();
            writeln!(
                rows,
                "    BuiltinModel {{ id: {id}, name: {name}, api: {api}, provider: {provider}, \
                 base_url: {base_url}, reasoning: {}, image: {}, cost: [{}], \
                 context_window: {}, max_tokens: {}, thinking_level_map: {levels}, \
                 headers: {headers}, compat: {compat} }},",
                m["reasoning"].as_bool().expect("reasoning"),
                input.len() == 2,
                cost.join(", "),
                m["contextWindow"].as_u64().expect("contextWindow"),
                m["maxTokens"].as_u64().expect("maxTokens"),
            )
            .expect("writing to a string");
        }
        format!(
            "//! The built-in model catalog (`data/models.json`) as Rust data. Generated: run\n\
             //! `TAU_WRITE_CATALOG=1 cargo test -p tau-ai catalog_data` after changing the JSON;\n\
             //! a test fails while the two differ.\n\n\
             use super::catalog::{{BuiltinModel, Span}};\n\n\
             /// Every text of the catalog, each once; the models name pieces of it.\n\
             pub(super) static TEXT: &str = {text:?};\n\n\
             #[rustfmt::skip]\n\
             pub(super) static BUILTIN: &[BuiltinModel] = &[\n{rows}];\n"
        )
    }

    #[test]
    fn catalog_data_is_the_json_catalog() {
        let generated = generated_source();
        if std::env::var_os("TAU_WRITE_CATALOG").is_some() {
            std::fs::write(DATA_FILE, &generated).expect("write catalog_data.rs");
        }
        let checked_in = std::fs::read_to_string(DATA_FILE).unwrap_or_default();
        assert!(
            checked_in == generated,
            "src/registry/catalog_data.rs differs from data/models.json; regenerate it with \
             TAU_WRITE_CATALOG=1 cargo test -p tau-ai catalog_data"
        );
        // And the models built from it are the ones the JSON describes, field for field.
        assert_eq!(builtin_models(), parse_catalog().expect("catalog parses"));
    }

    const APIS: [&str; 7] = [
        "anthropic-messages",
        "openai-completions",
        "openai-responses",
        "google-generative-ai",
        "azure-openai-responses",
        "google-vertex",
        "bedrock-converse-stream",
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
            "amazon-bedrock",
            "google-vertex",
            "azure-openai-responses",
        ] {
            assert!(providers.contains(p), "missing provider {p}");
        }
        // Its login would have tau pose as another vendor's client (decision T73).
        assert!(
            !providers.contains("openai-codex"),
            "openai-codex should be left out"
        );
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
