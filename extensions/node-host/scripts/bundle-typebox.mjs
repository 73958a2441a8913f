// Runs after `npm ci` (postinstall), before cache-code.mjs. TypeBox 1.x ships as ~690 small ES
// modules, and Node 20 needs ~90 ms to resolve and link them, which was most of the load time of
// any extension that builds a tool schema (todo.ts 253 ms against 104 ms for one that does not).
// Two steps, each recorded by a stamp file so that a second run is a no-op:
//
// 1. The package's entry points (the files its `exports` map names) are rewritten in place as
//    esbuild bundles that share chunks, ~9 ms to load.
// 2. Those ES modules still compiled at every load (~360 KB, ~20 ms), which Node 20 cannot cache
//    for ES modules. So the entry points move aside (`<entry>.tau-esm.mjs`), all of them are
//    bundled into one CommonJS file, build/tau-typebox.cjs, that lib/code-cache.mjs loads with
//    V8's code cache (cache-code.mjs writes it), and each entry point becomes a small ES module
//    re-exporting its part of that file through build/tau-typebox.mjs. Every importer — pi's
//    packages through Node, extensions through jiti's alias, CommonJS through require(esm) —
//    still imports the entry points, and Node evaluates build/tau-typebox.mjs once, so there is
//    exactly one TypeBox in the process (its type checks compare its own symbols). Should this
//    step fail, the ES modules of step 1 are put back.
//
// The version stays the one package-lock.json pins; only the file layout changes.

import { createHash } from "node:crypto";
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";

// The one copy npm installs (hoisted; pi's packages ask for the same version).
const root = join(import.meta.dirname, "..", "node_modules", "typebox");
const build = join(root, "build");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
// subpath of the exports map ("." or "./value") -> the file it names for import and default.
const entries = new Map();
for (const [subpath, target] of Object.entries(pkg.exports ?? {})) {
	const files = new Set(typeof target === "string" ? [target] : Object.values(target));
	if (files.size !== 1) throw new Error(`typebox ${subpath}: one file expected for every condition, got ${[...files]}`);
	entries.set(subpath, join(root, [...files][0]));
}
const { build: esbuild } = await import("esbuild");

const chunked = join(build, ".tau-bundled");
if (!existsSync(chunked)) {
	await esbuild({
		entryPoints: [...entries.values()],
		bundle: true,
		splitting: true,
		format: "esm",
		platform: "node",
		outdir: build,
		outbase: build,
		allowOverwrite: true,
		outExtension: { ".js": ".mjs" },
		chunkNames: "_chunks/[name]-[hash]",
		logLevel: "warning",
	});
	writeFileSync(chunked, `bundled by tau's node host from typebox ${pkg.version}\n`);
}

const cjs = join(build, "tau-typebox.cjs");
const loader = join(build, "tau-typebox.mjs");
const codeCache = join(import.meta.dirname, "..", "lib", "code-cache.mjs");
// This script's own hash too, so that a changed recipe rewrites the files.
const recipe = createHash("sha256").update(readFileSync(import.meta.filename)).digest("hex").slice(0, 12);
const stamp = join(build, ".tau-cjs");
const stampText = `typebox ${pkg.version} as one CommonJS file (${recipe})\n`;
if (existsSync(stamp) && readFileSync(stamp, "utf8") === stampText) process.exit(0);

const esmOf = (file) => file.replace(/\.mjs$/, ".tau-esm.mjs");
// An identifier per subpath, the key of its namespace in the CommonJS file.
const keyOf = (subpath) => (subpath === "." ? "index" : subpath.slice(2).replace(/[^A-Za-z0-9_$]/g, "_"));
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

rmSync(stamp, { force: true });
try {
	for (const file of entries.values()) {
		// The ES module of step 1 moves aside once; a rerun builds from it again.
		if (!existsSync(esmOf(file))) renameSync(file, esmOf(file));
	}
	await esbuild({
		// Each entry point's part is evaluated when first read: an extension that builds a
		// schema needs `typebox` alone, ~40 % of what evaluating every part costs (~10 ms). And
		// kept: esbuild turns each `require` of an ES module into a fresh CommonJS copy of its
		// namespace (a getter per export, ~300 for `typebox`), which every read would make again.
		stdin: {
			contents: [...entries]
				.map(([subpath, file]) => `{ let part; Object.defineProperty(exports, ${JSON.stringify(keyOf(subpath))}, { enumerable: true, get: () => (part ??= require(${JSON.stringify(esmOf(file))})) }); }`)
				.join("\n"),
			resolveDir: build,
			sourcefile: "tau-typebox-entry.cjs",
		},
		bundle: true,
		format: "cjs",
		platform: "node",
		target: "node20",
		outfile: cjs,
		// Whitespace and syntax only: names stay as TypeBox wrote them (stack traces, `name`).
		// Every load reads, hashes and scans the source, so a third less text is a few ms.
		minifyWhitespace: true,
		minifySyntax: true,
		logLevel: "warning",
		banner: { js: `// typebox ${pkg.version}, every entry point in one file: written by tau's node host (scripts/bundle-typebox.mjs).` },
	});
	// esbuild's `require` of an ES module hands out a CommonJS copy of its namespace, a getter per
	// export that calls the namespace's own getter: each read of `Type` went through two, and the
	// copy cost ~1 ms to make. The parts are the namespaces themselves, marked as ES modules as the
	// copy was (one `__esModule`, not enumerable), so importers see the same names and values.
	const bundled = readFileSync(cjs, "utf8");
	const copies = /part\?\?=\((init_[\w$]+)\(\),__toCommonJS\(([\w$]+)\)\)/g;
	const parts = bundled.match(copies)?.length ?? 0;
	if (parts !== entries.size) throw new Error(`expected ${entries.size} parts in tau-typebox.cjs, found ${parts}`);
	writeFileSync(cjs, bundled.replace(copies, 'part??=($1(),__defProp($2,"__esModule",{value:!0}))'));
	const namespaces = createRequire(import.meta.url)(cjs);
	const codeCacheUrl = relative(build, codeCache).split("\\").join("/");
	writeFileSync(
		loader,
		[
			"// Written by tau's node host (scripts/bundle-typebox.mjs): TypeBox's one instance, loaded from",
			"// tau-typebox.cjs with V8's code cache; every entry point of the package re-exports from here.",
			'import { fileURLToPath } from "node:url";',
			`import { requireWithCodeCache } from ${JSON.stringify(codeCacheUrl)};`,
			'export const typebox = requireWithCodeCache(fileURLToPath(new URL("./tau-typebox.cjs", import.meta.url)));',
			"",
		].join("\n"),
	);
	for (const [subpath, file] of entries) {
		const namespace = namespaces[keyOf(subpath)];
		const names = Object.keys(namespace).filter((name) => name !== "default");
		const odd = names.filter((name) => !IDENTIFIER.test(name));
		if (odd.length) throw new Error(`typebox ${subpath} exports names that are not identifiers: ${odd}`);
		const from = relative(dirname(file), loader).split("\\").join("/");
		const lines = [
			"// Written by tau's node host (scripts/bundle-typebox.mjs): this entry point's part of TypeBox's one instance.",
			`import { typebox } from ${JSON.stringify(from.startsWith(".") ? from : `./${from}`)};`,
			`const namespace = typebox.${keyOf(subpath)};`,
			// TypeBox's exports are never reassigned, so copies of them are the same bindings.
			names.length ? `export const { ${names.join(", ")} } = namespace;` : "",
			"default" in namespace ? "export default namespace.default;" : "",
			"",
		];
		writeFileSync(file, lines.filter((line, i) => line !== "" || i === lines.length - 1).join("\n"));
	}
	writeFileSync(stamp, stampText);
} catch (err) {
	for (const file of entries.values()) if (existsSync(esmOf(file))) renameSync(esmOf(file), file);
	rmSync(cjs, { force: true });
	rmSync(loader, { force: true });
	console.warn(`tau: TypeBox stays ES modules: ${err instanceof Error ? err.message : err}`);
}
