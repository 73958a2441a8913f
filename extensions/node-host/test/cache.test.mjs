// The host's transpile cache lives in a private folder of the agent directory, never in the
// shared temp directory (lib/cache.mjs), and is turned off when that folder is not private.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const HOST = join(here, "..", "host.mjs");
const BASIC = join(here, "fixtures", "basic.ts");

const scratch = mkdtempSync(join(tmpdir(), "tau-node-host-cache-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Starts a host with `agentDir` and `tmp` as its temp directory, loads basic.ts, shuts down. */
async function loadOnce(agentDir, tmp) {
	const child = spawn(process.execPath, [HOST], {
		cwd: scratch,
		env: { ...process.env, TAU_EXTENSION_PROTOCOL: "1", PI_CODING_AGENT_DIR: agentDir, TMPDIR: tmp },
		stdio: ["pipe", "pipe", "pipe"],
	});
	const exited = new Promise((resolve) => child.on("exit", resolve));
	let stdout = "";
	child.stdout.setEncoding("utf8");
	let timer;
	const answered = new Promise((resolve, reject) => {
		child.stdout.on("data", (chunk) => {
			stdout += chunk;
			const line = stdout.split("\n").find((l) => l.includes('"response"'));
			if (line) resolve(JSON.parse(line));
		});
		timer = setTimeout(() => reject(new Error(`no answer to initialize; stdout: ${stdout}`)), 20000);
	}).finally(() => clearTimeout(timer));
	child.stdin.write(
		`${JSON.stringify({ type: "initialize", id: "i", protocol: 1, tau: "test", cwd: scratch, agentDir, mode: "rpc", hasUI: true, extensions: [BASIC], state: {} })}\n`,
	);
	const response = await answered;
	child.stdin.write(`${JSON.stringify({ type: "shutdown" })}\n`);
	await exited;
	assert.equal(response.error, undefined);
	assert.equal(response.result.extensions[0].error, undefined, JSON.stringify(response.result));
}

test("transpiled extensions are cached owner-only under the agent directory, not in TMPDIR", async () => {
	const agentDir = join(scratch, "agent");
	const tmp = join(scratch, "tmp");
	mkdirSync(agentDir);
	mkdirSync(tmp);
	await loadOnce(agentDir, tmp);
	assert.deepEqual(readdirSync(tmp), [], "nothing written to the temp directory");
	const cache = join(agentDir, "cache", "jiti");
	for (const dir of [join(agentDir, "cache"), cache]) {
		assert.equal(statSync(dir).mode & 0o777, 0o700, dir);
	}
	const files = readdirSync(cache);
	assert.ok(files.some((name) => name.includes("basic")), `basic.ts was cached: ${files}`);
	for (const name of files) {
		assert.equal(statSync(join(cache, name)).mode & 0o077, 0, `${name} is private`);
	}
});

test("a cache folder others can write to is not used", async () => {
	const agentDir = join(scratch, "shared-agent");
	const cache = join(agentDir, "cache", "jiti");
	mkdirSync(cache, { recursive: true });
	chmodSync(cache, 0o777);
	const tmp = join(scratch, "shared-tmp");
	mkdirSync(tmp);
	await loadOnce(agentDir, tmp);
	assert.deepEqual(readdirSync(cache), [], "the extension still loads, uncached");
	assert.deepEqual(readdirSync(tmp), [], "and not cached in TMPDIR either");
});
