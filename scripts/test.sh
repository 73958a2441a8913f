#!/usr/bin/env bash
# The test command (README): installs the pinned Node packages the tests use (npm ci, each from
# its lockfile: the extension host, the real MCP servers of the MCP tests, the official ACP
# client), runs the host's own tests, then every Rust test of the workspace, which include the
# black-box tests that load pi's TypeScript extensions through the host and talk to the MCP
# servers, then the ACP client's tests against the built binary.
# The host's tests run while the Rust tests compile: both have idle moments (the host's tests
# wait on child processes, the build on single-threaded links), so the two overlap well.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
npm_ci() { (cd "$1" && npm ci --no-audit --no-fund --loglevel=error); }
npm_ci extensions/node-host &
host_install=$!
npm_ci crates/tau/tests/fixtures/mcp-servers &
servers_install=$!
npm_ci crates/tau-acp/tests/ts-client &
client_install=$!
wait "$host_install"
wait "$servers_install"
wait "$client_install"
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
# Four test threads on two cores: most black-box tests wait on the processes they start (measured
# on the 2-core machine: tests/rpc 73 s instead of 85 s).
cargo test --workspace -- --test-threads "${TAU_TEST_THREADS:-4}"
(cd crates/tau-acp/tests/ts-client && TAU_BIN="$target/debug/tau" MOCK_BIN="$target/debug/tau-mock-llm" npm test)
