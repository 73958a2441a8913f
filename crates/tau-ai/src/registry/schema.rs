//! The `models.json` schema and a small validator that reports violations the way pi's schema
//! library words them (`<path>: must be string`, …), because those lines end up verbatim in the
//! `Invalid models.json schema:` error a host may show or match on.

use serde_json::Value;

/// pi reports at most this many schema violations; the rest are dropped.
const MAX_ERRORS: usize = 8;

/// A JSON schema node, limited to what `models.json` needs.
pub(crate) enum Schema {
    /// A string of at least `min_len` characters.
    Str {
        min_len: usize,
    },
    Num,
    Bool,
    Null,
    /// Exactly this string.
    Lit(&'static str),
    Array(&'static Schema),
    Object(&'static [Prop]),
    /// An object whose every value matches the schema (keys are free).
    Record(&'static Schema),
    AnyOf(&'static [Schema]),
}

pub(crate) struct Prop {
    name: &'static str,
    schema: Schema,
    required: bool,
}

const fn opt(name: &'static str, schema: Schema) -> Prop {
    Prop {
        name,
        schema,
        required: false,
    }
}

const fn req(name: &'static str, schema: Schema) -> Prop {
    Prop {
        name,
        schema,
        required: true,
    }
}

const STR: Schema = Schema::Str { min_len: 0 };
const STR1: Schema = Schema::Str { min_len: 1 };
const STR_OR_NULL: Schema = Schema::AnyOf(&[STR, Schema::Null]);
const NUM_OR_STR: Schema = Schema::AnyOf(&[Schema::Num, STR]);
const STRING_LIST: Schema = Schema::Array(&STR);

const PERCENTILE_CUTOFFS: Schema = Schema::Object(&[
    opt("p50", Schema::Num),
    opt("p75", Schema::Num),
    opt("p90", Schema::Num),
    opt("p99", Schema::Num),
]);

const OPENROUTER_ROUTING: Schema = Schema::Object(&[
    opt("allow_fallbacks", Schema::Bool),
    opt("require_parameters", Schema::Bool),
    opt(
        "data_collection",
        Schema::AnyOf(&[Schema::Lit("deny"), Schema::Lit("allow")]),
    ),
    opt("zdr", Schema::Bool),
    opt("enforce_distillable_text", Schema::Bool),
    opt("order", STRING_LIST),
    opt("only", STRING_LIST),
    opt("ignore", STRING_LIST),
    opt("quantizations", STRING_LIST),
    opt(
        "sort",
        Schema::AnyOf(&[
            STR,
            Schema::Object(&[opt("by", STR), opt("partition", STR_OR_NULL)]),
        ]),
    ),
    opt(
        "max_price",
        Schema::Object(&[
            opt("prompt", NUM_OR_STR),
            opt("completion", NUM_OR_STR),
            opt("image", NUM_OR_STR),
            opt("audio", NUM_OR_STR),
            opt("request", NUM_OR_STR),
        ]),
    ),
    opt(
        "preferred_min_throughput",
        Schema::AnyOf(&[Schema::Num, PERCENTILE_CUTOFFS]),
    ),
    opt(
        "preferred_max_latency",
        Schema::AnyOf(&[Schema::Num, PERCENTILE_CUTOFFS]),
    ),
]);

const VERCEL_GATEWAY_ROUTING: Schema =
    Schema::Object(&[opt("only", STRING_LIST), opt("order", STRING_LIST)]);

const THINKING_LEVEL_MAP: Schema = Schema::Object(&[
    opt("off", STR_OR_NULL),
    opt("minimal", STR_OR_NULL),
    opt("low", STR_OR_NULL),
    opt("medium", STR_OR_NULL),
    opt("high", STR_OR_NULL),
    opt("xhigh", STR_OR_NULL),
]);

const CHAT_TEMPLATE_KWARG: Schema = Schema::AnyOf(&[
    Schema::AnyOf(&[STR, Schema::Num, Schema::Bool, Schema::Null]),
    Schema::Object(&[
        req(
            "$var",
            Schema::AnyOf(&[
                Schema::Lit("thinking.enabled"),
                Schema::Lit("thinking.effort"),
            ]),
        ),
        opt("omitWhenOff", Schema::Bool),
    ]),
]);

/// One object schema per API family; a compat object is valid when any of them accepts it.
const COMPAT: Schema = Schema::AnyOf(&[
    // openai-completions
    Schema::Object(&[
        opt("supportsStore", Schema::Bool),
        opt("supportsDeveloperRole", Schema::Bool),
        opt("supportsReasoningEffort", Schema::Bool),
        opt("supportsUsageInStreaming", Schema::Bool),
        opt(
            "maxTokensField",
            Schema::AnyOf(&[
                Schema::Lit("max_completion_tokens"),
                Schema::Lit("max_tokens"),
            ]),
        ),
        opt("requiresToolResultName", Schema::Bool),
        opt("requiresAssistantAfterToolResult", Schema::Bool),
        opt("requiresThinkingAsText", Schema::Bool),
        opt("requiresReasoningContentOnAssistantMessages", Schema::Bool),
        opt(
            "thinkingFormat",
            Schema::AnyOf(&[
                Schema::Lit("openai"),
                Schema::Lit("openrouter"),
                Schema::Lit("together"),
                Schema::Lit("deepseek"),
                Schema::Lit("zai"),
                Schema::Lit("qwen"),
                Schema::Lit("chat-template"),
                Schema::Lit("qwen-chat-template"),
                Schema::Lit("string-thinking"),
                Schema::Lit("ant-ling"),
            ]),
        ),
        opt("chatTemplateKwargs", Schema::Record(&CHAT_TEMPLATE_KWARG)),
        opt("cacheControlFormat", Schema::Lit("anthropic")),
        opt("openRouterRouting", OPENROUTER_ROUTING),
        opt("vercelGatewayRouting", VERCEL_GATEWAY_ROUTING),
        opt("supportsStrictMode", Schema::Bool),
        opt("supportsLongCacheRetention", Schema::Bool),
    ]),
    // openai-responses
    Schema::Object(&[
        opt("supportsDeveloperRole", Schema::Bool),
        opt("sendSessionIdHeader", Schema::Bool),
        opt("supportsLongCacheRetention", Schema::Bool),
    ]),
    // anthropic-messages
    Schema::Object(&[
        opt("supportsEagerToolInputStreaming", Schema::Bool),
        opt("supportsLongCacheRetention", Schema::Bool),
        opt("sendSessionAffinityHeaders", Schema::Bool),
        opt("supportsCacheControlOnTools", Schema::Bool),
        opt("forceAdaptiveThinking", Schema::Bool),
    ]),
]);

const INPUT_LIST: Schema =
    Schema::Array(&Schema::AnyOf(&[Schema::Lit("text"), Schema::Lit("image")]));

const HEADERS: Schema = Schema::Record(&STR);

/// A model's object: the properties that name it, then those a custom model (`models`) and a
/// built-in model's override (`modelOverrides`) share. `price` is `req` where a `cost` must
/// give all four prices (a custom model) and `opt` where it may change any of them (an
/// override). Property order is pi's, which is the order the errors come in.
macro_rules! model_schema {
    ([$($naming:expr),* $(,)?], price: $price:ident) => {
        Schema::Object(&[
            $($naming,)*
            opt("reasoning", Schema::Bool),
            opt("thinkingLevelMap", THINKING_LEVEL_MAP),
            opt("input", INPUT_LIST),
            opt(
                "cost",
                Schema::Object(&[
                    $price("input", Schema::Num),
                    $price("output", Schema::Num),
                    $price("cacheRead", Schema::Num),
                    $price("cacheWrite", Schema::Num),
                ]),
            ),
            opt("contextWindow", Schema::Num),
            opt("maxTokens", Schema::Num),
            opt("headers", HEADERS),
            opt("compat", COMPAT),
        ])
    };
}

const MODEL_DEFINITION: Schema = model_schema!(
    [
        req("id", STR1),
        opt("name", STR1),
        opt("api", STR1),
        opt("baseUrl", STR1),
    ],
    price: req
);

const MODEL_OVERRIDE: Schema = model_schema!([opt("name", STR1)], price: opt);

const PROVIDER_CONFIG: Schema = Schema::Object(&[
    opt("name", STR1),
    opt("baseUrl", STR1),
    opt("apiKey", STR1),
    opt("api", STR1),
    opt("headers", HEADERS),
    opt("compat", COMPAT),
    opt("authHeader", Schema::Bool),
    opt("models", Schema::Array(&MODEL_DEFINITION)),
    opt("modelOverrides", Schema::Record(&MODEL_OVERRIDE)),
]);

static ROOT: Schema = Schema::Object(&[req("providers", Schema::Record(&PROVIDER_CONFIG))]);

/// Validates a parsed `models.json` and returns pi's error lines (`<path>: <message>`), at most
/// [`MAX_ERRORS`] of them; empty when the document is valid.
pub(crate) fn validate_models_json(value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let mut path = Vec::new();
    check(&ROOT, value, &mut path, &mut errors);
    errors.truncate(MAX_ERRORS);
    errors
}

fn push(errors: &mut Vec<String>, path: &[String], message: &str) {
    let shown = if path.is_empty() {
        "root".to_string()
    } else {
        path.join(".")
    };
    errors.push(format!("{shown}: {message}"));
}

fn check(schema: &Schema, value: &Value, path: &mut Vec<String>, errors: &mut Vec<String>) {
    match schema {
        Schema::Str { min_len } => match value {
            Value::String(s) => {
                // JavaScript counts UTF-16 units; for the only minimum in use (1) that is the
                // same as "not empty".
                if s.encode_utf16().count() < *min_len {
                    push(
                        errors,
                        path,
                        &format!("must not have fewer than {min_len} characters"),
                    );
                }
            }
            _ => push(errors, path, "must be string"),
        },
        Schema::Num => {
            if !value.is_number() {
                push(errors, path, "must be number");
            }
        }
        Schema::Bool => {
            if !value.is_boolean() {
                push(errors, path, "must be boolean");
            }
        }
        Schema::Null => {
            if !value.is_null() {
                push(errors, path, "must be null");
            }
        }
        Schema::Lit(expected) => {
            if value.as_str() != Some(expected) {
                push(errors, path, "must be equal to constant");
            }
        }
        Schema::Array(item) => match value {
            Value::Array(items) => {
                for (index, item_value) in items.iter().enumerate() {
                    path.push(index.to_string());
                    check(item, item_value, path, errors);
                    path.pop();
                }
            }
            _ => push(errors, path, "must be array"),
        },
        Schema::Object(props) => {
            let Value::Object(map) = value else {
                push(errors, path, "must be object");
                return;
            };
            let missing: Vec<&str> = props
                .iter()
                .filter(|p| p.required && !map.contains_key(p.name))
                .map(|p| p.name)
                .collect();
            if let Some(first) = missing.first() {
                // pi names the first missing property in the path and lists all of them.
                path.push((*first).to_string());
                push(
                    errors,
                    path,
                    &format!("must have required properties {}", missing.join(", ")),
                );
                path.pop();
            }
            for prop in props.iter() {
                let Some(prop_value) = map.get(prop.name) else {
                    continue;
                };
                path.push(prop.name.to_string());
                check(&prop.schema, prop_value, path, errors);
                path.pop();
            }
        }
        Schema::Record(inner) => {
            let Value::Object(map) = value else {
                push(errors, path, "must be object");
                return;
            };
            for (key, entry) in map {
                // pi builds the path as an unescaped `/`-joined pointer and then turns every
                // `/` into `.`, so a key's own slashes read as dots (`openai.gpt-4o`).
                path.push(key.replace('/', "."));
                check(inner, entry, path, errors);
                path.pop();
            }
        }
        Schema::AnyOf(branches) => {
            let mut collected = Vec::new();
            for branch in branches.iter() {
                let mut branch_errors = Vec::new();
                check(branch, value, path, &mut branch_errors);
                if branch_errors.is_empty() {
                    return;
                }
                collected.extend(branch_errors);
            }
            errors.extend(collected);
            push(errors, path, "must match a schema in anyOf");
        }
    }
}
