// The host's start-up snapshot (scripts/build-snapshot.mjs, lib/snapshot.mjs): a host started
// from it runs main() from the snapshot's heap and behaves as one started without it; host.cjs
// leaves it unused when a file it was made from changed or the folder moved; a failed build
// leaves nothing tau would use. Each test works on a copy of the host, so the installed blob is
// never touched.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const scratch = mkdtempSync(join(tmpdir(), "tau-node-host-snapshot-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** `cp -al`: a copy of a folder made of hard links, as fast as a symlink but resolving to itself,
 * so that TypeBox's loader in the copy's packages finds the copy's lib/ (one TypeBox instance is
 * what the tests check) and file times are kept. */
function linkCopy(from, to) {
	const copied = spawnSync("cp", ["-al", from, to], { encoding: "utf8" });
	assert.equal(copied.status, 0, copied.stderr);
}

/** A copy of the host with the installed packages, with a snapshot of its own built there. */
function snapshotHost(name) {
	const dir = join(scratch, name);
	for (const entry of ["host.cjs", "host.mjs", "package.json"]) cpSync(join(root, entry), join(dir, entry), { preserveTimestamps: true });
	for (const folder of ["lib", "scripts"]) cpSync(join(root, folder), join(dir, folder), { recursive: true, preserveTimestamps: true });
	for (const stale of ["host.snapshot.blob", "host.snapshot.json", "host.snapshot.cjs"]) rmSync(join(dir, "lib", stale), { force: true });
	linkCopy(join(root, "node_modules"), join(dir, "node_modules"));
	const built = spawnSync(process.execPath, [join(dir, "scripts", "build-snapshot.mjs")], { encoding: "utf8" });
	assert.equal(built.status, 0, built.stderr);
	assert.equal(built.stderr, "", "the build warns of nothing");
	return dir;
}

let host;
let extension;
before(() => {
	host = snapshotHost("host");
	// Reports how the host started, what an extension sees of the console and of execArgv, and
	// whether its TypeBox is the one pi's packages get from Node (a snapshot holds a TypeBox).
	extension = join(scratch, "report.ts");
	writeFileSync(
		extension,
		`import { createRequire } from "node:module";
import { StringEnum } from "@earendil-works/pi-ai";
import { Type } from "typebox";
import { Value } from "typebox/value";
export default function (pi: any) {
	// What pi's packages import, from the packages beside the host that runs this.
	const fromNode = createRequire(process.argv[1])("typebox");
	const report = {
		started: (globalThis as any)[Symbol.for("tau.node-host.started")],
		consoleClass: typeof console.Console,
		execArgv: process.execArgv,
		oneTypebox: fromNode.Type === Type && Value.Check(Type.Object({ k: StringEnum(["a", "b"]) }), { k: "a" }),
	};
	pi.registerCommand("report", { description: JSON.stringify(report), handler: async () => {} });
}
`,
	);
});

/** Starts the host at `dir` with `nodeArgs` before its entry, loads `extension`, and returns
 * what it reported (or the initialize error). */
async function startAndReport(dir, nodeArgs = []) {
	const child = spawn(process.execPath, [...nodeArgs, join(dir, "host.cjs")], { cwd: scratch, env: { ...process.env, PI_CODING_AGENT_DIR: scratch } });
	let stderr = "";
	child.stderr.on("data", (chunk) => (stderr += chunk));
	let answer;
	createInterface({ input: child.stdout }).on("line", (line) => {
		const frame = JSON.parse(line);
		if (frame.type === "response" && frame.id === "init") {
			answer = frame;
			child.stdin.write(`${JSON.stringify({ type: "shutdown" })}\n`);
		}
	});
	child.stdin.write(
		`${JSON.stringify({ type: "initialize", id: "init", protocol: 1, tau: "test", cwd: scratch, agentDir: scratch, mode: "rpc", hasUI: false, extensions: [extension], state: { projectTrusted: true } })}\n`,
	);
	const [status] = await once(child, "exit");
	assert.equal(status, 0, stderr);
	const loaded = answer?.result?.extensions?.[0];
	assert.ok(loaded?.manifest, `the extension loaded: ${JSON.stringify(answer)} ${stderr}`);
	return JSON.parse(loaded.manifest.commands.find((c) => c.name === "report").description);
}

const blobArgs = (dir) => ["--snapshot-blob", join(dir, "lib", "host.snapshot.blob")];

test("a host started from its snapshot loads a TypeScript extension as one started without it", async () => {
	const record = JSON.parse(readFileSync(join(host, "lib", "host.snapshot.json"), "utf8"));
	assert.equal(record.host, join(host, "host.cjs"));
	assert.equal(record.nodeVersion, process.version);
	const fromSnapshot = await startAndReport(host, blobArgs(host));
	const without = await startAndReport(host);
	assert.deepEqual(fromSnapshot, { started: "snapshot", consoleClass: "function", execArgv: [], oneTypebox: true });
	assert.deepEqual(without, { ...fromSnapshot, started: "bundle" });
});

test("a snapshot whose files changed since, or whose folder moved, is left unused", async () => {
	const edited = snapshotHost("edited");
	utimesSync(join(edited, "lib", "ids.mjs"), new Date(), new Date());
	const report = await startAndReport(edited, blobArgs(edited));
	assert.equal(report.started, "sources", "the bundle is stale too");
	assert.equal(report.consoleClass, "function", "what the snapshot changed is undone all the same");
	assert.equal(report.oneTypebox, true);

	const moved = join(scratch, "moved");
	linkCopy(host, moved);
	assert.equal((await startAndReport(moved, blobArgs(moved))).started, "bundle");
});

test("a build that fails leaves neither blob nor record", () => {
	const broken = snapshotHost("broken");
	writeFileSync(join(broken, "lib", "snapshot.mjs"), 'throw new Error("no snapshot today");\n');
	const built = spawnSync(process.execPath, [join(broken, "scripts", "build-snapshot.mjs")], { encoding: "utf8" });
	assert.equal(built.status, 0, "the install goes on");
	assert.match(built.stderr, /no start-up snapshot for the node host/);
	assert.equal(existsSync(join(broken, "lib", "host.snapshot.blob")), false);
	assert.equal(existsSync(join(broken, "lib", "host.snapshot.json")), false);
});
