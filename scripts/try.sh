#!/usr/bin/env bash
# The interactive session without an API key: tau-mock-llm plays the model (rules mode: "run
# ls" or "list files" becomes a bash call, anything else an echo) and tau opens on the
# terminal in the folder you run this from, with a scratch agent folder (your own settings,
# keys and sessions are not touched).
#   bash scripts/try.sh [tau options...]
set -euo pipefail
here=$PWD
cd "$(dirname "$0")/.."
cargo build --quiet -p tau -p tau-mock-llm
bin="${CARGO_TARGET_DIR:-$PWD/target}/debug"
work=$(mktemp -d)
"$bin/tau-mock-llm" --rules >"$work/mock.out" &
mock_pid=$!
trap 'kill $mock_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/mock.out" ] && break; sleep 0.05; done
url=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "$work/mock.out")
mkdir -p "$work/agent"
cat >"$work/agent/models.json" <<JSON
{ "providers": { "demo": {
    "baseUrl": "$url/v1", "api": "openai-completions", "apiKey": "no-key-needed",
    "models": [{ "id": "mock-model", "name": "tau-mock-llm" }] } } }
JSON
cd "$here"
TAU_AGENT_DIR="$work/agent" "$bin/tau" "$@"
