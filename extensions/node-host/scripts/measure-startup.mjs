// Measures what the host costs tau at startup: wall time from spawning `node host.cjs` (as tau
// does) to the `initialize` response, and on to the answer of the first `session_start` (which
// pays for pi's theme when an extension uses it). Prints the median of N runs per extension.
//
//   node scripts/measure-startup.mjs [runs]        (default 5)

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const runs = Number(process.argv[2] ?? 5);
const agentDir = mkdtempSync(join(tmpdir(), "tau-node-host-bench-"));
const examples = join(root, "test", "fixtures", "pi-examples");
const cases = {
	"(no extensions)": [],
	"empty extension": [join(root, "test", "fixtures", "empty.ts")],
	...Object.fromEntries(
		["rpc-demo.ts", "plan-mode/index.ts", "todo.ts", "preset.ts", "git-checkpoint.ts", "input-transform.ts", "trigger-compact.ts", "dynamic-tools.ts", "structured-output.ts"].map(
			(name) => [name, [join(examples, name)]],
		),
	),
};

function once(extensions) {
	return new Promise((resolve, reject) => {
		const started = process.hrtime.bigint();
		const ms = () => Number(process.hrtime.bigint() - started) / 1e6;
		const child = spawn(process.execPath, [join(root, "host.cjs")], { env: { ...process.env, PI_CODING_AGENT_DIR: agentDir }, stdio: ["pipe", "pipe", "ignore"] });
		const send = (frame) => child.stdin.write(`${JSON.stringify(frame)}\n`);
		const times = {};
		let buffer = "";
		child.stdout.setEncoding("utf8");
		child.stdout.on("data", (chunk) => {
			buffer += chunk;
			let newline;
			while ((newline = buffer.indexOf("\n")) !== -1) {
				const frame = JSON.parse(buffer.slice(0, newline));
				buffer = buffer.slice(newline + 1);
				if (frame.type === "action" && frame.id) send({ type: "response", id: frame.id, result: null });
				if (frame.type !== "response") continue;
				if (frame.id === "init") {
					times.initialize = ms();
					const loaded = frame.result.extensions.find((e) => e.manifest?.events.includes("session_start"));
					if (!loaded) {
						times.sessionStart = times.initialize;
						send({ type: "shutdown" });
					} else {
						send({ type: "event", id: "start", extension: loaded.path, event: { type: "session_start", reason: "startup" } });
					}
				} else if (frame.id === "start") {
					times.sessionStart = ms();
					send({ type: "shutdown" });
				}
			}
		});
		child.on("exit", () => (times.initialize ? resolve(times) : reject(new Error("host exited before answering"))));
		send({ type: "initialize", id: "init", protocol: 1, tau: "bench", cwd: root, agentDir, mode: "rpc", hasUI: true, extensions, state: { activeTools: ["read", "bash"], allTools: [] } });
	});
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

console.log(`node ${process.version}, median of ${runs} runs (ms)`);
console.log("extension".padEnd(24), "initialize".padStart(10), "session_start".padStart(14));
for (const [name, extensions] of Object.entries(cases)) {
	const samples = [];
	for (let i = 0; i < runs; i++) samples.push(await once(extensions));
	const init = median(samples.map((s) => s.initialize));
	const start = median(samples.map((s) => s.sessionStart));
	console.log(name.padEnd(24), init.toFixed(0).padStart(10), start.toFixed(0).padStart(14));
}
rmSync(agentDir, { recursive: true, force: true });
