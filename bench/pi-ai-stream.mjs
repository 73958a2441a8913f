// The reference for benches/stream.rs: pi-ai 0.79 (the library inside pi) streaming the same
// 10,000-delta reply from the same tau-mock-llm, per API. Prints deltas/s like the Rust bench.
//   node bench/pi-ai-stream.mjs <pi-ai dist/index.js> <mock url>
import { pathToFileURL } from "node:url";

const [, , piAi, url] = process.argv;
const { stream } = await import(pathToFileURL(piAi).href);
const DELTAS = 10000;
const chunks = Array.from({ length: DELTAS }, (_, i) => String(i % 10000).padStart(4, "0"));
const apis = [
  "anthropic-messages", "openai-completions", "openai-responses", "google-generative-ai",
  "azure-openai-responses", "google-vertex", "bedrock-converse-stream",
];
const baseUrl = (api) => {
  switch (api) {
    case "anthropic-messages": case "google-vertex": case "bedrock-converse-stream": return url;
    case "google-generative-ai": return `${url}/v1beta`;
    case "azure-openai-responses": return `${url}/openai/v1`;
    default: return `${url}/v1`;
  }
};
// The cloud APIs' credentials as the mock takes them unconfigured: Azure's key, Vertex's API
// key (express mode), AWS keys to sign with; the mock speaks HTTP/1.1 only.
const env = {
  AWS_ACCESS_KEY_ID: "AKIDBENCH", AWS_SECRET_ACCESS_KEY: "bench-secret", AWS_REGION: "us-east-1",
  AWS_BEDROCK_FORCE_HTTP1: "1",
};

console.log("api".padEnd(24), "deltas/s".padStart(12), "ms".padStart(10));
for (const api of apis) {
  let best = Infinity;
  for (let run = 0; run < 5; run++) {
    await fetch(`${url}/_mock/replies`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ content: [{ type: "text", chunks }] }),
    });
    const model = {
      id: "mock-model", name: "Mock", api, provider: "mock", baseUrl: baseUrl(api), reasoning: false,
      input: ["text"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
      contextWindow: 200000, maxTokens: 8192,
    };
    const context = { messages: [{ role: "user", content: "go", timestamp: Date.now() }] };
    const start = performance.now();
    let deltas = 0;
    for await (const event of stream(model, context, { apiKey: "k", env })) {
      if (event.type === "text_delta") deltas++;
      if (event.type === "error") throw new Error(`${api}: ${event.error.errorMessage}`);
    }
    const elapsed = performance.now() - start;
    if (deltas !== DELTAS) throw new Error(`${api}: ${deltas} deltas`);
    best = Math.min(best, elapsed);
  }
  console.log(api.padEnd(24), String(Math.round(DELTAS / (best / 1000))).padStart(12), best.toFixed(1).padStart(10));
}
