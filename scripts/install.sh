#!/usr/bin/env bash
# Installs tau under a prefix: the binary as <prefix>/bin/tau and the Node extension host, with
# its pinned packages, as <prefix>/share/tau/node-host, where the binary looks for it (beside
# TAU_NODE_HOST and an extensions/node-host above the binary). `cargo install` alone gives a
# binary without the host, which cannot run TypeScript extensions.
#   bash scripts/install.sh [--prefix DIR] [--profile dist|release|dev]
# Defaults: --prefix ~/.local, --profile dist (the small binary: whole-program LTO, one codegen
# unit; a longer build). --profile dev reuses the test build (CI checks the install that way).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="$HOME/.local"
profile=dist
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=${2:?--prefix needs a folder}; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    --profile) profile=${2:?--profile needs a name}; shift 2 ;;
    --profile=*) profile=${1#--profile=}; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v node >/dev/null && command -v npm >/dev/null \
  || { echo "install.sh: Node.js >= 20 with npm is needed for the extension host" >&2; exit 1; }

cargo build --locked --quiet --profile "$profile" -p tau
# Cargo names the dev profile's folder "debug".
out_dir=$profile
[ "$profile" = dev ] && out_dir=debug
target_dir=${CARGO_TARGET_DIR:-target}

mkdir -p "$prefix/bin" "$prefix/share/tau"
# Replaced, not overwritten in place: a running tau keeps its old binary.
install -m 0755 "$target_dir/$out_dir/tau" "$prefix/bin/tau.new"
mv -f "$prefix/bin/tau.new" "$prefix/bin/tau"

# The host: its sources and lock file, then its packages installed from the lock file there.
host="$prefix/share/tau/node-host"
staging="$prefix/share/tau/.node-host.new"
rm -rf "$staging"
mkdir -p "$staging"
cp -R extensions/node-host/host.cjs extensions/node-host/host.mjs extensions/node-host/lib extensions/node-host/scripts \
  extensions/node-host/package.json extensions/node-host/package-lock.json "$staging/"
(cd "$staging" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
rm -rf "$host"
mv "$staging" "$host"
# The start-up snapshot holds the paths of the folder it was built in, and host.cjs and tau use
# it only there (extensions/node-host/scripts/build-snapshot.mjs): built again where it stays.
node "$host/scripts/build-snapshot.mjs"

echo "tau installed: $prefix/bin/tau (extension host: $host)"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "add $prefix/bin to PATH to run it as tau" ;;
esac
