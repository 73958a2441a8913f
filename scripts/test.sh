#!/usr/bin/env bash
# The test command (README): installs the Node extension host's pinned packages (npm ci, from
# its lockfile), runs the host's own tests, then every Rust test of the workspace, which
# include the black-box tests that load pi's TypeScript extensions through the host.
set -euo pipefail
cd "$(dirname "$0")/.."
(cd extensions/node-host && npm ci --no-audit --no-fund --loglevel=error)
(cd extensions/node-host && npm test)
cargo test --workspace
