// Runs after `npm ci` (postinstall), last. Builds the host's V8 start-up snapshot: lib/snapshot.mjs
// and what it imports from lib/ bundled as one CommonJS file, lib/host.snapshot.cjs (a Node 20
// snapshot can only be made from one script that requires nothing but Node's own modules),
// which Node runs once with --build-snapshot to write lib/host.snapshot.blob. A start from the
// blob skips evaluating the host, jiti and TypeBox (host.cjs says how it checks the blob's
// files are current).
// A blob works only with the Node binary that made it, run with the same V8 flags: another one
// refuses it or crashes. So lib/host.snapshot.json records that binary (real path, size and
// modification time in nanoseconds, version), the blob's own size and time and the host's
// entry, and tau adds `--snapshot-blob` only while all of them still hold
// (crates/tau-extensions/src/snapshot.rs). The blob is made without NODE_OPTIONS, and tau does
// not use it when NODE_OPTIONS is set.
// Nothing is left behind when any step fails: the host then starts as it did without a blob.
//   node scripts/build-snapshot.mjs

import { spawnSync } from "node:child_process";
import { readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { hostBuildOptions, routeImports } from "./host-cjs.mjs";

const root = realpathSync(join(import.meta.dirname, ".."));
const lib = join(root, "lib");
const script = join(lib, "host.snapshot.cjs");
const blob = join(lib, "host.snapshot.blob");
const record = join(lib, "host.snapshot.json");
const partial = `${blob}.${process.pid}`;

// The record goes first and comes back last: a blob without its record is never used.
rmSync(record, { force: true });
rmSync(blob, { force: true });
try {
	const { build } = await import("esbuild");
	const result = await build(hostBuildOptions(root, join(lib, "snapshot.mjs"), script));
	routeImports(script);
	const inputs = Object.keys(result.metafile.inputs).map((input) => join(root, input));
	const source = readFileSync(script, "utf8");
	const placeholder = '"__TAU_SNAPSHOT_INPUTS__"';
	if (!source.includes(placeholder)) throw new Error(`${script} lacks ${placeholder}`);
	writeFileSync(script, source.replace(placeholder, JSON.stringify(inputs)));

	const env = { ...process.env };
	delete env.NODE_OPTIONS;
	const made = spawnSync(process.execPath, ["--snapshot-blob", partial, "--build-snapshot", script], { cwd: root, env, encoding: "utf8" });
	if (made.status !== 0) throw new Error(`node --build-snapshot exited with ${made.status ?? made.signal}: ${made.stderr}`);
	renameSync(partial, blob);

	// The blob must start the host, from the snapshot, before tau is told about it.
	const tried = spawnSync(process.execPath, ["--snapshot-blob", blob, "-e", "process.stdout.write(String(typeof globalThis[Symbol.for('tau.node-host.snapshot')]?.main))"], {
		cwd: root,
		env,
		encoding: "utf8",
	});
	if (tried.status !== 0 || tried.stdout !== "function") throw new Error(`the blob does not start: ${tried.status ?? tried.signal} ${tried.stdout} ${tried.stderr}`);

	const node = realpathSync(process.execPath);
	writeFileSync(
		record,
		`${JSON.stringify(
			{
				host: join(root, "host.cjs"),
				blob: "host.snapshot.blob",
				blobSize: statSync(blob).size,
				blobMtimeNs: String(statSync(blob, { bigint: true }).mtimeNs),
				node,
				nodeSize: statSync(node).size,
				nodeMtimeNs: String(statSync(node, { bigint: true }).mtimeNs),
				nodeVersion: process.version,
			},
			null,
			"\t",
		)}\n`,
	);
} catch (err) {
	rmSync(partial, { force: true });
	rmSync(blob, { force: true });
	rmSync(record, { force: true });
	// Only slower without it: say so, and go on.
	console.warn(`tau: no start-up snapshot for the node host: ${err instanceof Error ? err.message : err}`);
}
