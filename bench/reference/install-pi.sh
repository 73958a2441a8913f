#!/usr/bin/env bash
# Installs the reference agent, pi 0.79.10 (@earendil-works/pi-coding-agent), into a directory of
# its own, so the benchmarks and the session-fixture generator can run it beside tau.
#
#   bash bench/reference/install-pi.sh [DIR]        DIR defaults to /tmp/pi-ref
#
# The agent is then DIR/node_modules/.bin/pi. To point it at tau-mock-llm, give it an agent
# directory (PI_CODING_AGENT_DIR) whose models.json has a provider with baseUrl
# http://127.0.0.1:PORT/v1 and an apiKey; bench/rpc-stream.py shows one.
#
# Node 20: pi 0.79.10 declares node >= 22.19 only because its dependency undici 8 does. undici
# 6.21.3 provides everything pi uses from it and runs on Node 20, so package.json carries an npm
# override that makes every undici in the tree that version, and the script checks it did.
set -euo pipefail

pi_version=0.79.10
undici_version=6.21.3

dir=${1:-/tmp/pi-ref}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
log="$dir/npm-install.log"

cat >"$dir/package.json" <<JSON
{
  "name": "pi-reference",
  "private": true,
  "dependencies": { "@earendil-works/pi-coding-agent": "$pi_version" },
  "overrides": { "undici": "$undici_version" }
}
JSON

if ! npm install --prefix "$dir" --no-audit --no-fund >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "install-pi.sh: npm install failed (whole log: $log)" >&2
    exit 1
fi

# The override is what makes pi start on Node 20; refuse to finish if any other undici slipped in.
found=0
while IFS= read -r -d '' manifest; do
    found=$((found + 1))
    have=$(node -p 'require(process.argv[1]).version' "$manifest")
    if [ "$have" != "$undici_version" ]; then
        echo "install-pi.sh: ${manifest%/package.json} is undici $have, not $undici_version" >&2
        exit 1
    fi
done < <(find "$dir/node_modules" -path '*/node_modules/undici/package.json' -print0)
if [ "$found" -eq 0 ]; then
    echo "install-pi.sh: no undici under $dir/node_modules; pi $pi_version is expected to need it" >&2
    exit 1
fi

"$dir/node_modules/.bin/pi" --version
