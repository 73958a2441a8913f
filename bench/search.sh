#!/usr/bin/env bash
# grep and find over a large source tree: tau's in-process tools (the `search` example of
# tau-tools) against ripgrep and fd run as processes, as pi runs them. Each comparison does the
# full work on both sides (tool limits above the number of results, rg/fd without a limit),
# except the one that shows pi's default grep limit of 100 matches.
#
# The tree is the Rust toolchain's sources (`rustc --print sysroot`/lib/rustlib/src) if the
# rust-src component is installed, else ~/.cargo/registry/src, copied once to $TREE_COPY with an
# empty `.git` directory at its top: rg and fd then honour the tree's .gitignore files as tau
# always does, so all of them search the same files.
#   bash bench/search.sh        [TREE=dir] [TREE_COPY=/tmp/tau-search-tree] [RUNS=10]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-10}
copy=${TREE_COPY:-/tmp/tau-search-tree}

need() {
  command -v "$1" >/dev/null && return
  apt-get install -y "$2" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y "$2" >/dev/null; }
}
need rg ripgrep
need fdfind fd-find
need hyperfine hyperfine

if [ -z "${TREE:-}" ]; then
  TREE="$(rustc --print sysroot)/lib/rustlib/src"
  [ -d "$TREE" ] || TREE="$HOME/.cargo/registry/src"
fi
if [ ! -d "$copy" ]; then
  mkdir -p "$copy"
  cp -a "$TREE/." "$copy/"
  mkdir -p "$copy/.git"
fi
files=$(find "$copy" -type f -not -path '*/.git/*' | wc -l)
size=$(du -sh --exclude=.git "$copy" | cut -f1)
echo "tree: $TREE ($files files, $size), searched in its copy $copy"

cargo build --profile dist --quiet -p tau-tools --example search
search="${CARGO_TARGET_DIR:-$PWD/target}/dist/examples/search"
big=100000000

# Sanity: tau finds what rg and fd find. tau's text is capped at 50KB; when it is cut, the count
# is the `totalLines` of the truncation details.
count() {
  "$search" "$@" --limit $big --details >"$copy.out" 2>"$copy.details"
  python3 - "$copy.out" "$copy.details" <<'PY'
import json, sys
text, details = open(sys.argv[1]).read(), open(sys.argv[2]).read().strip()
details = json.loads(details) if details else {}
if "truncation" in details:
    print(details["truncation"]["totalLines"])
else:
    print(len(text.rstrip("\n").split("\n")))
PY
  rm -f "$copy.out" "$copy.details"
}
for pattern in 'pub fn' 'unsafe impl\b.*Send'; do
  tau_n=$(count grep "$pattern" "$copy")
  rg_n=$(rg -n --hidden -g '!.git' --no-heading -- "$pattern" "$copy" | wc -l)
  echo "grep '$pattern': tau $tau_n matching lines, rg $rg_n"
done
tau_n=$(count find '*.rs' "$copy")
fd_n=$(fdfind -g --hidden -E .git '*.rs' "$copy" | wc -l)
echo "find '*.rs': tau $tau_n files, fd $fd_n"

table=$(mktemp)
trap 'rm -f "$table"' EXIT
bench() {
  hyperfine --warmup 2 --runs "$runs" --style none --export-markdown "$table" "$@" >/dev/null 2>&1
  cat "$table"
}

echo
echo "## grep"
bench \
  "$search grep 'pub fn' $copy --limit $big" \
  "rg -n --hidden -g !.git -- 'pub fn' $copy" \
  "rg --json --line-number --color=never --hidden -- 'pub fn' $copy"
bench \
  "$search grep 'unsafe impl\\b.*Send' $copy --limit $big" \
  "rg -n --hidden -g !.git -- 'unsafe impl\\b.*Send' $copy"
echo
echo "## grep with pi's default limit (100 matches)"
# pi stops rg once it has read 100 match records; `grep -m` does the same to rg here.
bench \
  "$search grep 'pub fn' $copy" \
  "rg --json --line-number --color=never --hidden -- 'pub fn' $copy | grep -m 100 '^{\"type\":\"match\"'"
echo
echo "## find"
bench \
  "$search find '*.rs' $copy --limit $big" \
  "fdfind -g --hidden -E .git '*.rs' $copy"
bench \
  "$search find 'src/**/*.rs' $copy --limit $big" \
  "fdfind -g --hidden -E .git --full-path '**/src/**/*.rs' $copy"
