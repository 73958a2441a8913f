// tau's Node extension host, as tau starts it: `node extensions/node-host/host.cjs`. The host
// is lib/main.mjs and the modules it imports. The install (scripts/bundle-host.mjs) also writes
// them as one CommonJS file, lib/host.bundle.cjs. This entry is CommonJS too, so a start from
// the bundle never loads Node's ES module loader (~10 ms of each start), nor does it resolve,
// realpath and read thirteen modules one by one.
// The bundle is used only while every file it was made from, and the bundle itself, is as it
// was then (sizes and times in lib/host.bundle.json), so an edited source is never shadowed by
// an old bundle; anything else runs the sources.

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

if (bundleIsCurrent()) require("./lib/host.bundle.cjs");
else import("./lib/main.mjs");
