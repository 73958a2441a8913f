// tau's Node extension host, as tau starts it: `node extensions/node-host/host.cjs`, or with
// `--snapshot-blob lib/host.snapshot.blob` before the path when that start-up snapshot was made
// by this very Node binary (tau checks lib/host.snapshot.json first). The host is lib/main.mjs
// and the modules it imports; this entry picks which copy of them runs main(), the fastest one
// still current:
// - the snapshot (scripts/build-snapshot.mjs), whose heap already holds the host's modules, jiti
//   and TypeBox, evaluated at install; used only while every file it was made from is as it was
//   then and the host's folder is the one it was made in;
// - the bundle (scripts/bundle-host.mjs), the same modules as one CommonJS file, used only while
//   every file it was made from, and the bundle itself, is as it was then (sizes and times in
//   lib/host.bundle.json), so an edited source is never shadowed by an old bundle. This entry is
//   CommonJS too, so a start from the bundle never loads Node's ES module loader (~10 ms of each
//   start), nor does it resolve, realpath and read thirteen modules one by one. The bundle runs
//   with V8's code cache (lib/code-cache.cjs), which scripts/cache-code.mjs writes at install by
//   running the host once with TAU_NODE_HOST_WRITE_CODE_CACHES=1: the caches of every file it
//   loaded that way are written as it exits;
// - else the sources.
// Which one ran is left on a global symbol for tests and benchmarks (no extension reads it).

const { readFileSync, statSync } = require("node:fs");
const { join } = require("node:path");

/** Whether every `[size, mtimeMs]` in `files` (paths under `base`) still holds. */
function unchanged(base, files) {
	try {
		return Object.entries(files).every(([file, [size, mtimeMs]]) => {
			const now = statSync(join(base, file));
			// Within a millisecond: a copy that keeps file times may round them below that.
			return now.size === size && Math.abs(now.mtimeMs - mtimeMs) < 1;
		});
	} catch {
		return false;
	}
}

function bundleIsCurrent() {
	try {
		return unchanged(join(__dirname, "lib"), JSON.parse(readFileSync(join(__dirname, "lib", "host.bundle.json"), "utf8")).files);
	} catch {
		return false;
	}
}

const SNAPSHOT = Symbol.for("tau.node-host.snapshot");
const CODE_CACHE = Symbol.for("tau.node-host.code-cache");
const snapshot = globalThis[SNAPSHOT];
delete globalThis[SNAPSHOT];
// Node 20 cannot run `import()` in code from a code cache or a snapshot; theirs calls this one.
globalThis[Symbol.for("tau.node-host.import")] = (specifier) => import(specifier);
const STARTED = Symbol.for("tau.node-host.started");
snapshot?.repair();
if (snapshot && snapshot.dir === __dirname && snapshot.node === process.version && unchanged(__dirname, snapshot.files)) {
	globalThis[STARTED] = "snapshot";
	snapshot.main();
} else {
	// A stale snapshot's modules are left unused: the code-cache loader it holds would hand out
	// its copies of jiti and TypeBox.
	if (snapshot) delete globalThis[CODE_CACHE];
	const codeCache = require("./lib/code-cache.cjs");
	if (process.env.TAU_NODE_HOST_WRITE_CODE_CACHES === "1") process.on("exit", () => codeCache.writeCodeCaches());
	if (bundleIsCurrent()) {
		globalThis[STARTED] = "bundle";
		codeCache.requireWithCodeCache(join(__dirname, "lib", "host.bundle.cjs")).main();
	} else {
		globalThis[STARTED] = "sources";
		import("./lib/main.mjs").then((host) => host.main());
	}
}
