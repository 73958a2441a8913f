#!/usr/bin/env bash
# Installs pi 1.5.2 (@earendil-works/pi-coding-agent), the newest pi, whose lean `message_update`
# and `agent_settled` are the reference for tau's lean RPC shape, into a directory of its own.
#
#   bash bench/reference/install-pi15.sh [DIR]      DIR defaults to /tmp/pi15-ref
#
# The agent is then DIR/node_modules/.bin/pi; give it PI_CODING_AGENT_DIR as for install-pi.sh.
#
# A plain `npm install` of 1.5.2 fails: the package pins pi-tui, pi-codemode and pi-mcp 1.5.2,
# which were never published. Its CLI bundle carries those inside it, so this script unpacks the
# published tarball as it is, lets npm install only the packages the bundle still loads by name,
# at the versions pi asks for (typebox, quickjs-wasi and @silvia-odwyer/photon-node, plus jiti,
# which it needs only to load a TypeScript extension), and installs pi15-node20.cjs from this
# directory as the `pi` command: it supplies the Node >= 22 APIs the bundle needs before starting
# it, so it runs on Node 20.
set -euo pipefail

pi_version=1.5.2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${1:-/tmp/pi15-ref}
mkdir -p "$dir/.pkg"
dir=$(cd "$dir" && pwd)
log="$dir/npm-install.log"

tarball="$dir/.pkg/earendil-works-pi-coding-agent-$pi_version.tgz"
if [ ! -s "$tarball" ]; then
    npm pack --silent --pack-destination "$dir/.pkg" "@earendil-works/pi-coding-agent@$pi_version" >/dev/null
fi

# DIR/package.json asks for the bundle's external packages, at the versions pi's manifest names.
tar -xzOf "$tarball" package/package.json | node -e '
    const wanted = ["typebox", "quickjs-wasi", "@silvia-odwyer/photon-node", "jiti"];
    const manifest = JSON.parse(require("fs").readFileSync(0, "utf8"));
    const dependencies = {};
    for (const name of wanted) {
        if (!manifest.dependencies[name]) throw new Error("pi no longer depends on " + name);
        dependencies[name] = manifest.dependencies[name];
    }
    const pkg = { name: "pi15-reference", private: true, dependencies };
    require("fs").writeFileSync(process.argv[1], JSON.stringify(pkg, null, 2) + "\n");
' "$dir/package.json"

if ! npm install --prefix "$dir" --no-audit --no-fund >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "install-pi15.sh: npm install failed (whole log: $log)" >&2
    exit 1
fi

# pi itself, unpacked where npm would have put it (after npm install, which would prune it).
pkg="$dir/node_modules/@earendil-works/pi-coding-agent"
rm -rf "$pkg"
mkdir -p "$pkg"
tar -xzf "$tarball" -C "$pkg" --strip-components=1

bin="$dir/node_modules/.bin/pi"
mkdir -p "$(dirname "$bin")"
rm -f "$bin"
install -m 755 "$here/pi15-node20.cjs" "$bin"

"$bin" --version
