// Runs after `npm ci` (postinstall). Writes the host's own modules (lib/main.mjs and what it
// imports from lib/) as one CommonJS file, lib/host.bundle.cjs, and in lib/host.bundle.json the
// size and modification time of each file it was made from and of the bundle, which host.cjs
// checks before using it (host.cjs says why). Packages stay imports of their own: the bundle
// holds only the host's code. It sits in lib/ beside the sources, so `import.meta.url`, which
// becomes the bundle's own URL, still names a file there; `import.meta.resolve` (only Node's
// fallback in packages.mjs) becomes require.resolve, the one resolver CommonJS has.

import { readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, join, relative } from "node:path";

const root = join(import.meta.dirname, "..");
const lib = join(root, "lib");
const out = join(lib, "host.bundle.cjs");
rmSync(join(lib, "host.bundle.mjs"), { force: true });
const record = join(lib, "host.bundle.json");
rmSync(record, { force: true });

const { build } = await import("esbuild");
// Where host.cjs leaves its `import()` for the bundle (see below).
const IMPORT_KEY = "tau.node-host.import";
const result = await build({
	absWorkingDir: root,
	entryPoints: [join(lib, "main.mjs")],
	bundle: true,
	format: "cjs",
	define: { "import.meta.url": "__tauModuleUrl", "import.meta.resolve": "__tauResolve" },
	platform: "node",
	target: "node20",
	packages: "external",
	outfile: out,
	metafile: true,
	logLevel: "warning",
	banner: {
		js: [
			"// Written by scripts/bundle-host.mjs from lib/*.mjs at install; edit those, not this.",
			// The sources are ES modules, which are strict.
			'"use strict";',
			'const __tauModuleUrl = require("node:url").pathToFileURL(__filename).href;',
			'const __tauResolve = (specifier) => require("node:url").pathToFileURL(require.resolve(specifier)).href;',
			`const __tauImport = globalThis[Symbol.for("${IMPORT_KEY}")] ?? ((specifier) => import(specifier));`,
		].join("\n"),
	},
});

// host.cjs runs the bundle from V8's code cache (lib/code-cache.cjs), and in Node 20 code that
// came from a code cache cannot use `import()` ("A dynamic import callback was not specified"):
// the bundle's own imports of ES modules go through a function host.cjs defines, whose code Node
// compiles as usual. The specifiers are absolute URLs or paths, so the importer does not matter.
const bundled = readFileSync(out, "utf8");
const imports = /(?<![\w$.])import\(/g;
// After the banner's own line, the fallback for a bundle that runs without the cache.
const body = bundled.indexOf("\n", bundled.indexOf("const __tauImport")) + 1;
writeFileSync(out, bundled.slice(0, body) + bundled.slice(body).replace(imports, "__tauImport("));

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
