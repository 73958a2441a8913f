// What scripts/bundle-host.mjs and scripts/build-snapshot.mjs share: the esbuild options that
// turn the host's ES modules (lib/*.mjs) into one CommonJS file, and the step after the build
// that sends the file's `import()` calls through host.cjs (bundle-host.mjs says why).

import { readFileSync, writeFileSync } from "node:fs";

// Where host.cjs leaves its `import()`.
const IMPORT_KEY = "tau.node-host.import";

/** esbuild options for a CommonJS file of the host's modules from `entry`, written to `outfile`.
 * Packages stay imports of their own: the file holds only the host's code. */
export function hostBuildOptions(root, entry, outfile) {
	return {
		absWorkingDir: root,
		entryPoints: [entry],
		bundle: true,
		format: "cjs",
		define: { "import.meta.url": "__tauModuleUrl", "import.meta.resolve": "__tauResolve" },
		platform: "node",
		target: "node20",
		packages: "external",
		outfile,
		metafile: true,
		logLevel: "warning",
		banner: {
			js: [
				"// Written by tau's node host at install from lib/*.mjs; edit those, not this.",
				// The sources are ES modules, which are strict.
				'"use strict";',
				'const __tauModuleUrl = require("node:url").pathToFileURL(__filename).href;',
				// Not the file's own `require`: a snapshot's resolves built-in modules only.
				'const __tauResolve = (specifier) => require("node:url").pathToFileURL(require("node:module").createRequire(__filename).resolve(specifier)).href;',
				// Looked up at each call: the snapshot evaluates this line at install, before host.cjs
				// defines the function.
				`const __tauImport = (specifier) => (globalThis[Symbol.for("${IMPORT_KEY}")] ?? ((specifier) => import(specifier)))(specifier);`,
			].join("\n"),
		},
	};
}

/**
 * Node 20 cannot run `import()` in code that came from a code cache or a start-up snapshot
 * ("A dynamic import callback was not specified"): the file's own imports of ES modules go
 * through the function host.cjs defines, whose code Node compiles as usual. The specifiers are
 * absolute URLs or paths, so the importer does not matter.
 */
export function routeImports(outfile) {
	const bundled = readFileSync(outfile, "utf8");
	const imports = /(?<![\w$.])import\(/g;
	// After the banner's own line, the fallback for a file that runs without either.
	const body = bundled.indexOf("\n", bundled.indexOf("const __tauImport")) + 1;
	writeFileSync(outfile, bundled.slice(0, body) + bundled.slice(body).replace(imports, "__tauImport("));
}
