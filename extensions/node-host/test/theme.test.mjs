// The lean theme module scripts/bundle-theme.mjs writes at install: the same themes as pi's own
// module, without loading the syntax highlighters or pi-tui's components until they are used.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { describe, test } from "node:test";

const here = import.meta.dirname;
const themeDir = join(here, "..", "node_modules", "@earendil-works", "pi-coding-agent", "dist", "modes", "interactive", "theme");
const lite = join(themeDir, "theme.tau-lite.mjs");
const require = createRequire(import.meta.url);

const COLORS = Object.keys(require(join(themeDir, "dark.json")).colors);
const BACKGROUNDS = new Set(["selectedBg", "userMessageBg", "customMessageBg", "toolPendingBg", "toolSuccessBg", "toolErrorBg"]);

describe("the lean theme module", () => {
	test("is written at install", () => assert.ok(existsSync(lite), `${lite} (npm ci runs scripts/bundle-theme.mjs)`));

	test("gives every colour of both built-in themes in both colour modes as pi's module does", () => {
		const ours = require(lite);
		const pis = require(join(themeDir, "theme.js"));
		for (const name of ["dark", "light"]) {
			for (const mode of ["truecolor", "256color"]) {
				const a = ours.loadThemeFromPath(join(themeDir, `${name}.json`), mode);
				const b = pis.loadThemeFromPath(join(themeDir, `${name}.json`), mode);
				for (const key of COLORS) {
					const get = (t) => (BACKGROUNDS.has(key) ? t.getBgAnsi(key) : t.getFgAnsi(key));
					assert.equal(get(a), get(b), `${name} ${mode} ${key}`);
				}
			}
		}
		assert.deepEqual(ours.highlightCode("const x = 1; // one", "ts"), pis.highlightCode("const x = 1; // one", "ts"));
	});

	test("loads neither highlight.js nor pi-tui's components until code is highlighted", () => {
		const script = `
			const { createRequire } = await import("node:module");
			const require = createRequire(${JSON.stringify(lite)});
			const m = require(${JSON.stringify(lite)});
			m.initTheme(undefined, false);
			const theme = globalThis[Symbol.for("@earendil-works/pi-coding-agent:theme")];
			const loaded = () => Object.keys(require.cache).filter((p) => p.includes("highlight.js")).length;
			const before = loaded();
			m.highlightCode("let a = 1;", "js");
			console.log(JSON.stringify({ before, after: loaded(), accent: theme.fg("accent", "x") }));`;
		const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", env: { ...process.env, COLORTERM: "truecolor" } });
		assert.equal(run.status, 0, run.stderr);
		const seen = JSON.parse(run.stdout);
		assert.equal(seen.before, 0, "highlight.js is not loaded by the theme");
		assert.ok(seen.after > 0, "highlighting loads it");
		assert.match(seen.accent, /^\x1b\[38;2;\d+;\d+;\d+mx\x1b\[39m$/);
	});
});
