// Runs after `npm ci` (postinstall), after bundle-typebox.mjs. `ctx.ui.theme` is a synchronous
// getter, and pi's theme module pulled in every syntax highlighter of highlight.js (~240 ms) and
// the whole of pi-tui (~170 ms) to answer it, stalling every extension in the process behind the
// first access (issue 22). This writes, beside pi's theme module, a CommonJS file of the same
// code holding only what the host uses (the Theme class and loading/initialising a theme; the
// host hands the Theme instance out, never this module, so the highlighting and export helpers
// are left out), in which everything the built-in themes do not need is set up on first use
// instead of as the module loads:
//  - pi-tui is only the module that detects the terminal's colours (the one function the theme
//    uses), and its `child_process` is loaded only if it has to ask tmux;
//  - chalk (and with it Node's `tty`, ~4 ms) is loaded, from a file of its own, by the first
//    bold/italic/... call;
//  - the theme-file schema is recorded, not built: TypeBox builds and compiles it the first
//    time a theme file of the user's is checked (the built-in themes never are).
// It also writes V8's code cache of that file, taken after a built-in theme was initialised, so
// that the first access compiles neither the file nor the functions it runs (a few ms of ~10).
// The code stays pi's, at the version package-lock.json pins; lib/packages.mjs requires
// theme.tau-lite.cjs when it exists (plain CommonJS: no ES module loader, any Node version).
//
//   theme.tau-lite.cjs        loads the code below with its code cache, as Node would load it
//   theme.tau-lite.code.cjs   the code (loadable on its own too)
//   theme.tau-lite.code.v8    V8's code cache of it, for the Node that ran this script
//   theme.tau-lite-chalk.cjs  chalk

import { createHash } from "node:crypto";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const modules = join(import.meta.dirname, "..", "node_modules");
const codingAgent = join(modules, "@earendil-works", "pi-coding-agent");
const themeDir = join(codingAgent, "dist", "modes", "interactive", "theme");
const themeJs = join(themeDir, "theme.js");
const out = join(themeDir, "theme.tau-lite.cjs");
const codeOut = join(themeDir, "theme.tau-lite.code.cjs");
const cacheOut = join(themeDir, "theme.tau-lite.code.v8");
const version = JSON.parse(readFileSync(join(codingAgent, "package.json"), "utf8")).version;
// The script's own hash too, so that a changed recipe rewrites the file.
const recipe = createHash("sha256").update(readFileSync(import.meta.filename)).digest("hex").slice(0, 12);
const stamp = `// tau-lite of pi-coding-agent ${version} (${recipe})\n`;
// The ES module an earlier version of this script wrote; nothing loads it any more.
rmSync(join(themeDir, "theme.tau-lite.mjs"), { force: true });
const written = (file) => existsSync(file) && readFileSync(file, "utf8").startsWith(stamp);
if ([out, codeOut, join(themeDir, "theme.tau-lite-chalk.cjs")].every(written) && existsSync(cacheOut)) process.exit(0);

// What lib/packages.mjs and test/theme.test.mjs use, and what a theme instance needs.
const EXPORTS = ["Theme", "theme", "initTheme", "loadThemeFromPath"];

const terminalImage = join(modules, "@earendil-works", "pi-tui", "dist", "terminal-image.js");
const chalkOut = "theme.tau-lite-chalk.cjs";

// chalk, from a file of its own, loaded (its styles assembled, the terminal's colour support
// detected, `tty` loaded) on the first property read. The read is made on chalk's own object,
// so its getters see chalk as they would have.
const lazyChalk = [
	"let chalk;",
	`const real = () => (chalk ??= require("./${chalkOut}").default);`,
	"export default new Proxy({}, { get: (_, key) => Reflect.get(real(), key), has: (_, key) => Reflect.has(real(), key) });",
].join("\n");

// Node built-ins the kept code calls only off the built-in themes' path: `execSync` (pi-tui
// asks tmux with it, only inside tmux) and `homedir` (to find the user's themes folder);
// `spawn` and `spawnSync` are imported by pi's process helper, whose callers are left out.
const lazyBuiltin = (name, functions) => functions.map((f) => `export function ${f}(...args) { return require("node:${name}").${f}(...args); }`).join("\n");
const lazyBuiltins = { child_process: ["execSync", "spawn", "spawnSync"], os: ["homedir"] };

// TypeBox's `Type` as a recorder: each builder call is kept as its name and arguments, and
// built with the real TypeBox (this file's own require, so the one copy npm installed) when the
// schema is compiled. Arguments keep their identity (a schema used in many places is built once).
const recordedType = [
	'const RECORD = Symbol("tau recorded TypeBox call");',
	"export const Type = new Proxy({}, { get: (_, name) => (...args) => ({ [RECORD]: { name, args } }) });",
	"export function build(schema) {",
	'\tconst { Type: real } = require("typebox");',
	"\tconst built = new Map();",
	"\tconst visit = (value) => {",
	'\t\tif (value === null || typeof value !== "object") return value;',
	"\t\tif (built.has(value)) return built.get(value);",
	"\t\tconst call = value[RECORD];",
	"\t\tlet result = value;",
	"\t\tif (call) result = real[call.name](...call.args.map(visit));",
	"\t\telse if (Array.isArray(value)) result = value.map(visit);",
	"\t\telse if (Object.getPrototypeOf(value) === Object.prototype) result = Object.fromEntries(Object.entries(value).map(([key, item]) => [key, visit(item)]));",
	"\t\tbuilt.set(value, result);",
	"\t\treturn result;",
	"\t};",
	"\treturn visit(schema);",
	"}",
].join("\n");

// TypeBox's compiler: the schema is built and compiled on the first check.
const lazyCompile = [
	'import { build } from "tau-recorded-typebox";',
	"export function Compile(schema) {",
	"\tlet compiled;",
	'\tconst real = () => (compiled ??= require("typebox/compile").Compile(build(schema)));',
	'\treturn new Proxy({}, { get: (_, key) => { const value = Reflect.get(real(), key); return typeof value === "function" ? value.bind(real()) : value; } });',
	"}",
].join("\n");

// CommonJS packages only left-out code reaches (highlighting, spawning a process): dropped with
// it, or loaded on first use should anything kept reach them.
const lazyPackage = (path) =>
	[
		"let loaded;",
		`const real = () => (loaded ??= require(${JSON.stringify(path)}));`,
		"export default new Proxy(function () {}, { get: (_, key) => Reflect.get(real(), key), has: (_, key) => Reflect.has(real(), key), apply: (_, self, args) => Reflect.apply(real(), self, args) });",
	].join("\n");
const lazyPackages = {
	"highlight.js/lib/index.js": createRequire(themeJs).resolve("highlight.js/lib/index.js"),
	"cross-spawn": createRequire(join(codingAgent, "dist", "utils", "child-process.js")).resolve("cross-spawn"),
};

const standIns = {
	"tau-lazy-chalk": lazyChalk,
	"tau-recorded-typebox": recordedType,
	"tau-lazy-compile": lazyCompile,
	...Object.fromEntries(Object.entries(lazyBuiltins).map(([name, functions]) => [`tau-lazy-${name}`, lazyBuiltin(name, functions)])),
	...Object.fromEntries(Object.entries(lazyPackages).map(([name, path]) => [`tau-lazy-package:${name}`, lazyPackage(path)])),
};

// The theme module reads `fs` and `path` through namespace imports, which esbuild's CommonJS
// output copies property by property into a new object as the file loads; a plain require
// hands out Node's own module object, with the same functions.
const namespaceImports = [
	['import * as fs from "node:fs";', 'const fs = require("node:fs");'],
	['import * as path from "node:path";', 'const path = require("node:path");'],
];

const lean = {
	name: "tau-lean-theme",
	setup(build) {
		const standIn = (name, sideEffects) => ({ path: name, namespace: "tau-stand-in", sideEffects });
		// What the stand-ins require is loaded at run time, never bundled (checked first).
		build.onResolve({ filter: /.*/, namespace: "tau-stand-in" }, (args) => (args.path === "tau-recorded-typebox" ? undefined : { path: args.path, external: true }));
		build.onResolve({ filter: /^@earendil-works\/pi-tui$/ }, () => ({ path: terminalImage }));
		build.onResolve({ filter: /^(highlight\.js\/lib\/index\.js|cross-spawn)$/ }, (args) => standIn(`tau-lazy-package:${args.path}`, false));
		build.onResolve({ filter: /^chalk$/ }, () => standIn("tau-lazy-chalk"));
		build.onResolve({ filter: /^(node:)?(child_process|os)$/ }, (args) => standIn(`tau-lazy-${args.path.replace(/^node:/, "")}`));
		build.onResolve({ filter: /^typebox$/ }, () => standIn("tau-recorded-typebox"));
		build.onResolve({ filter: /^tau-recorded-typebox$/ }, () => standIn("tau-recorded-typebox"));
		build.onResolve({ filter: /^typebox\/compile$/ }, () => standIn("tau-lazy-compile"));
		build.onLoad({ filter: /.*/, namespace: "tau-stand-in" }, (args) => ({ contents: standIns[args.path], loader: "js" }));
		build.onLoad({ filter: /[\\/]theme\.js$/ }, (args) => {
			if (args.path !== themeJs) return undefined;
			let contents = readFileSync(themeJs, "utf8");
			for (const [from, to] of namespaceImports) {
				if (!contents.includes(from)) throw new Error(`${themeJs} no longer has \`${from}\`: update scripts/bundle-theme.mjs`);
				contents = contents.replace(from, to);
			}
			return { contents, loader: "js" };
		});
	},
};

const { build } = await import("esbuild");
const common = {
	bundle: true,
	format: "cjs",
	platform: "node",
	target: "node20",
	allowOverwrite: true,
	// Less source for V8 to parse on the first access, which is what these files are for.
	minifyWhitespace: true,
	minifySyntax: true,
	logLevel: "warning",
};
await build({
	...common,
	stdin: { contents: 'export { default } from "chalk";', resolveDir: themeDir, sourcefile: "tau-lite-chalk.js", loader: "js" },
	outfile: join(themeDir, chalkOut),
	banner: { js: stamp.trimEnd() },
});
await build({
	...common,
	stdin: { contents: `export { ${EXPORTS.join(", ")} } from ${JSON.stringify(themeJs)};`, resolveDir: themeDir, sourcefile: "tau-lite-entry.js", loader: "js" },
	outfile: codeOut,
	// pi's config module finds its package from its own location; this file sits in the same
	// package, as the ES module it was first written as did.
	define: { "import.meta.url": "__tauImportMetaUrl" },
	banner: { js: `${stamp.trimEnd()}\nvar __tauImportMetaUrl = require("node:url").pathToFileURL(__filename).href;` },
	plugins: [lean],
});

// The loader. Node's own CommonJS wrapper and arguments, so the code runs as if required; the
// code cache is used only while the code file is the one it was taken from (its size and
// modification time are the cache's first line; V8 itself checks only the length). A cache
// V8 rejects (another Node version) just means the code is compiled, as a require would.
const wrapper = ["(function (exports, require, module, __filename, __dirname) { ", "\n})"];
const loader = `${stamp}"use strict";
// Written by scripts/bundle-theme.mjs of tau's node host: see there.
const { readFileSync, statSync } = require("node:fs");
const { join } = require("node:path");
const code = join(__dirname, "theme.tau-lite.code.cjs");
const source = readFileSync(code, "utf8");
let cachedData;
try {
	const { size, mtimeMs } = statSync(code);
	const cache = readFileSync(join(__dirname, "theme.tau-lite.code.v8"));
	const header = cache.indexOf(10);
	if (cache.toString("latin1", 0, header) === \`\${size} \${mtimeMs}\`) cachedData = cache.subarray(header + 1);
} catch {}
const { Script } = require("node:vm");
const script = new Script(${JSON.stringify(wrapper[0])} + source + ${JSON.stringify(wrapper[1])}, { filename: code, cachedData });
script.runInThisContext().call(module.exports, module.exports, require, module, code, __dirname);
`;
writeFileSync(out, loader);

// The cache, taken in a fresh Node after initialising the built-in theme the way the host does
// (in 256-colour mode, which runs every colour function truecolour mode does and more), so that
// it holds the functions the first access runs, not only the file's top level.
const warmUp = `
	const { readFileSync, statSync, writeFileSync } = require("node:fs");
	const { Script } = require("node:vm");
	const code = ${JSON.stringify(codeOut)};
	const script = new Script(${JSON.stringify(wrapper[0])} + readFileSync(code, "utf8") + ${JSON.stringify(wrapper[1])}, { filename: code });
	const module = { exports: {} };
	script.runInThisContext().call(module.exports, module.exports, require, module, code, ${JSON.stringify(themeDir)});
	module.exports.initTheme(undefined, false);
	const theme = globalThis[Symbol.for("@earendil-works/pi-coding-agent:theme")];
	theme.fg("accent", "x"); theme.bg("selectedBg", "x"); theme.getFgAnsi("accent"); theme.getBgAnsi("selectedBg");
	const { size, mtimeMs } = statSync(code);
	writeFileSync(${JSON.stringify(cacheOut)}, Buffer.concat([Buffer.from(\`\${size} \${mtimeMs}\\n\`, "latin1"), script.createCachedData()]));
`;
const env = { ...process.env };
for (const name of ["COLORTERM", "TERM", "TERM_PROGRAM", "TMUX", "COLORFGBG", "PI_CODING_AGENT_DIR", "PI_PACKAGE_DIR"]) delete env[name];
rmSync(cacheOut, { force: true });
const made = spawnSync(process.execPath, ["-e", warmUp], { env, encoding: "utf8" });
// Only slower without it: say so, and go on.
if (made.status !== 0) console.warn(`tau: no code cache for the lean theme module: ${made.stderr}`);
