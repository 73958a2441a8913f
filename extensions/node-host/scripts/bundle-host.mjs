// Runs after `npm ci` (postinstall). Writes the host's own modules (lib/main.mjs and what it
// imports from lib/) as one CommonJS file, lib/host.bundle.cjs, and in lib/host.bundle.json the
// size and modification time of each file it was made from and of the bundle, which host.cjs
// checks before using it (host.cjs says why). Packages stay imports of their own: the bundle
// holds only the host's code. It sits in lib/ beside the sources, so `import.meta.url`, which
// becomes the bundle's own URL, still names a file there; `import.meta.resolve` (only Node's
// fallback in packages.mjs) becomes require.resolve, the one resolver CommonJS has.

import { rmSync, statSync, writeFileSync } from "node:fs";
import { basename, join, relative } from "node:path";
import { hostBuildOptions, routeImports } from "./host-cjs.mjs";

const root = join(import.meta.dirname, "..");
const lib = join(root, "lib");
const out = join(lib, "host.bundle.cjs");
rmSync(join(lib, "host.bundle.mjs"), { force: true });
const record = join(lib, "host.bundle.json");
rmSync(record, { force: true });

const { build } = await import("esbuild");
const result = await build(hostBuildOptions(root, join(lib, "main.mjs"), out));
// host.cjs runs the bundle from V8's code cache (lib/code-cache.cjs), where `import()` fails.
routeImports(out);

const files = {};
for (const input of Object.keys(result.metafile.inputs)) {
	const path = join(root, input);
	if (relative(lib, path).startsWith("..")) throw new Error(`the bundle took in ${input}, outside lib/`);
	files[relative(lib, path)] = stamp(path);
}
files[basename(out)] = stamp(out);
writeFileSync(record, `${JSON.stringify({ files })}\n`);

function stamp(path) {
	const { size, mtimeMs } = statSync(path);
	return [size, mtimeMs];
}
