// Owns loading the big CommonJS files the host runs on every start or first load (the host's
// own bundle, jiti, the babel transform jiti uses on a transpile-cache miss, and TypeBox as
// scripts/bundle-typebox.mjs writes it) with V8's code cache, which Node 20 has no switch for
// (`module.enableCompileCache` came in Node 22.1). Compiling the host's bundle and the functions
// a start runs is ~7 ms of every start, jiti ~9 ms, and TypeBox ~15 ms of each load of an
// extension that uses it; babel is ~185 ms of CPU to require and ~85 ms more for its first
// transform, paid by every extension the first time it is loaded or after it changes.
// scripts/cache-code.mjs writes the caches at install, at the end of a host run that loads an
// extension, so the functions a start runs are in them too, not only the files' top levels. A
// cache is used only for the very file it was written from (its size and time), and V8 rejects
// one that another Node or other flags wrote, or that is damaged: either way the file is
// compiled as usual.
// CommonJS, so that host.cjs loads the bundle through it before any ES module; lib/code-cache.mjs
// hands the same instance to the ES modules (and so to TypeBox's loader, build/tau-typebox.mjs):
// a file runs once, and TypeBox stays one instance whichever way it is reached. This file's code
// also runs inside the bundle and the start-up snapshot, each a copy of its own, so the first
// copy to run leaves its exports on a global symbol and every later copy hands out those.

"use strict";

const { readFileSync, renameSync, statSync, writeFileSync } = require("node:fs");
const { createRequire } = require("node:module");
const { dirname } = require("node:path");
const { Script, runInThisContext } = require("node:vm");
const zlib = require("node:zlib");

// Node's own CommonJS wrapper, so the code runs as if required.
const WRAPPER = ["(function (exports, require, module, __filename, __dirname) { ", "\n})"];
const loaded = new Map();
// The module object of each file run, so that it runs once.
const required = new Map();

/** Where the cache of `file` is kept: beside it, written at install like the file itself. */
function codeCachePath(file) {
	return `${file}.tau-code-cache`;
}

// V8 checks only the source's length; the size and modification time in the cache's first line
// keep a cache from being used for another file of the same length. V8 also trusts the cache's
// contents (a damaged one crashes the process), so the line ends with their checksum: CRC-32
// from zlib (Node >= 20.15), which loads in ~2 ms where node:crypto takes ~10 ms of each start;
// on an older Node, SHA-1. A cache written under the other kind does not match and is unused.
function stampOf(file) {
	const { size, mtimeMs } = statSync(file);
	return `${size} ${mtimeMs}`;
}

function hashOf(data) {
	if (typeof zlib.crc32 === "function") return `crc32:${zlib.crc32(data).toString(16)}`;
	return require("node:crypto").createHash("sha1").update(data).digest("hex");
}

/**
 * `require(file)` for a self-contained CommonJS file, compiled with its code cache when one
 * was written for exactly this file. A missing or rejected cache (another Node version) only
 * means the code is compiled, as a require would. `standIns` answer the file's own `require` of
 * the specifiers they name instead of Node. Like require, a file runs once; later calls get
 * what it exported.
 */
function requireWithCodeCache(file, standIns) {
	return runOnce(file, standIns, (code) => {
		let cachedData;
		try {
			const cache = readFileSync(codeCachePath(file));
			const header = cache.indexOf(10);
			const data = cache.subarray(header + 1);
			if (header > 0 && cache.toString("latin1", 0, header) === `${stampOf(file)} ${hashOf(data)}`) cachedData = data;
		} catch {
			// No cache: compiled as usual.
		}
		// No `import()` in such a file: Node 20 cannot run one in code from a code cache.
		const script = new Script(code, { filename: file, cachedData });
		loaded.set(file, { script, cache: cachedData === undefined ? "none" : script.cachedDataRejected ? "rejected" : "used" });
		return script.runInThisContext();
	});
}

/**
 * Runs `file` as requireWithCodeCache would, without a code cache and keeping no compiled
 * script: for the start-up snapshot (scripts/build-snapshot.mjs), which cannot hold one of
 * Node's compiled scripts. Later requireWithCodeCache calls for the file get what it exported.
 */
function requireForSnapshot(file, standIns) {
	return runOnce(file, standIns, (code) => runInThisContext(code, { filename: file }));
}

/** `file` wrapped as Node wraps a CommonJS module, compiled by `compile`, run once. */
function runOnce(file, standIns, compile) {
	const known = required.get(file);
	if (known) return known.exports;
	const wrapped = compile(WRAPPER[0] + readFileSync(file, "utf8") + WRAPPER[1]);
	const module = { exports: {}, id: file, filename: file, loaded: false };
	required.set(file, module);
	const nodeRequire = createRequire(file);
	const require = standIns ? Object.assign((id) => (Object.hasOwn(standIns, id) ? standIns[id] : nodeRequire(id)), nodeRequire) : nodeRequire;
	wrapped.call(module.exports, module.exports, require, module, file, dirname(file));
	module.loaded = true;
	return module.exports;
}

/** For each file loaded so far, whether its cache was `used`, `rejected` by V8, or `none`. */
function codeCacheUse() {
	return Object.fromEntries([...loaded].map(([file, { cache }]) => [file, cache]));
}

/** Writes the code cache of every file loaded so far, with the functions that ran compiled in
 * (for scripts/cache-code.mjs). */
function writeCodeCaches() {
	for (const [file, { script }] of loaded) {
		const data = script.createCachedData();
		// Whole or not at all, should the install be cut short.
		const partial = `${codeCachePath(file)}.${process.pid}`;
		writeFileSync(partial, Buffer.concat([Buffer.from(`${stampOf(file)} ${hashOf(data)}\n`, "latin1"), data]));
		renameSync(partial, codeCachePath(file));
	}
	return [...loaded.keys()];
}

/** The files run so far (the snapshot records their sizes and times). */
function requiredFiles() {
	return [...required.keys()];
}

const INSTANCE = Symbol.for("tau.node-host.code-cache");
module.exports = globalThis[INSTANCE] ??= { codeCachePath, requireWithCodeCache, requireForSnapshot, requiredFiles, codeCacheUse, writeCodeCaches };
