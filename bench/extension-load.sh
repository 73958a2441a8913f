#!/usr/bin/env bash
# Time to answer the first command with each of pi's acceptance example extensions loaded
# (unmodified, from extensions/node-host/test/fixtures/pi-examples), tau against pi 0.79 in
# the same run, and each extension's own load cost (the time with it minus the time with
# none). tau loads TypeScript extensions through its Node host; pi loads them in-process.
# Timed from spawn to the answer to `get_state` (bench/first-answer.py), not to the exit.
# Beside tau as it starts by default, "tau snap" starts the Node host from its V8 start-up
# snapshot (TAU_NODE_HOST_SNAPSHOT=1, extensions/node-host/scripts/build-snapshot.mjs), and
# "node" is a bare `node -e 0`, spawn to exit, in the same run: the floor under any Node host
# ("tau − node" is what tau adds above it). NODE_EXTRA_CA_CERTS, when set, makes every Node
# start parse the CA bundle (~35 ms on a 2-core machine); the header says whether it is.
#   bash bench/extension-load.sh      [PI_DIR=/tmp/pi-ref] [RUNS=10]
# Needs, for the pi column, bash bench/reference/install-pi.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
pi_dir=${PI_DIR:-/tmp/pi-ref}
runs=${RUNS:-10}
cargo build --profile dist --quiet -p tau
(cd extensions/node-host && [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error)
# An install from before the snapshot existed: only this step of its postinstall is missing.
[ -f extensions/node-host/lib/host.snapshot.json ] || node extensions/node-host/scripts/build-snapshot.mjs
tau="$PWD/target/dist/tau"
first_answer="$PWD/bench/first-answer.py"
pi="$pi_dir/node_modules/.bin/pi"
host_dir="$PWD/extensions/node-host"
examples="$host_dir/test/fixtures/pi-examples"
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
# Spawn to exit of `node -e 0`, the median of RUNS after two warm-ups.
node_floor() {
  python3 - "$runs" <<'PY'
import statistics, subprocess, sys, time
def once():
    started = time.perf_counter()
    subprocess.run(["node", "-e", "0"], check=True)
    return (time.perf_counter() - started) * 1000
for _ in range(2):
    once()
print("%.1f" % statistics.median(once() for _ in range(int(sys.argv[1]))))
PY
}
snapshot_ms() {
  TAU_NODE_HOST_SNAPSHOT=1 median_ms "$@"
}
[ -f "$host_dir/lib/host.snapshot.json" ] \
  || echo "no start-up snapshot (extensions/node-host/lib/host.snapshot.json): the tau snap column is tau's default start" >&2
tau_base=$(median_ms "$tau" --mode rpc --no-session)
pi_base=nan; [ $have_pi = 1 ] && pi_base=$(median_ms "$pi" --mode rpc --no-session)
node_ms=$(node_floor)
printf 'node %s; NODE_EXTRA_CA_CERTS %s; `node -e 0` %s ms\n\n' "$(node --version)" \
  "$([ -n "${NODE_EXTRA_CA_CERTS:-}" ] && echo set || echo unset)" "$node_ms"
printf '| extension | tau ms | tau load ms | tau snap ms | node -e 0 ms | tau − node ms | pi 0.79 ms | pi load ms | tau/pi |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n'
printf '| (none) | %s | | | %s | | %s | | %s |\n' "$tau_base" "$node_ms" "$pi_base" \
  "$(python3 -c "import sys; a,b=map(float,sys.argv[1:]); print('%.2f' % (a/b))" "$tau_base" "$pi_base" 2>/dev/null || echo -)"
for ext in rpc-demo.ts plan-mode todo.ts preset.ts git-checkpoint.ts input-transform.ts \
           trigger-compact.ts dynamic-tools.ts structured-output.ts; do
  # Interleaved, so that a busy spell of the machine falls on every column alike.
  t=$(median_ms "$tau" --mode rpc --no-session -e "$examples/$ext")
  n=$(node_floor)
  s=$(snapshot_ms "$tau" --mode rpc --no-session -e "$examples/$ext")
  p=nan; [ $have_pi = 1 ] && p=$(median_ms "$pi" --mode rpc --no-session -e "$examples/$ext")
  python3 - "$ext" "$t" "$tau_base" "$s" "$n" "$p" "$pi_base" <<'PY'
import sys
name, t, tb, s, n, p, pb = sys.argv[1], *map(float, sys.argv[2:])
ratio = "%.2f" % (t / p) if p == p else "-"
print("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %s |" % (name, t, t - tb, s, n, t - n, p, p - pb, ratio))
PY
done
