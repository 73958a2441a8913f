// The host's transpile cache lives in a private folder of the agent directory, never in the
// shared temp directory (lib/cache.mjs), and is turned off when that folder is not private.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const HOST = join(here, "..", "host.cjs");
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

test("jiti, babel and TypeBox load with the code caches the install wrote, and load without them too", () => {
	// A fresh Node, as the host is: the caches are V8's, checked against this Node's flags.
	const load = (extraSetup) =>
		spawnSync(
			process.execPath,
			[
				"--input-type=module",
				"-e",
				`${extraSetup}
				const { newJiti } = await import(${JSON.stringify(new URL("../lib/packages.mjs", import.meta.url).href)});
				const { codeCacheUse } = await import(${JSON.stringify(new URL("../lib/code-cache.mjs", import.meta.url).href)});
				const jiti = await newJiti(false);
				const factory = await jiti.import(${JSON.stringify(BASIC)}, { default: true });
				console.log(JSON.stringify({ loaded: typeof factory, use: codeCacheUse() }));`,
			],
			{ encoding: "utf8", env: { ...process.env, PI_CODING_AGENT_DIR: "" } },
		);
	const withCaches = load("");
	assert.equal(withCaches.status, 0, withCaches.stderr);
	const report = JSON.parse(withCaches.stdout);
	assert.equal(report.loaded, "function", "basic.ts transpiled and evaluated");
	const uses = Object.entries(report.use).map(([file, use]) => [file.split("/").pop(), use]);
	assert.deepEqual(uses, [["jiti.cjs", "used"], ["babel.cjs", "used"], ["tau-typebox.cjs", "used"]], "every cache accepted by V8");

	// Without caches (a changed file, another install) the same code compiles as usual.
	const stale = load(`const fs = await import("node:fs");
		const realRead = fs.readFileSync;
		fs.default.readFileSync = (path, ...rest) => {
			if (String(path).endsWith(".tau-code-cache")) throw Object.assign(new Error("gone"), { code: "ENOENT" });
			return realRead(path, ...rest);
		};
		(await import("node:module")).syncBuiltinESMExports();`);
	assert.equal(stale.status, 0, stale.stderr);
	const staleReport = JSON.parse(stale.stdout);
	assert.equal(staleReport.loaded, "function");
	assert.deepEqual(Object.values(staleReport.use), ["none", "none", "none"]);
});

test("a code cache is used only whole and for the very file it was written from", () => {
	const dir = join(scratch, "code-cache");
	mkdirSync(dir);
	const file = join(dir, "module.cjs");
	const cacheFile = `${file}.tau-code-cache`;
	const source = (name) => `module.exports = { name: ${JSON.stringify(name)}, add: (a, b) => a + b };\n`;
	const codeCache = JSON.stringify(new URL("../lib/code-cache.mjs", import.meta.url).href);
	const load = (write = false) => {
		const child = spawnSync(
			process.execPath,
			[
				"--input-type=module",
				"-e",
				`const { requireWithCodeCache, codeCacheUse, writeCodeCaches } = await import(${codeCache});
				const loaded = requireWithCodeCache(${JSON.stringify(file)});
				loaded.add(1, 2);
				if (${write}) writeCodeCaches();
				console.log(JSON.stringify({ name: loaded.name, use: Object.values(codeCacheUse())[0] }));`,
			],
			{ encoding: "utf8" },
		);
		assert.equal(child.status, 0, `no crash: ${child.stderr}`);
		return JSON.parse(child.stdout);
	};
	writeFileSync(file, source("one"));
	assert.deepEqual(load(true), { name: "one", use: "none" });
	assert.deepEqual(load(), { name: "one", use: "used" });
	const written = readFileSync(cacheFile);

	// Another file of the same length (V8's own check), written later.
	writeFileSync(file, source("two"));
	assert.deepEqual(load(), { name: "two", use: "none" });

	// The same file again, its cache damaged (V8 would crash on it) or cut short.
	writeFileSync(file, source("one"));
	const later = new Date(Date.now() + 5000);
	utimesSync(file, later, later);
	load(true);
	const fresh = readFileSync(cacheFile);
	assert.deepEqual(load(), { name: "one", use: "used" });
	const damaged = Buffer.from(fresh);
	for (let i = damaged.indexOf(10) + 40; i < damaged.length; i += 7) damaged[i] ^= 0x5a;
	writeFileSync(cacheFile, damaged);
	assert.deepEqual(load(), { name: "one", use: "none" });
	writeFileSync(cacheFile, fresh.subarray(0, fresh.length - 100));
	assert.deepEqual(load(), { name: "one", use: "none" });
	assert.notDeepEqual(written, fresh, "the cache names the file's time");
});
