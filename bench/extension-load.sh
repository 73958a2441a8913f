#!/usr/bin/env bash
# Time to answer the first command with each of pi's acceptance example extensions loaded
# (unmodified, from extensions/node-host/test/fixtures/pi-examples), tau against pi 0.79 in
# the same run, and each extension's own load cost (the time with it minus the time with
# none). tau loads TypeScript extensions through its Node host; pi loads them in-process.
# Timed from spawn to the answer to `get_state` (bench/first-answer.py), not to the exit.
#   bash bench/extension-load.sh      [PI_DIR=/tmp/pi-ref] [RUNS=10]
# Needs, for the pi column, bash bench/reference/install-pi.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
pi_dir=${PI_DIR:-/tmp/pi-ref}
runs=${RUNS:-10}
cargo build --profile dist --quiet -p tau
(cd extensions/node-host && [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error)
tau="$PWD/target/dist/tau"
first_answer="$PWD/bench/first-answer.py"
pi="$pi_dir/node_modules/.bin/pi"
examples="$PWD/extensions/node-host/test/fixtures/pi-examples"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/agent" "$work/pi-agent" "$work/repo"
git -C "$work/repo" init -q
export TAU_AGENT_DIR="$work/agent" PI_CODING_AGENT_DIR="$work/pi-agent" PI_OFFLINE=1 PI_SKIP_VERSION_CHECK=1
cd "$work/repo"

median_ms() {
  python3 "$first_answer" --runs "$runs" -- "$@" 2>/dev/null || echo nan
}

have_pi=0; [ -x "$pi" ] && have_pi=1
tau_base=$(median_ms "$tau" --mode rpc --no-session)
pi_base=nan; [ $have_pi = 1 ] && pi_base=$(median_ms "$pi" --mode rpc --no-session)
printf '| extension | tau ms | tau load ms | pi 0.79 ms | pi load ms | tau/pi |\n|---|---:|---:|---:|---:|---:|\n'
printf '| (none) | %s | | %s | | %s |\n' "$tau_base" "$pi_base" \
  "$(python3 -c "import sys; a,b=map(float,sys.argv[1:]); print('%.2f' % (a/b))" "$tau_base" "$pi_base" 2>/dev/null || echo -)"
for ext in rpc-demo.ts plan-mode todo.ts preset.ts git-checkpoint.ts input-transform.ts \
           trigger-compact.ts dynamic-tools.ts structured-output.ts; do
  t=$(median_ms "$tau" --mode rpc --no-session -e "$examples/$ext")
  p=nan; [ $have_pi = 1 ] && p=$(median_ms "$pi" --mode rpc --no-session -e "$examples/$ext")
  python3 - "$ext" "$t" "$tau_base" "$p" "$pi_base" <<'PY'
import sys
name, t, tb, p, pb = sys.argv[1], *map(float, sys.argv[2:])
ratio = "%.2f" % (t / p) if p == p else "-"
print("| %s | %.1f | %.1f | %.1f | %.1f | %s |" % (name, t, t - tb, p, p - pb, ratio))
PY
done
