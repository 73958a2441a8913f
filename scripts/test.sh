#!/usr/bin/env bash
# The test command (README): installs the Node extension host's pinned packages (npm ci, from
# its lockfile), runs the host's own tests, then every Rust test of the workspace, which
# include the black-box tests that load pi's TypeScript extensions through the host.
# The host's tests run while the Rust tests compile: both have idle moments (the host's tests
# wait on child processes, the build on single-threaded links), so the two overlap well.
set -euo pipefail
cd "$(dirname "$0")/.."
(cd extensions/node-host && npm ci --no-audit --no-fund --loglevel=error)
host_log=$(mktemp)
trap 'rm -f "$host_log"' EXIT
(cd extensions/node-host && npm test) >"$host_log" 2>&1 &
host_tests=$!
build_status=0
cargo test --workspace --no-run || build_status=$?
host_status=0
wait "$host_tests" || host_status=$?
cat "$host_log"
if [ "$host_status" -ne 0 ]; then
  echo "the Node extension host's tests failed" >&2
  exit "$host_status"
fi
[ "$build_status" -eq 0 ] || exit "$build_status"
cargo test --workspace
