#!/usr/bin/env bash
# Provider-layer throughput: a 10,000-delta reply per API from tau-mock-llm over loopback,
# decoded by tau-ai, and (when the reference pi is installed at PI_DIR, default /tmp/pi-ref)
# by pi-ai 0.79 against the same mock in the same run.
#   bash bench/provider-stream.sh
set -euo pipefail
cd "$(dirname "$0")/.."
pi_dir=${PI_DIR:-/tmp/pi-ref}
cargo build --profile dist --quiet -p tau-mock-llm
work=$(mktemp -d)
./target/dist/tau-mock-llm --port 0 >"$work/mock.out" 2>/dev/null &
mock_pid=$!
trap 'kill $mock_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/mock.out" ] && break; sleep 0.05; done
url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$work/mock.out")
echo "== tau-ai"
MOCK_URL="$url" cargo bench --quiet -p tau-ai --bench stream 2>/dev/null
pi_ai="$pi_dir/node_modules/@earendil-works/pi-ai/dist/index.js"
if [ -f "$pi_ai" ]; then
  echo "== pi-ai 0.79 (reference, same mock)"
  node bench/pi-ai-stream.mjs "$pi_ai" "$url"
fi
