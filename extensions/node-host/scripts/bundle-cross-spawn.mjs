// Runs after `npm ci` (postinstall). pi's `utils/child-process.js` imports cross-spawn, and many of
// pi's modules import that one: pi's `getAgentDir` (config.js), which pi's preset example calls
// in its `session_start`, brings it in. cross-spawn is CommonJS spread over ten small files in
// five packages (which, isexe, path-key, shebang-command...), and Node resolves, reads and
// compiles each: ~5 ms of that `session_start`, against ~1.8 ms for the same code in fewer
// files. Its `lib/parse.js`, which holds the tree of small files, becomes one file (esbuild,
// CommonJS, builtins left to Node); the original moves aside (`parse.tau-orig.js`, what a rerun
// builds from). Not the entry point: an ES module importing cross-spawn makes Node scan the
// entry's source for export names, ~3 ms more for the whole bundle than for the small entry.
// The version stays the one package-lock.json pins; only the layout changes. A stamp with this
// script's hash makes a second run a no-op; should bundling fail, the original is put back.

import { createHash } from "node:crypto";
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dirname, "..", "node_modules", "cross-spawn");
if (!existsSync(join(root, "package.json"))) process.exit(0);
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const entry = join(root, "lib", "parse.js");
const original = entry.replace(/\.js$/, ".tau-orig.js");
const recipe = createHash("sha256").update(readFileSync(import.meta.filename)).digest("hex").slice(0, 12);
const stamp = join(root, ".tau-bundled");
const stampText = `cross-spawn ${pkg.version}: lib/parse.js as one file (${recipe})\n`;
if (existsSync(stamp) && readFileSync(stamp, "utf8") === stampText) process.exit(0);

rmSync(stamp, { force: true });
if (!existsSync(original)) renameSync(entry, original);
try {
	const { build } = await import("esbuild");
	await build({
		entryPoints: [original],
		bundle: true,
		format: "cjs",
		platform: "node",
		target: "node20",
		outfile: entry,
		allowOverwrite: true,
		logLevel: "warning",
		banner: { js: `// cross-spawn ${pkg.version}'s lib/parse.js with what it requires: written by tau's node host (scripts/bundle-cross-spawn.mjs).` },
	});
	writeFileSync(stamp, stampText);
} catch (err) {
	rmSync(entry, { force: true });
	renameSync(original, entry);
	console.warn(`tau: cross-spawn stays as installed: ${err instanceof Error ? err.message : err}`);
}
