// host.cjs runs the install-time bundle of the host's modules only while it is current, and the
// sources otherwise (host.cjs, scripts/bundle-host.mjs), with its code cache
// (scripts/cache-code.mjs); host.mjs runs host.cjs.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { cpSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const scratch = mkdtempSync(join(tmpdir(), "tau-node-host-bundle-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Which of the host's entry modules Node loaded when the host at `dir` started (from `entry`)
 * and stopped, and whether Node's ES module loader ran at all. */
function loadedEntry(dir, entry = "host.cjs") {
	const run = spawnSync(process.execPath, [join(dir, entry)], {
		input: `${JSON.stringify({ type: "shutdown" })}\n`,
		encoding: "utf8",
		env: { ...process.env, NODE_DEBUG: "esm,module", PI_CODING_AGENT_DIR: "" },
	});
	assert.equal(run.status, 0, run.stderr);
	return {
		bundle: run.stderr.includes(`${dir}/lib/host.bundle.cjs`),
		sources: run.stderr.includes(`${dir}/lib/main.mjs`),
		esmLoader: /^ESM /m.test(run.stderr),
	};
}

/** A copy of the host (its files' times kept) sharing the installed packages. */
function copyOfHost(name) {
	const dir = join(scratch, name);
	for (const entry of ["host.cjs", "host.mjs"]) cpSync(join(root, entry), join(dir, entry), { preserveTimestamps: true });
	cpSync(join(root, "lib"), join(dir, "lib"), { recursive: true, preserveTimestamps: true });
	symlinkSync(join(root, "node_modules"), join(dir, "node_modules"));
	return dir;
}

test("the installed host starts from its bundle, without the ES module loader", () => {
	assert.deepEqual(loadedEntry(root), { bundle: true, sources: false, esmLoader: false });
});

test("host.mjs, the earlier entry, starts the same bundle", () => {
	assert.deepEqual(loadedEntry(root, "host.mjs"), { bundle: true, sources: false, esmLoader: true });
});

test("a source changed since the bundle was made runs from the sources", () => {
	const current = copyOfHost("current");
	assert.deepEqual(loadedEntry(current), { bundle: true, sources: false, esmLoader: false }, "a faithful copy still uses the bundle");
	const edited = copyOfHost("edited");
	utimesSync(join(edited, "lib", "wire.mjs"), new Date(), new Date());
	assert.deepEqual(loadedEntry(edited), { bundle: false, sources: true, esmLoader: true });
	const unrecorded = copyOfHost("unrecorded");
	rmSync(join(unrecorded, "lib", "host.bundle.json"));
	assert.deepEqual(loadedEntry(unrecorded), { bundle: false, sources: true, esmLoader: true });
});

test("the bundle runs from the code cache the install wrote, and still imports ES modules", async () => {
	// An extension whose session_start makes the bundle import pi's exec module.
	const extension = join(scratch, "exec.ts");
	writeFileSync(
		extension,
		`export default function (pi: any) {
	pi.on("session_start", async () => {
		const result = await pi.exec("echo", ["from-exec"]);
		pi.appendEntry("exec", { stdout: result.stdout.trim() });
	});
}
`,
	);
	// Reports, as the host exits, how each file loaded with a code cache used it.
	const report = join(scratch, "report.cjs");
	writeFileSync(
		report,
		`process.on("exit", () => require("node:fs").writeSync(2, "code-cache-use " + JSON.stringify(require(${JSON.stringify(join(root, "lib", "code-cache.cjs"))}).codeCacheUse()) + "\\n"));\n`,
	);
	const frames = [
		{ type: "initialize", id: "init", protocol: 1, tau: "test", cwd: scratch, agentDir: scratch, mode: "rpc", hasUI: false, extensions: [extension], state: { projectTrusted: true } },
		{ type: "event", id: "start", extension, event: { type: "session_start", reason: "startup" }, state: { version: 1, model: null, activeTools: [], allTools: [] } },
		{ type: "shutdown" },
	];
	const host = spawn(process.execPath, ["-r", report, join(root, "host.cjs")], { cwd: scratch, env: { ...process.env, PI_CODING_AGENT_DIR: "" } });
	let stderr = "";
	host.stderr.on("data", (chunk) => (stderr += chunk));
	const seen = [];
	createInterface({ input: host.stdout }).on("line", (line) => {
		const frame = JSON.parse(line);
		seen.push(frame);
		if (frame.type === "action" && frame.id) host.stdin.write(`${JSON.stringify({ type: "response", id: frame.id, result: null })}\n`);
		if (frame.type === "response") host.stdin.write(`${JSON.stringify(frames.shift())}\n`);
	});
	host.stdin.write(`${JSON.stringify(frames.shift())}\n`);
	const [status] = await once(host, "exit");
	assert.equal(status, 0, stderr);
	const start = seen.find((frame) => frame.type === "response" && frame.id === "start");
	assert.ok(start && !start.error, `session_start answered: ${JSON.stringify(start)} ${stderr}`);
	const entry = seen.find((frame) => frame.type === "action" && JSON.stringify(frame).includes("from-exec"));
	assert.ok(entry, `pi.exec ran through the bundle's import: ${JSON.stringify(seen)}`);
	const use = JSON.parse(/^code-cache-use (.*)$/m.exec(stderr)?.[1] ?? "{}");
	assert.equal(use[join(root, "lib", "host.bundle.cjs")], "used", `the bundle's cache was used: ${stderr}`);
});
