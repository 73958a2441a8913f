// Runs after `npm ci` (postinstall). TypeBox 1.x ships as ~690 small ES modules, and Node 20
// needs ~90 ms to resolve and link them, which was most of the load time of any extension that
// builds a tool schema (todo.ts 253 ms against 104 ms for one that does not). This rewrites the
// package's own entry points (the files its `exports` map names) in place as esbuild bundles
// that share chunks, so every importer — extensions through jiti's alias, and pi's packages
// through Node — gets the same single copy of the same code, now ~9 ms to load. The version
// stays the one package-lock.json pins; only the file layout changes. A stamp file makes a
// second run a no-op.

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

// The one copy npm installs (hoisted; pi's packages ask for the same version).
const root = join(import.meta.dirname, "..", "node_modules", "typebox");
const pkgJson = join(root, "package.json");
const stamp = join(root, "build", ".tau-bundled");
if (existsSync(stamp)) process.exit(0);

const pkg = JSON.parse(readFileSync(pkgJson, "utf8"));
const entries = new Set();
for (const target of Object.values(pkg.exports ?? {})) {
	for (const file of typeof target === "string" ? [target] : Object.values(target)) entries.add(join(root, file));
}

const { build } = await import("esbuild");
await build({
	entryPoints: [...entries],
	bundle: true,
	splitting: true,
	format: "esm",
	platform: "node",
	outdir: join(root, "build"),
	outbase: join(root, "build"),
	allowOverwrite: true,
	outExtension: { ".js": ".mjs" },
	chunkNames: "_chunks/[name]-[hash]",
	logLevel: "warning",
});
writeFileSync(stamp, `bundled by tau's node host from typebox ${pkg.version}\n`);
