// tau's Node extension host, as tau starts it: `node extensions/node-host/host.cjs`. The host
// is lib/main.mjs and the modules it imports. The install (scripts/bundle-host.mjs) also writes
// them as one CommonJS file, lib/host.bundle.cjs. This entry is CommonJS too, so a start from
// the bundle never loads Node's ES module loader (~10 ms of each start), nor does it resolve,
// realpath and read thirteen modules one by one.
// The bundle is used only while every file it was made from, and the bundle itself, is as it
// was then (sizes and times in lib/host.bundle.json), so an edited source is never shadowed by
// an old bundle; anything else runs the sources. The bundle runs with V8's code cache
// (lib/code-cache.cjs), which scripts/cache-code.mjs writes at install by running the host once
// with TAU_NODE_HOST_WRITE_CODE_CACHES=1: the caches of every file it loaded that way are
// written as it exits.

const { readFileSync, statSync } = require("node:fs");
const { join } = require("node:path");

function bundleIsCurrent() {
	try {
		const made = JSON.parse(readFileSync(join(__dirname, "lib", "host.bundle.json"), "utf8"));
		return Object.entries(made.files).every(([file, [size, mtimeMs]]) => {
			const now = statSync(join(__dirname, "lib", file));
			// Within a millisecond: a copy that keeps file times may round them below that.
			return now.size === size && Math.abs(now.mtimeMs - mtimeMs) < 1;
		});
	} catch {
		return false;
	}
}

const codeCache = require("./lib/code-cache.cjs");
if (process.env.TAU_NODE_HOST_WRITE_CODE_CACHES === "1") process.on("exit", () => codeCache.writeCodeCaches());
if (bundleIsCurrent()) {
	// Node 20 cannot run `import()` in code from a code cache; the bundle uses this one instead.
	globalThis[Symbol.for("tau.node-host.import")] = (specifier) => import(specifier);
	codeCache.requireWithCodeCache(join(__dirname, "lib", "host.bundle.cjs"));
} else import("./lib/main.mjs");
