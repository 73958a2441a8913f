// host.cjs runs the install-time bundle of the host's modules only while it is current, and the
// sources otherwise (host.cjs, scripts/bundle-host.mjs); host.mjs runs host.cjs.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync, symlinkSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
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
