// Runs after `npm ci` (postinstall). Writes the host's own modules (lib/main.mjs and what it
// imports from lib/) as one ES module, lib/host.bundle.mjs, and in lib/host.bundle.json the
// size and modification time of each file it was made from and of the bundle, which host.mjs
// checks before using it (host.mjs says why). Packages stay imports of their own: the bundle
// holds only the host's code, unchanged, so import.meta.url still names a file in lib/.

import { readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, join, relative } from "node:path";

const root = join(import.meta.dirname, "..");
const lib = join(root, "lib");
const out = join(lib, "host.bundle.mjs");
const record = join(lib, "host.bundle.json");
rmSync(record, { force: true });

const { build } = await import("esbuild");
const result = await build({
	absWorkingDir: root,
	entryPoints: [join(lib, "main.mjs")],
	bundle: true,
	format: "esm",
	platform: "node",
	target: "node20",
	packages: "external",
	outfile: out,
	metafile: true,
	logLevel: "warning",
	banner: { js: "// Written by scripts/bundle-host.mjs from lib/*.mjs at install; edit those, not this." },
});

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
