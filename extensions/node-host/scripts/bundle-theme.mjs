// Runs after `npm ci` (postinstall), after bundle-typebox.mjs. `ctx.ui.theme` is a synchronous
// getter, and pi's theme module pulled in every syntax highlighter of highlight.js (~240 ms) and
// the whole of pi-tui (~170 ms) to answer it, stalling every extension in the process behind the
// first access (issue 22). This writes, beside pi's theme module, one file of the same code in
// which pi-tui is only the module that detects the terminal's colours (the one function the
// theme uses) and highlight.js and cross-spawn are loaded on their first use. The code stays
// pi's, at the version package-lock.json pins; lib/packages.mjs loads this file when it exists.

import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const modules = join(import.meta.dirname, "..", "node_modules");
const codingAgent = join(modules, "@earendil-works", "pi-coding-agent");
const themeDir = join(codingAgent, "dist", "modes", "interactive", "theme");
const out = join(themeDir, "theme.tau-lite.mjs");
const version = JSON.parse(readFileSync(join(codingAgent, "package.json"), "utf8")).version;
const stamp = `// tau-lite of pi-coding-agent ${version}\n`;
if (existsSync(out) && readFileSync(out, "utf8").startsWith(stamp)) process.exit(0);

const requireFromTheme = createRequire(join(themeDir, "theme.js"));
// CommonJS modules the theme reaches but only uses on rare calls (highlighting code, spawning
// a process to find a path): each becomes a stand-in that loads the real one on first use.
const lazy = {
	"highlight.js/lib/index.js": requireFromTheme.resolve("highlight.js/lib/index.js"),
	"cross-spawn": createRequire(join(codingAgent, "dist", "utils", "child-process.js")).resolve("cross-spawn"),
};
const terminalImage = join(modules, "@earendil-works", "pi-tui", "dist", "terminal-image.js");

const standIn = (real) =>
	[
		'import { createRequire } from "node:module";',
		"let loaded;",
		`const real = () => (loaded ??= createRequire(import.meta.url)(${JSON.stringify(real)}));`,
		// A function target, so a module whose export is a function can still be called.
		"export default new Proxy(function () {}, {",
		"	get: (_, key) => Reflect.get(real(), key),",
		"	has: (_, key) => Reflect.has(real(), key),",
		"	apply: (_, self, args) => Reflect.apply(real(), self, args),",
		"});",
	].join("\n");

// TypeBox's compiler: the theme compiles its file schema as it loads, though only a theme file
// of the user's is ever checked with it; compiled on the first check instead.
const lazyCompile = [
	'import { createRequire } from "node:module";',
	"let compiler;",
	'const load = () => (compiler ??= createRequire(import.meta.url)("typebox/compile").Compile);',
	"export function Compile(schema) {",
	"\tlet compiled;",
	"\tconst real = () => (compiled ??= load()(schema));",
	"\treturn new Proxy({}, { get: (_, key) => { const value = Reflect.get(real(), key); return typeof value === \"function\" ? value.bind(real()) : value; } });",
	"}",
].join("\n");

const lean = {
	name: "tau-lean-theme",
	setup(build) {
		build.onResolve({ filter: /^@earendil-works\/pi-tui$/ }, () => ({ path: terminalImage }));
		build.onResolve({ filter: /^(highlight\.js\/lib\/index\.js|cross-spawn)$/ }, (args) => ({ path: args.path, namespace: "tau-lazy" }));
		build.onLoad({ filter: /.*/, namespace: "tau-lazy" }, (args) => ({ contents: standIn(lazy[args.path]), loader: "js" }));
		build.onResolve({ filter: /^typebox\/compile$/ }, () => ({ path: "typebox/compile", namespace: "tau-lazy-compile" }));
		build.onLoad({ filter: /.*/, namespace: "tau-lazy-compile" }, () => ({ contents: lazyCompile, loader: "js" }));
	},
};

const { build } = await import("esbuild");
await build({
	entryPoints: [join(themeDir, "theme.js")],
	bundle: true,
	format: "esm",
	platform: "node",
	outfile: out,
	allowOverwrite: true,
	// One copy for the whole process: the host's bundled TypeBox.
	external: ["typebox", "typebox/*"],
	plugins: [lean],
	banner: { js: stamp.trimEnd() },
	// Less source for V8 to parse on the first access, which is what this file is for.
	minifyWhitespace: true,
	minifySyntax: true,
	logLevel: "warning",
});
