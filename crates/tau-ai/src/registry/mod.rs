//! The model registry: the built-in catalog, `models.json` custom providers and models,
//! API keys from `auth.json` and the environment, and model-pattern resolution.
