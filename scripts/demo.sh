#!/usr/bin/env bash
# A demo that needs no API key: tau-mock-llm answers as the model (rules mode), and one
# prompt goes through `tau --mode rpc`; every protocol record tau writes is printed.
#   bash scripts/demo.sh ["your prompt"]
set -euo pipefail
cd "$(dirname "$0")/.."
prompt=${1:-"list files"}
cargo build --release --quiet -p tau -p tau-mock-llm
work=$(mktemp -d)
./target/release/tau-mock-llm --rules >"$work/mock.out" &
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
python3 -c 'import json,sys; print(json.dumps({"id": "1", "type": "prompt", "message": sys.argv[1]}))' "$prompt" \
  | TAU_AGENT_DIR="$work/agent" ./target/release/tau --mode rpc --no-session
