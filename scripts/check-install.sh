#!/usr/bin/env bash
# CI's check of the install path: scripts/install.sh into a temporary prefix (reusing the test
# build), then the installed tau, started outside the repository with a clean environment,
# runs a TypeScript extension that lives outside the repository too.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash scripts/install.sh --prefix "$work/prefix" --profile dev >/dev/null
mkdir -p "$work/agent" "$work/project" "$work/ext"
cat >"$work/ext/hello.ts" <<'TS'
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
export default function (pi: ExtensionAPI) {
	const greeting: string = "installed";
	pi.registerCommand("hello-from-install", { description: greeting, handler: async () => {} });
}
TS
cd "$work/project"
answer=$(printf '%s\n' '{"id":"c","type":"get_commands"}' \
  | env -i PATH="/usr/local/bin:/usr/bin:/bin" HOME="$work" TAU_AGENT_DIR="$work/agent" \
      "$work/prefix/bin/tau" --mode rpc --no-session -e "$work/ext/hello.ts")
if ! grep -q '"name":"hello-from-install"' <<<"$answer"; then
  echo "check-install: the installed tau did not load the extension:" >&2
  echo "$answer" >&2
  exit 1
fi
# The host's start-up snapshot was built for the folder it was installed in (install.sh).
record="$work/prefix/share/tau/node-host/lib/host.snapshot.json"
if ! grep -qF "\"host\": \"$(realpath "$work/prefix/share/tau/node-host/host.cjs")\"" "$record"; then
  echo "check-install: the installed host's start-up snapshot is not for its folder:" >&2
  cat "$record" >&2 || true
  exit 1
fi
echo "check-install: the installed tau ran a TypeScript extension from outside the repository"
