// tau's Node extension host, as tau starts it: `node extensions/node-host/host.mjs`. The host
// is lib/main.mjs and the modules it imports. The install (scripts/bundle-host.mjs) also writes
// them as one file, lib/host.bundle.mjs, which Node loads in a few milliseconds less than the
// thirteen modules (for each one the ES module loader resolves, realpaths and reads a file).
// The bundle is used only while every file it was made from, and the bundle itself, is as it
// was then (sizes and times in lib/host.bundle.json), so an edited source is never shadowed by
// an old bundle; anything else runs the sources.

import { readFileSync, statSync } from "node:fs";

function bundleIsCurrent() {
	try {
		const made = JSON.parse(readFileSync(new URL("./lib/host.bundle.json", import.meta.url), "utf8"));
		return Object.entries(made.files).every(([file, [size, mtimeMs]]) => {
			const now = statSync(new URL(`./lib/${file}`, import.meta.url));
			// Within a millisecond: a copy that keeps file times may round them below that.
			return now.size === size && Math.abs(now.mtimeMs - mtimeMs) < 1;
		});
	} catch {
		return false;
	}
}

await import(bundleIsCurrent() ? "./lib/host.bundle.mjs" : "./lib/main.mjs");
