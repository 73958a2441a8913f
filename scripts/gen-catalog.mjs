#!/usr/bin/env node
// Regenerates tau's built-in model catalog, crates/tau-ai/data/models.json, from the model
// catalog that pi publishes inside its `@earendil-works/pi-ai` npm package (decision 21).
//
// Getting the input (no install needed, only npm):
//
//   cd /tmp && npm pack @earendil-works/pi-ai@0.79.10 && tar xzf earendil-works-pi-ai-0.79.10.tgz
//   node scripts/gen-catalog.mjs /tmp/package/dist/models.generated.js
//
// An existing install works too, e.g.
//   node scripts/gen-catalog.mjs /tmp/pi-ref/node_modules/@earendil-works/pi-ai/dist/models.generated.js
//
// Usage: node scripts/gen-catalog.mjs <path to models.generated.js> [output path]
//
// The output is a JSON array of tau_ai::Model objects, one per line so that regenerating gives
// readable diffs, in pi's registry order: providers in the order the source declares them, and
// each provider's models in source order. The Rust side (crates/tau-ai/src/registry/catalog.rs)
// embeds the file and parses it on first use.
//
// Only models tau can talk to are kept: those whose `api` is one of the wire APIs tau
// implements (decision 20; Azure's Responses, Vertex and Bedrock's Converse stream since
// decision T125). Models on other APIs (the ChatGPT-subscription flavour of Responses, whose
// login would have tau pose as another vendor's client) are left out, and a provider all of
// whose models are left out disappears from the catalog. The one exception is Mistral: pi talks to it
// through Mistral's own SDK, but Mistral also serves the OpenAI chat-completions wire format under
// /v1, and decision 20 names it among the servers `openai-completions` covers, so its models are
// rewritten onto that API (see REWRITES below).

import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const EXPECTED_VERSION = "0.79.10";

const SUPPORTED_APIS = new Set([
  "anthropic-messages",
  "openai-completions",
  "openai-responses",
  "google-generative-ai",
  "azure-openai-responses",
  "google-vertex",
  "bedrock-converse-stream",
]);

// APIs whose models may have an empty baseUrl: Azure's endpoint is the user's own resource,
// found at request time (AZURE_OPENAI_BASE_URL / AZURE_OPENAI_RESOURCE_NAME).
const BASE_URL_OPTIONAL = new Set(["azure-openai-responses"]);

// api in pi's catalog -> how to move such a model onto an API tau implements.
const REWRITES = {
  "mistral-conversations": (model) => ({
    ...model,
    api: "openai-completions",
    baseUrl: `${model.baseUrl.replace(/\/+$/, "")}/v1`,
    // Mistral's chat-completions endpoint rejects the OpenAI-only request fields.
    compat: {
      supportsStore: false,
      supportsDeveloperRole: false,
      supportsReasoningEffort: false,
      maxTokensField: "max_tokens",
      ...(model.compat ?? {}),
    },
  }),
};

function fail(message) {
  process.stderr.write(`gen-catalog: ${message}\n`);
  process.exit(1);
}

function checkNumber(model, path, value) {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    fail(`${model.provider}/${model.id}: ${path} is not a finite number`);
  }
}

// Rebuilds the model with exactly the keys of tau's Model type, in its field order, and fails
// loudly when pi's shape has drifted so that a silent mismatch never reaches the data file.
function toTauModel(model) {
  for (const key of ["id", "name", "api", "provider", "baseUrl"]) {
    const emptyOk = key === "baseUrl" && BASE_URL_OPTIONAL.has(model.api);
    if (typeof model[key] !== "string" || (model[key] === "" && !emptyOk)) {
      fail(`${model.provider}/${model.id}: ${key} is missing or not a string`);
    }
  }
  if (typeof model.reasoning !== "boolean") fail(`${model.provider}/${model.id}: reasoning is not a boolean`);
  if (!Array.isArray(model.input) || model.input.some((m) => m !== "text" && m !== "image")) {
    fail(`${model.provider}/${model.id}: input is not a list of "text"/"image"`);
  }
  for (const key of ["input", "output", "cacheRead", "cacheWrite"]) checkNumber(model, `cost.${key}`, model.cost?.[key]);
  for (const key of ["contextWindow", "maxTokens"]) {
    checkNumber(model, key, model[key]);
    if (!Number.isInteger(model[key]) || model[key] <= 0) fail(`${model.provider}/${model.id}: ${key} is not a positive integer`);
  }
  const known = new Set([
    "id", "name", "api", "provider", "baseUrl", "reasoning", "thinkingLevelMap", "input", "cost",
    "contextWindow", "maxTokens", "headers", "compat",
  ]);
  for (const key of Object.keys(model)) {
    if (!known.has(key)) fail(`${model.provider}/${model.id}: unknown field ${key}; teach tau's Model about it first`);
  }

  const out = {
    id: model.id,
    name: model.name,
    api: model.api,
    provider: model.provider,
    baseUrl: model.baseUrl,
    reasoning: model.reasoning,
  };
  if (model.thinkingLevelMap !== undefined) out.thinkingLevelMap = model.thinkingLevelMap;
  out.input = model.input;
  out.cost = {
    input: model.cost.input,
    output: model.cost.output,
    cacheRead: model.cost.cacheRead,
    cacheWrite: model.cost.cacheWrite,
  };
  out.contextWindow = model.contextWindow;
  out.maxTokens = model.maxTokens;
  if (model.headers !== undefined) out.headers = model.headers;
  if (model.compat !== undefined) out.compat = model.compat;
  return out;
}

async function main() {
  const [sourceArg, outArg] = process.argv.slice(2);
  if (!sourceArg) fail("usage: node scripts/gen-catalog.mjs <models.generated.js> [output]");
  const source = resolve(sourceArg);
  const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..");
  const output = outArg ? resolve(outArg) : join(repoRoot, "crates/tau-ai/data/models.json");

  try {
    const pkg = JSON.parse(readFileSync(join(dirname(source), "..", "package.json"), "utf8"));
    if (pkg.version !== EXPECTED_VERSION) {
      process.stderr.write(`gen-catalog: note: source is pi-ai ${pkg.version}, this script was written against ${EXPECTED_VERSION}\n`);
    }
  } catch {
    process.stderr.write("gen-catalog: note: no package.json next to the source; version not checked\n");
  }

  const { MODELS } = await import(pathToFileURL(source).href);
  if (!MODELS || typeof MODELS !== "object") fail(`${source} does not export MODELS`);

  const models = [];
  const seen = new Set();
  const kept = new Map();
  const dropped = new Map();
  for (const [provider, byId] of Object.entries(MODELS)) {
    for (const [id, raw] of Object.entries(byId)) {
      if (raw.provider !== provider || raw.id !== id) fail(`${provider}/${id}: key does not match the model's provider/id`);
      const rewrite = REWRITES[raw.api];
      const model = rewrite ? rewrite(raw) : raw;
      if (!SUPPORTED_APIS.has(model.api)) {
        dropped.set(`${provider} (${raw.api})`, (dropped.get(`${provider} (${raw.api})`) ?? 0) + 1);
        continue;
      }
      const key = `${provider}\u0000${id}`;
      if (seen.has(key)) fail(`${provider}/${id}: duplicate`);
      seen.add(key);
      models.push(toTauModel(model));
      kept.set(provider, (kept.get(provider) ?? 0) + 1);
    }
  }

  writeFileSync(output, `[\n${models.map((m) => JSON.stringify(m)).join(",\n")}\n]\n`);

  const summary = [...kept].map(([p, n]) => `  ${p}: ${n}`).join("\n");
  const left = [...dropped].map(([p, n]) => `  ${p}: ${n}`).join("\n") || "  (none)";
  process.stderr.write(
    `gen-catalog: wrote ${models.length} models from ${kept.size} providers to ${output}\n${summary}\nleft out (API tau does not implement):\n${left}\n`,
  );
}

await main();
