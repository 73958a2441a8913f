// Measures the first `ctx.ui.theme` access of a host process (issue 22): in a fresh Node
// process that has loaded what an extension with a tool schema has (TypeBox), the time to load
// a theme module and initialise pi's global theme, for the lean module scripts/bundle-theme.mjs
// writes and for pi's own. Prints the median of N runs of each, interleaved.
//
//   node scripts/measure-theme.mjs [runs]        (default 11)

import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const runs = Number(process.argv[2] ?? 11);
const themeDir = join(import.meta.dirname, "..", "node_modules", "@earendil-works", "pi-coding-agent", "dist", "modes", "interactive", "theme");
// The floor: loading a module that does nothing, the same way.
const scratch = mkdtempSync(join(tmpdir(), "tau-theme-bench-"));
// The lean module is CommonJS, pi's an ES module: a floor for each.
const emptyBody = 'globalThis[Symbol.for("@earendil-works/pi-coding-agent:theme")] = { fg: (_, t) => t };\n';
const empty = join(scratch, "empty.mjs");
writeFileSync(empty, `export function initTheme() {}\n${emptyBody}`);
const emptyCjs = join(scratch, "empty.cjs");
writeFileSync(emptyCjs, `exports.initTheme = function () {};\n${emptyBody}`);
const floors = { "(empty module)": empty, "(empty .cjs)": emptyCjs };
const probe = (file) => `
	import "typebox"; import "typebox/compile";
	const { createRequire } = await import("node:module");
	const path = ${JSON.stringify(floors[file] ?? join(themeDir, file))};
	const started = performance.now();
	createRequire(path)(path).initTheme(undefined, false);
	globalThis[Symbol.for("@earendil-works/pi-coding-agent:theme")].fg("accent", "x");
	console.log(performance.now() - started);`;
const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const times = { "(empty module)": [], "(empty .cjs)": [], "theme.tau-lite.cjs": [], "theme.js": [] };
for (let i = 0; i < runs; i++) {
	for (const file of Object.keys(times)) {
		const run = spawnSync(process.execPath, ["--input-type=module", "-e", probe(file)], { cwd: join(import.meta.dirname, ".."), encoding: "utf8" });
		if (run.status !== 0) throw new Error(run.stderr);
		times[file].push(Number(run.stdout));
	}
}
for (const [file, xs] of Object.entries(times)) console.log(`${file.padEnd(20)} first theme access: ${median(xs).toFixed(1)} ms (median of ${runs})`);
console.log(`lean / pi's: ${(median(times["theme.tau-lite.cjs"]) / median(times["theme.js"])).toFixed(3)}`);
rmSync(scratch, { recursive: true, force: true });
