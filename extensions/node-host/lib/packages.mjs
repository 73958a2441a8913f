// Owns access to the real pi packages installed beside the host: the jiti alias map that makes
// extensions' `@earendil-works/*`, `@mariozechner/*`, `typebox` and `@sinclair/typebox` imports
// land on them, and lazy handles to the few pi internals the host itself uses (theme, exec, event
// bus). Nothing heavy is imported until something needs it; Node's module cache then keeps one copy.

import { existsSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import zlib from "node:zlib";
import { privateCacheDir, restrictFiles } from "./cache.mjs";
import { requireForSnapshot, requireWithCodeCache } from "./code-cache.mjs";

const require = createRequire(import.meta.url);
const modules = fileURLToPath(new URL("../node_modules/", import.meta.url));

const CONDITIONS = new Set(["types", "import", "require", "node", "default"]);
const packageJsons = new Map();

/**
 * The file `specifier` names for an importer in lib/, with the conditions Node uses for
 * `import` (or for `require`). Node's resolvers cost ~1 ms per package on every start, most of
 * it finding and checking the package's folder, so the common case is answered from the
 * package.json in node_modules/ beside lib/: an `exports` entry that is a file or conditions
 * among CONDITIONS, or a `main` that names a file. Anything else (a package hoisted elsewhere,
 * other conditions, patterns) is left to Node. Node would give a symlinked file's real path;
 * both paths load the one module, as Node's loaders key modules by real path.
 */
export function resolvePackage(specifier, kind = "import") {
	const parts = specifier.split("/");
	const nameLength = specifier.startsWith("@") ? 2 : 1;
	const dir = join(modules, ...parts.slice(0, nameLength));
	const subpath = parts.length > nameLength ? `./${parts.slice(nameLength).join("/")}` : ".";
	try {
		let pkg = packageJsons.get(dir);
		if (!pkg) packageJsons.set(dir, (pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"))));
		// A `main` is a path relative to the package (a file, here); an `exports` target starts "./".
		const main = pkg.exports === undefined && subpath === "." && typeof pkg.main === "string" && !pkg.main.startsWith("/") ? `./${pkg.main.replace(/^\.\//, "")}` : undefined;
		let target = main ?? (typeof pkg.exports === "string" ? (subpath === "." ? pkg.exports : undefined) : pkg.exports?.[subpath]);
		while (target && typeof target === "object" && !Array.isArray(target)) {
			// The first condition Node would take, in the object's order.
			const key = Object.keys(target).find((condition) => condition === kind || condition === "node" || condition === "default" || !CONDITIONS.has(condition));
			target = CONDITIONS.has(key) ? target[key] : undefined;
		}
		const file = typeof target === "string" && target.startsWith("./") ? join(dir, target) : undefined;
		if (file && statSync(file, { throwIfNoEntry: false })?.isFile()) return file;
	} catch {
		// Left to Node.
	}
	return kind === "require" ? require.resolve(specifier) : fileURLToPath(import.meta.resolve(specifier));
}

let codingAgentDist;

function codingAgentDir() {
	return (codingAgentDist ??= dirname(resolvePackage("@earendil-works/pi-coding-agent")));
}

let aliases;

/** The 16 specifiers pi 0.79.10 aliases, resolved to this host's installed copies. */
export function getAliases() {
	if (aliases) return aliases;
	const piPackages = {
		"pi-coding-agent": resolvePackage("@earendil-works/pi-coding-agent"),
		"pi-agent-core": resolvePackage("@earendil-works/pi-agent-core"),
		"pi-tui": resolvePackage("@earendil-works/pi-tui"),
		"pi-ai": resolvePackage("@earendil-works/pi-ai"),
		"pi-ai/oauth": resolvePackage("@earendil-works/pi-ai/oauth"),
	};
	// pi resolves TypeBox with require.resolve, so it gets whatever the package's require
	// condition names; doing the same keeps extensions on the instance pi's own code uses.
	const typebox = {
		"": resolvePackage("typebox", "require"),
		"/compile": resolvePackage("typebox/compile", "require"),
		"/value": resolvePackage("typebox/value", "require"),
	};
	aliases = {};
	for (const scope of ["@earendil-works", "@mariozechner"]) {
		for (const [name, target] of Object.entries(piPackages)) aliases[`${scope}/${name}`] = target;
	}
	for (const prefix of ["typebox", "@sinclair/typebox"]) {
		for (const [suffix, target] of Object.entries(typebox)) aliases[`${prefix}${suffix}`] = target;
	}
	return aliases;
}

/** The aliased pi packages an extension gets through a lazy facade when Node has require(esm). */
export const LAZY_PACKAGES = ["pi-coding-agent", "pi-agent-core", "pi-tui", "pi-ai", "pi-ai/oauth"];

let facades;

/**
 * jiti `virtualModules` standing in for the aliased pi packages (both scopes). jiti compiles an
 * extension's `import { X } from "pkg"` to `const _pkg = await jitiImport("pkg")` and reads
 * `_pkg.X` only where X is used, so each facade is an object with one getter per export name
 * that loads the code behind it with require(esm) on first use. Importing pi-coding-agent costs
 * ~500 ms, and many extensions use its exports (or pi-tui's) only later, or only in
 * terminal-only code. Where the package's entry module only re-exports, a getter loads just the
 * module that declares the export (`defineTool` costs ~5 ms, not the whole package); otherwise
 * it loads the package. lib/export-names.json (scripts/gen-export-names.mjs) says which is which.
 * Every value handed out is the package's own (require(esm) and import() share Node's module
 * map, and the entry re-exports the same bindings), so identity, classes and `instanceof` are
 * unchanged. Without require(esm) (Node < 20.19) there are no facades and the aliases load the
 * packages eagerly.
 */
/** An export loaded from where lib/export-names.json places it: `[file, name]` relative to the
 * package's entry, or `["npm:<package>", name]` for one the package re-exports from another. */
export function declaredValue(entry, [file, name]) {
	return (file.startsWith("npm:") ? require(file.slice(4)) : require(join(dirname(entry), file)))[name];
}

let exportTable;

function facadeOf(name) {
	const entry = getAliases()[`@earendil-works/${name}`];
	exportTable ??= JSON.parse(readFileSync(new URL("./export-names.json", import.meta.url), "utf8"));
	const { names = [], modules = {} } = exportTable[name] ?? {};
	let whole;
	const facade = Object.create(null);
	for (const exportName of names) {
		const declared = modules[exportName];
		const get = declared ? () => declaredValue(entry, declared) : () => (whole ??= require(entry))[exportName];
		Object.defineProperty(facade, exportName, { enumerable: true, get });
	}
	Object.defineProperty(facade, Symbol.toStringTag, { value: "Module" });
	return facade;
}

/** The facades as jiti's `virtualModules`, each made when an extension first imports its
 * package (jiti asks `name in virtualModules`, then reads the one it needs), and TypeBox's
 * aliased entry points (see typeboxModules). */
export function getFacades() {
	if (facades) return facades;
	facades = {};
	if (canRequireEsm) {
		for (const name of LAZY_PACKAGES) {
			let facade;
			const get = () => (facade ??= facadeOf(name));
			for (const scope of ["@earendil-works", "@mariozechner"]) Object.defineProperty(facades, `${scope}/${name}`, { enumerable: true, get });
		}
	}
	addTypeboxModules(facades);
	return facades;
}

/**
 * TypeBox's entry points as pi aliases them (`typebox`, `/compile`, `/value`, also under
 * `@sinclair/typebox`), straight from the one CommonJS file scripts/bundle-typebox.mjs wrote.
 * Through the alias, jiti imports the entry's ES module, which loads Node's ES module loader and
 * resolves the entry, ~10 ms of the load of every extension that builds a schema; the entry only
 * re-exports its part of that same file, and requireWithCodeCache runs the file once, so either
 * way it is the one TypeBox pi's packages import. Left to the aliases when the file is missing.
 */
function addTypeboxModules(target) {
	const build = typeboxBuild();
	if (!existsSync(build)) return;
	for (const prefix of ["typebox", "@sinclair/typebox"]) {
		for (const [suffix, part] of [["", "index"], ["/compile", "compile"], ["/value", "value"]]) {
			Object.defineProperty(target, `${prefix}${suffix}`, { enumerable: true, get: () => requireWithCodeCache(build)[part] });
		}
	}
}

function typeboxBuild() {
	return join(modules, "typebox", "build", "tau-typebox.cjs");
}

let createJiti;

/**
 * Builtins jiti's bundle requires as it loads but uses only on paths a load with a warm cache
 * does not take, or for its debug output: loading them is ~6 ms of each start. These stand-ins
 * load the real module on first use (assert's `ok` only when the assertion fails), except that
 * `tty` only tells jiti's debug log it has no colours.
 */
const JITI_BUILTINS = Object.fromEntries(Object.entries({
	"node:assert": {
		ok(value, message) {
			if (!value) require("node:assert").ok(value, message);
		},
	},
	// Only its debug log's timings; Node's global `performance` would load perf_hooks anyway.
	"node:perf_hooks": { performance: { now: () => Number(process.hrtime.bigint()) / 1e6 } },
	"node:fs/promises": new Proxy({}, { get: (_, key) => Reflect.get(require("node:fs/promises"), key) }),
	"node:tty": {},
	// jiti hashes each module's source (md5) to key and check its transpile cache, and would load
	// node:crypto for it (~10 ms of each start). The cache is the host's own (a private folder),
	// so the key needs only to change when the source does: its CRC-32 and length.
	"node:crypto": zlib.crc32 && {
		getFips: () => 0,
		createHash: () => {
			const parts = [];
			const hash = {
				update(data) {
					parts.push(typeof data === "string" ? Buffer.from(data) : data);
					return hash;
				},
				digest() {
					const data = Buffer.concat(parts);
					return `${zlib.crc32(data).toString(16).padStart(8, "0")}${data.length.toString(16).padStart(8, "0")}`;
				},
			};
			return hash;
		},
	},
}).filter(([, standIn]) => standIn));

/**
 * jiti's `createJiti` as its CommonJS entry (`jiti/lib/jiti.cjs`) builds it from the bundle in
 * `dist`, with the bundle and the babel transform loaded with their code caches
 * (lib/code-cache.mjs). Not through jiti's ES entry either way: importing that makes Node scan
 * the 190 KB bundle for export names before running it, a third of the host's start.
 */
function loadCreateJiti(load = requireWithCodeCache) {
	// The copy installed beside the host, found without Node's resolver (~4 ms of each start).
	const installed = join(modules, "jiti", "dist");
	const dist = existsSync(join(installed, "jiti.cjs")) ? installed : join(dirname(require.resolve("jiti")), "..", "dist");
	const createJitiFromBundle = load(join(dist, "jiti.cjs"), JITI_BUILTINS);
	let babel;
	// Loaded on a transpile-cache miss only, as jiti's own entry does.
	const transform = (...args) => (babel ??= requireWithCodeCache(join(dist, "babel.cjs")))(...args);
	return (id, options) =>
		createJitiFromBundle(id, { transform, ...options }, {
			onError(err) {
				throw err;
			},
			nativeImport: (specifier) => import(specifier),
			createRequire,
		});
}

/**
 * What the start-up snapshot (scripts/build-snapshot.mjs) runs at install, so that a start from
 * it finds them evaluated: jiti's bundle (every extension's load needs it, ~4 ms) and TypeBox's
 * main part (~5 ms for the extensions that build a schema, most of those that register a tool).
 * The babel transform stays out: it is 1.5 MB that only a transpile-cache miss needs. pi's
 * packages are ES modules, which a Node 20 snapshot cannot hold.
 */
export function preloadForSnapshot() {
	createJiti ??= loadCreateJiti(requireForSnapshot);
	if (existsSync(typeboxBuild())) void requireForSnapshot(typeboxBuild()).index;
}

/**
 * A fresh jiti per load, as pi does, so a reload re-evaluates the extension's own modules.
 * pi imports `jiti/static`, which differs from the main entry only in loading babel eagerly (so
 * Bun can bundle it); the main entry loads the same babel transform on a transpile-cache miss,
 * which saves ~150 ms of startup whenever the cache is warm. The transpile cache is `fsCache`
 * (jiti's default is the shared `$TMPDIR/jiti`), or off when there is no private folder for it.
 */
export async function newJiti(fsCache = false) {
	createJiti ??= loadCreateJiti();
	return createJiti(import.meta.url, { moduleCache: false, tryNative: false, fsCache, alias: getAliases(), virtualModules: getFacades() });
}

/** Imports an extension module with a fresh jiti and returns its default export. */
export async function importExtension(path) {
	// Checked on every load: the folder may have changed since the last one.
	const cacheDir = privateCacheDir(process.env.PI_CODING_AGENT_DIR, "jiti");
	const jiti = await newJiti(cacheDir ?? false);
	try {
		return await jiti.import(path, { default: true });
	} finally {
		restrictFiles(cacheDir);
	}
}

function distUrl(relative) {
	return pathToFileURL(join(codingAgentDir(), relative)).href;
}

function distPath(relative) {
	return join(codingAgentDir(), relative);
}

let execCommand;

/** pi's own `exec` implementation (no shell, SIGTERM then SIGKILL, never rejects). */
export async function getExecCommand() {
	if (!execCommand) ({ execCommand } = await import(distUrl("core/exec.js")));
	return execCommand;
}

/**
 * pi's event bus factory. With require(esm) it is loaded when an extension first reads
 * `pi.events` (most never do, and an `import()` here would load Node's ES module loader for every
 * start); without, it is imported when the first extension is.
 */
export async function loadEventBusFactory() {
	if (canRequireEsm) return () => require(distPath("core/event-bus.js")).createEventBus();
	const { createEventBus } = await import(distUrl("core/event-bus.js"));
	return createEventBus;
}

const THEME_KEY = Symbol.for("@earendil-works/pi-coding-agent:theme");
let themeSettingName;

export function setThemeSetting(name) {
	themeSettingName = name;
}

/** pi's theme module: the lean CommonJS file scripts/bundle-theme.mjs writes beside it at
 * install (same code, only the part the host uses, with chalk, TypeBox's schema and pi-tui's
 * terminal probing set up on first use), or pi's own when that file is missing. */
function themeModulePath() {
	const lite = distPath("modes/interactive/theme/theme.tau-lite.cjs");
	return existsSync(lite) ? lite : distPath("modes/interactive/theme/theme.js");
}

/**
 * pi's global theme, initialised on first use. `ctx.ui.theme` is a synchronous getter, so the
 * theme module is loaded with require (pi's own, an ES module, needs require(esm): Node >=
 * 20.19) exactly when an extension first touches it. pi's own module costs a few hundred
 * milliseconds to import; the lean one a few (scripts/measure-theme.mjs).
 * The theme lives on a global symbol, so an extension that imports pi's module sees this one.
 */
export function getTheme() {
	if (!globalThis[THEME_KEY]) {
		const themeModule = require(themeModulePath());
		if (!globalThis[THEME_KEY]) themeModule.initTheme(themeSettingName, false);
	}
	return globalThis[THEME_KEY];
}

/** For Node versions without require(esm): load the theme ahead of the first dispatch (pi's
 * own module is an ES module; the lean one is CommonJS, whose exports an import could not see). */
export async function preloadTheme() {
	if (globalThis[THEME_KEY]) return;
	const path = themeModulePath();
	const themeModule = path.endsWith(".cjs") ? require(path) : await import(pathToFileURL(path).href);
	if (!globalThis[THEME_KEY]) themeModule.initTheme(themeSettingName, false);
}

export const canRequireEsm = Boolean(process.features?.require_module);
