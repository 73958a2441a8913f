// Runs after `npm ci` (postinstall), after the bundles. Writes V8's code caches of the host's
// bundle (scripts/bundle-host.mjs), of jiti, of the babel transform it loads on a transpile-cache
// miss, and of TypeBox's CommonJS file (scripts/bundle-typebox.mjs; lib/code-cache.cjs says
// why): the host runs once as tau starts it, loading a TypeScript extension with an empty
// transpile cache, and writes the caches as it exits, so that the functions a start and a load
// run are compiled into them too.
// A cache is only for the Node that wrote it; another Node rejects it and compiles as usual.

import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const root = join(import.meta.dirname, "..");
const cached = ["lib/host.bundle.cjs", "node_modules/jiti/dist/jiti.cjs", "node_modules/jiti/dist/babel.cjs", "node_modules/typebox/build/tau-typebox.cjs"];
const began = Date.now();
const scratch = mkdtempSync(join(tmpdir(), "tau-code-cache-"));
try {
	const sample = join(scratch, "sample.ts");
	// What extensions do: types, an import of pi's package, a default export taking the API.
	writeFileSync(
		sample,
		`import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
interface Options { name: string; count?: number }
// The schema builders tools' parameters use most.
const schema = Type.Object({
	name: Type.String({ description: "a name" }),
	count: Type.Optional(Type.Number()),
	done: Type.Boolean(),
	tags: Type.Array(Type.String()),
	kind: Type.Union([Type.Literal("a"), Type.Literal("b")]),
	extra: Type.Optional(Type.Integer({ minimum: 0 })),
});
export default function (pi: ExtensionAPI, options: Options = { name: "x" }): void {
	const names: string[] = [options.name, ...Object.keys(schema)];
	pi.on?.("session_start", async () => names.length);
}
`,
	);
	// A host run as tau starts one: the extension loaded, its session started, then shut down.
	const agentDir = join(scratch, "agent");
	mkdirSync(agentDir);
	const frames = [
		{ type: "initialize", id: "init", protocol: 1, tau: "install", cwd: scratch, agentDir, mode: "rpc", hasUI: false, extensions: [sample], state: { projectTrusted: true } },
		{ type: "event", id: "start", extension: sample, event: { type: "session_start", reason: "startup" }, state: { version: 1, model: null, activeTools: [], allTools: [] } },
		{ type: "shutdown" },
	];
	const env = { ...process.env, PI_CODING_AGENT_DIR: agentDir, TAU_NODE_HOST_WRITE_CODE_CACHES: "1" };
	const host = spawn(process.execPath, [join(root, "host.cjs")], { env, cwd: scratch, stdio: ["pipe", "pipe", "pipe"] });
	// The host may be gone before its input is: its exit says how it went.
	host.stdin.on("error", () => {});
	const send = () => host.stdin.write(`${JSON.stringify(frames.shift())}\n`);
	let stderr = "";
	host.stderr.on("data", (chunk) => (stderr += chunk));
	const answered = new Set();
	createInterface({ input: host.stdout }).on("line", (line) => {
		const frame = JSON.parse(line);
		// Each frame waits for the answer to the one before, as tau's do.
		if (frame.type === "response" && !frame.error) {
			answered.add(frame.id);
			send();
		}
	});
	const timer = setTimeout(() => host.kill(), 60_000);
	send();
	const [status] = await once(host, "exit");
	clearTimeout(timer);
	const missing = cached.filter((file) => !(statSync(join(root, `${file}.tau-code-cache`), { throwIfNoEntry: false })?.mtimeMs >= began - 1000));
	// Only slower without them: say so, and go on.
	if (status !== 0 || !answered.has("start") || missing.length > 0) {
		console.warn(`tau: no code caches for ${missing.join(", ") || "the host's files"} (host exit ${status}): ${stderr}`);
	}
} finally {
	rmSync(scratch, { recursive: true, force: true });
}
