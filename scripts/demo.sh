#!/usr/bin/env bash
# A demo that needs no API key: tau-mock-llm answers as the model (rules mode: "list files"
# becomes a tool call, anything else an echo). tau works in a scratch folder with read-only
# tools, so any prompt is safe. It shows, in words, what happened:
#   1. a one-shot run (`tau --mode json`, the same events `tau -p` prints the answer of),
#   2. one exchange over the RPC protocol (`tau --mode rpc`), summarised.
#   bash scripts/demo.sh ["your prompt"]          # the readable summary
#   bash scripts/demo.sh --raw ["your prompt"]    # also every protocol record, as written
set -euo pipefail
cd "$(dirname "$0")/.."
raw=0
if [ "${1:-}" = "--raw" ]; then raw=1; shift; fi
prompt=${1:-"list files"}
# The test build (the dev profile), not the optimised one: a mock model needs no speed, and
# a first demo on a fresh clone is ready in a third of the time; the tests reuse it.
[ -x "${CARGO_TARGET_DIR:-$PWD/target}/debug/tau" ] ||
  echo "Building tau and tau-mock-llm: about 3 minutes the first time on 2 cores..." >&2
cargo build --quiet -p tau -p tau-mock-llm
tau="${CARGO_TARGET_DIR:-$PWD/target}/debug/tau"
work=$(mktemp -d)
"${CARGO_TARGET_DIR:-$PWD/target}/debug/tau-mock-llm" --rules >"$work/mock.out" &
mock_pid=$!
trap 'kill $mock_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/mock.out" ] && break; sleep 0.05; done
url=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "$work/mock.out")
mkdir -p "$work/agent" "$work/project/src"
cat >"$work/agent/models.json" <<JSON
{ "providers": { "demo": {
    "baseUrl": "$url/v1", "api": "openai-completions", "apiKey": "no-key-needed",
    "models": [{ "id": "mock-model", "name": "tau-mock-llm" }] } } }
JSON
printf '# A scratch project\n' >"$work/project/README.md"
printf 'fn main() {}\n' >"$work/project/src/main.rs"
export TAU_AGENT_DIR="$work/agent"
cd "$work/project"
tools=(--no-session --tools ls,read,grep,find)

# Reads tau's JSON records on stdin and tells what happened.
summarise() {
  python3 -c '
import json, sys
raw = sys.argv[1] == "1"
def short(text, n=300):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + "…"
for line in sys.stdin:
    if raw:
        print("    " + line.rstrip())
    try:
        r = json.loads(line)
    except ValueError:
        continue
    t = r.get("type")
    if t == "response":
        print("  tau answered the %s command: %s" % (r.get("command"), "ok" if r.get("success") else r.get("error")))
    elif t == "message_end":
        m = r["message"]
        texts = [b.get("text", "") for b in m.get("content", []) if isinstance(b, dict) and b.get("type") == "text"]
        if m["role"] == "user":
            print("  You:   " + short(" ".join(texts) if texts else m.get("content")))
        elif m["role"] == "assistant":
            for b in m.get("content", []):
                if b.get("type") == "toolCall":
                    print("  Model: calls %s %s" % (b["name"], json.dumps(b.get("arguments", {}))))
            if texts:
                print("  Model: " + short(" ".join(texts)))
            if m.get("stopReason") == "error":
                print("  Model: failed: " + short(m.get("errorMessage", "")))
    elif t == "tool_execution_end":
        out = " ".join(c.get("text", "") for c in r["result"].get("content", []) if c.get("type") == "text")
        print("  Tool:  %s returned %s" % (r["toolName"], short(out, 200)))
    elif t == "agent_settled":
        print("  (the run is over)")
' "$raw"
}

echo "== 1. One shot: tau --mode json \"$prompt\" (tau -p would print just the answer) =="
"$tau" --mode json "${tools[@]}" "$prompt" | summarise
echo
echo "== 2. Over RPC: tau --mode rpc, one prompt command =="
python3 -c 'import json,sys; print(json.dumps({"id": "1", "type": "prompt", "message": sys.argv[1]}))' "$prompt" \
  | "$tau" --mode rpc "${tools[@]}" | summarise
echo
echo "Run again with --raw to see every record tau wrote."
