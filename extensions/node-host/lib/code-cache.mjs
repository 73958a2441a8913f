// Owns loading the big CommonJS bundles the host runs on every start or first load (jiti, and
// the babel transform jiti uses on a transpile-cache miss) with V8's code cache, which Node 20
// has no switch for (`module.enableCompileCache` came in Node 22.1). Compiling jiti is ~9 ms of
// each start; babel is ~185 ms of CPU to require and ~85 ms more for its first transform, paid
// by every extension the first time it is loaded or after it changes. scripts/cache-code.mjs
// writes the caches at install, after running both once, so the functions a load runs are in
// them too, not only the files' top levels.

import { readFileSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { Script } from "node:vm";

// Node's own CommonJS wrapper, so the code runs as if required.
const WRAPPER = ["(function (exports, require, module, __filename, __dirname) { ", "\n})"];
const loaded = new Map();

/** Where the cache of `file` is kept: beside it, written at install like the file itself. */
export function codeCachePath(file) {
	return `${file}.tau-code-cache`;
}

// V8 checks only the source's length; the size and modification time in the cache's first line
// keep a cache from being used for another file of the same length.
function stampOf(file) {
	const { size, mtimeMs } = statSync(file);
	return `${size} ${mtimeMs}`;
}

/**
 * `require(file)` for a self-contained CommonJS file, compiled with its code cache when one
 * was written for exactly this file. A missing or rejected cache (another Node version) only
 * means the code is compiled, as a require would.
 */
export function requireWithCodeCache(file) {
	const source = readFileSync(file, "utf8");
	let cachedData;
	try {
		const cache = readFileSync(codeCachePath(file));
		const header = cache.indexOf(10);
		if (header > 0 && cache.toString("latin1", 0, header) === stampOf(file)) cachedData = cache.subarray(header + 1);
	} catch {
		// No cache: compiled as usual.
	}
	const script = new Script(WRAPPER[0] + source + WRAPPER[1], { filename: file, cachedData });
	loaded.set(file, { script, cache: cachedData === undefined ? "none" : script.cachedDataRejected ? "rejected" : "used" });
	const module = { exports: {}, id: file, filename: file, loaded: false };
	script.runInThisContext().call(module.exports, module.exports, createRequire(file), module, file, dirname(file));
	module.loaded = true;
	return module.exports;
}

/** For each file loaded so far, whether its cache was `used`, `rejected` by V8, or `none`. */
export function codeCacheUse() {
	return Object.fromEntries([...loaded].map(([file, { cache }]) => [file, cache]));
}

/** Writes the code cache of every file loaded so far, with the functions that ran compiled in
 * (for scripts/cache-code.mjs). */
export function writeCodeCaches() {
	for (const [file, { script }] of loaded) {
		writeFileSync(codeCachePath(file), Buffer.concat([Buffer.from(`${stampOf(file)}\n`, "latin1"), script.createCachedData()]));
	}
	return [...loaded.keys()];
}
