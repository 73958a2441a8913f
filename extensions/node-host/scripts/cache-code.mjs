// Runs after `npm ci` (postinstall), after the bundles. Writes V8's code caches of jiti, of the
// babel transform it loads on a transpile-cache miss, and of TypeBox's CommonJS file
// (scripts/bundle-typebox.mjs; lib/code-cache.mjs says why), in a fresh Node that first loads a
// TypeScript module through the host's own jiti set-up with the transpile cache off, so that
// the functions a load runs are compiled into the caches too.
// A cache is only for the Node that wrote it; another Node rejects it and compiles as usual.

import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const lib = join(import.meta.dirname, "..", "lib");
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
	const warmUp = `
		const { newJiti } = await import(${JSON.stringify(pathToFileURL(join(lib, "packages.mjs")).href)});
		const { writeCodeCaches } = await import(${JSON.stringify(pathToFileURL(join(lib, "code-cache.mjs")).href)});
		const jiti = await newJiti(false);
		const factory = await jiti.import(${JSON.stringify(sample)}, { default: true });
		if (typeof factory !== "function") throw new Error("the sample did not load");
		writeCodeCaches();
	`;
	const env = { ...process.env };
	delete env.PI_CODING_AGENT_DIR;
	const made = spawnSync(process.execPath, ["--input-type=module", "-e", warmUp], { env, encoding: "utf8" });
	// Only slower without them: say so, and go on.
	if (made.status !== 0) console.warn(`tau: no code caches for jiti, babel and TypeBox: ${made.stderr}`);
} finally {
	rmSync(scratch, { recursive: true, force: true });
}
