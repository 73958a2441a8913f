// The start-up snapshot's entry (scripts/build-snapshot.mjs bundles it into lib/host.snapshot.cjs
// and has Node build lib/host.snapshot.blob from that at install). Everything here runs then,
// once: the host's modules, jiti and TypeBox are evaluated into the heap Node saves, and main()
// is left on a global symbol. A start with `node --snapshot-blob lib/host.snapshot.blob host.cjs`
// begins with that heap; host.cjs calls main() from it only after checking that every file it
// was made from is as it was then (the record below), and otherwise starts as without it.

import nodeConsole from "node:console";
import { statSync } from "node:fs";
import { dirname, relative } from "node:path";
import { requiredFiles } from "./code-cache.cjs";
import { main } from "./main.mjs";
import { preloadForSnapshot } from "./packages.mjs";

preloadForSnapshot();

// Node 20 loses the console's Console class in a process started from a snapshot; the class as
// it was at install is put back, for extensions that make a console of their own.
const { Console } = nodeConsole;

/**
 * Undoes what a start from the snapshot changes that extensions can see. host.cjs calls it
 * whenever the process started from the blob, even one it then leaves unused: the host's
 * modules loaded afterwards need the console's class too.
 */
function repair() {
	if (nodeConsole.Console === undefined) nodeConsole.Console = Console;
	// A child that fork() starts gets the host's execArgv: it must not start from the host's heap.
	const at = process.execArgv.findIndex((arg) => arg === "--snapshot-blob" || arg.startsWith("--snapshot-blob="));
	if (at !== -1) process.execArgv.splice(at, process.execArgv[at].includes("=") ? 1 : 2);
}

// The bundle's own sources; scripts/build-snapshot.mjs writes their paths in place of this.
const inputs = "__TAU_SNAPSHOT_INPUTS__";
// The host's folder: the paths the modules resolved as they loaded hold only there.
const dir = dirname(dirname(__filename));
const files = {};
for (const file of [...inputs, ...requiredFiles()]) {
	const { size, mtimeMs } = statSync(file);
	files[relative(dir, file)] = [size, mtimeMs];
}

globalThis[Symbol.for("tau.node-host.snapshot")] = { main, repair, dir, files, node: process.version };
