#!/usr/bin/env bash
# Cold start of `tau --mode rpc` up to its get_state response (the process answers, sees EOF and
# exits, so the whole run is measured), and peak resident memory of that run.
# With the reference pi installed (bash bench/reference/install-pi.sh /tmp/pi-ref), pi 0.79 is
# measured in the same run and the ratio reported. BEFORE=<another tau binary> measures it too,
# in the same run (a copy of target/dist/tau kept from before a change).
#   bash bench/startup.sh            [PI_DIR=/tmp/pi-ref] [RUNS=300] [PI_RUNS=10] [BEFORE=path]
set -euo pipefail
cd "$(dirname "$0")/.."
pi_dir=${PI_DIR:-/tmp/pi-ref}
command -v hyperfine >/dev/null || apt-get install -y hyperfine >/dev/null
[ -x /usr/bin/time ] || apt-get install -y time >/dev/null

cargo build --profile dist --quiet -p tau
tau="${CARGO_TARGET_DIR:-$PWD/target}/dist/tau"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/agent" "$work/pi-agent"
printf '%s\n' '{"id":"1","type":"get_state"}' >"$work/get_state.jsonl"
export TAU_AGENT_DIR="$work/agent" PI_CODING_AGENT_DIR="$work/pi-agent"

# Sanity: the response is really there.
"$tau" --mode rpc --no-session <"$work/get_state.jsonl" | grep -q '"command":"get_state","success":true'

# median milliseconds of a command over N runs
median_ms() {
  hyperfine --warmup 3 --runs "$2" --export-json "$work/t.json" "$1" >/dev/null 2>&1
  python3 -c "import json,sys; print('%.3f' % (json.load(open(sys.argv[1]))['results'][0]['median']*1000))" "$work/t.json"
}

# highest peak RSS (KiB) over 5 runs; exec so the shell is not what is measured
peak_rss_kb() {
  local best=0 kb
  for _ in 1 2 3 4 5; do
    /usr/bin/time -f '%M' -o "$work/rss" sh -c "exec $1" >/dev/null 2>&1 </dev/null
    kb=$(tail -n1 "$work/rss")
    [ "$kb" -gt "$best" ] && best=$kb
  done
  echo "$best"
}

tau_cmd="$tau --mode rpc --no-session < $work/get_state.jsonl"
tau_ms=$(median_ms "$tau_cmd" "${RUNS:-300}")
tau_kb=$(peak_rss_kb "$tau_cmd")
printf '%-4s median %9.3f ms   peak RSS %7.1f MiB\n' tau "$tau_ms" "$(echo "$tau_kb / 1024" | bc -l)"
if [ -n "${BEFORE:-}" ]; then
  before_cmd="$BEFORE --mode rpc --no-session < $work/get_state.jsonl"
  before_ms=$(median_ms "$before_cmd" "${RUNS:-300}")
  before_kb=$(peak_rss_kb "$before_cmd")
  printf '%-4s median %9.3f ms   peak RSS %7.1f MiB   (%s)\n' before "$before_ms" \
    "$(echo "$before_kb / 1024" | bc -l)" "$BEFORE"
fi

if [ -x "$pi_dir/node_modules/.bin/pi" ]; then
  pi_cmd="$pi_dir/node_modules/.bin/pi --mode rpc --no-session < $work/get_state.jsonl"
  pi_ms=$(median_ms "$pi_cmd" "${PI_RUNS:-10}")
  pi_kb=$(peak_rss_kb "$pi_cmd")
  printf '%-4s median %9.3f ms   peak RSS %7.1f MiB\n' pi "$pi_ms" "$(echo "$pi_kb / 1024" | bc -l)"
  printf 'tau/pi: %.4f of the time, %.4f of the memory\n' \
    "$(echo "$tau_ms / $pi_ms" | bc -l)" "$(echo "$tau_kb / $pi_kb" | bc -l)"
fi

# Instruction count: repeatable on a noisy machine, unlike wall time.
if command -v valgrind >/dev/null; then
  instructions=$(valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
    "$tau" --mode rpc --no-session <"$work/get_state.jsonl" 2>&1 >/dev/null \
    | sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
  printf 'tau instructions to answer get_state and exit: %s\n' "$instructions"
  if [ -n "${BEFORE:-}" ]; then
    instructions=$(valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
      "$BEFORE" --mode rpc --no-session <"$work/get_state.jsonl" 2>&1 >/dev/null \
      | sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
    printf 'before instructions to answer get_state and exit: %s\n' "$instructions"
  fi
fi

# The start-up code is placed together by the linker (crates/tau/build.rs, decisions T89 and
# T130) from a list of the functions that ran, by name and, for the instances of a generic
# function, by size and hash. When too few of them are found in the binary as the instance
# that ran, the list has decayed and the idle footprint grows back: say so, and fail when the
# footprint is over the goal (CI checks the least of five runs: bench/idle-rss.py).
python3 crates/tau/link/order_symbols.py --report "$tau" ||
  echo "start-up order: the list is stale; refresh it with: python3 scripts/startup-order.py" >&2
budget_kb=$((8 * 1024))
if [ "$tau_kb" -gt "$budget_kb" ]; then
  echo "idle footprint: peak RSS ${tau_kb} KiB is over the goal of ${budget_kb} KiB" >&2
  exit 1
fi
