#!/usr/bin/env bash
# The test command (README): installs the pinned Node packages the tests use (npm ci, each from
# its lockfile: the extension host, the real MCP servers of the MCP tests, the official ACP
# client), runs the host's own tests, every Rust test of the workspace (which include the
# black-box tests that load pi's TypeScript extensions through the host and talk to the MCP
# servers) and the ACP client's tests against the built binary.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
npm_ci() { (cd "$1" && npm ci --no-audit --no-fund --loglevel=error); }
# The tests open no network connection, and an extra CA bundle (some machines set one for a
# proxy; this sandbox sets the whole system bundle) costs each of the tests' several
# hundred Node starts about 80 ms of CPU to parse. Only the installs keep it.
tests_env=(env -u NODE_EXTRA_CA_CERTS)
# The installs and the host's tests run while cargo builds: the build is CPU-bound, the
# installs wait on the disk and the host's tests on their child processes.
(
  npm_ci crates/tau/tests/fixtures/mcp-servers &
  servers=$!
  npm_ci crates/tau-acp/tests/ts-client &
  client=$!
  npm_ci extensions/node-host || { touch "$work/npm.failed"; exit 1; }
  (cd extensions/node-host && "${tests_env[@]}" npm test) >"$work/host.log" 2>&1 &
  host_tests=$!
  wait "$servers" && wait "$client" || { touch "$work/npm.failed"; exit 1; }
  touch "$work/npm"
  wait "$host_tests"
) &
node_side=$!
# Every test binary runs as soon as it is linked, the black-box one in a lane of its own
# (scripts/run-tests.py); four test threads on two cores, since most black-box tests wait on
# the processes they start. The official ACP client's tests run against the built binary.
rust_status=0
"${tests_env[@]}" python3 scripts/run-tests.py --ready "$work/npm" --threads "${TAU_TEST_THREADS:-4}" \
  --after "cd crates/tau-acp/tests/ts-client && TAU_BIN='$target/debug/tau' MOCK_BIN='$target/debug/tau-mock-llm' npm test" \
  -- cargo test --workspace || rust_status=$?
node_status=0
wait "$node_side" || node_status=$?
[ -f "$work/host.log" ] && cat "$work/host.log"
if [ "$node_status" -ne 0 ]; then
  echo "the Node side failed (npm ci or the extension host's tests)" >&2
  exit "$node_status"
fi
exit "$rust_status"
