// The lean theme module scripts/bundle-theme.mjs writes at install: the same themes as pi's own
// module, without loading the syntax highlighters, pi-tui's components, chalk or TypeBox until
// they are used, and loaded with the V8 code cache written beside it.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";

const here = import.meta.dirname;
const themeDir = join(here, "..", "node_modules", "@earendil-works", "pi-coding-agent", "dist", "modes", "interactive", "theme");
const lite = join(themeDir, "theme.tau-lite.cjs");
const files = ["theme.tau-lite.cjs", "theme.tau-lite.code.cjs", "theme.tau-lite.code.v8", "theme.tau-lite-chalk.cjs"];
const require = createRequire(import.meta.url);

const dark = require(join(themeDir, "dark.json"));
const COLORS = Object.keys(dark.colors);
const BACKGROUNDS = new Set(["selectedBg", "userMessageBg", "customMessageBg", "toolPendingBg", "toolSuccessBg", "toolErrorBg"]);
const STYLES = ["bold", "italic", "underline", "inverse", "strikethrough"];

const scratch = mkdtempSync(join(tmpdir(), "tau-theme-test-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Runs `script` (CommonJS) in a fresh Node and returns what it printed as JSON. */
function run(script, env = {}) {
	const child = spawnSync(process.execPath, ["-e", script], { encoding: "utf8", env: { ...process.env, ...env } });
	assert.equal(child.status, 0, child.stderr);
	return JSON.parse(child.stdout);
}

function sameColours(a, b, label) {
	for (const key of COLORS) {
		const get = (t) => (BACKGROUNDS.has(key) ? t.getBgAnsi(key) : t.getFgAnsi(key));
		assert.equal(get(a), get(b), `${label} ${key}`);
	}
}

/** The message `load` throws, or undefined. */
function thrown(load) {
	try {
		load();
	} catch (err) {
		return err.message;
	}
	return undefined;
}

describe("the lean theme module", () => {
	test("is written at install", () => {
		for (const file of files) assert.ok(existsSync(join(themeDir, file)), `${file} (npm ci runs scripts/bundle-theme.mjs)`);
	});

	test("gives every colour of both built-in themes in both colour modes as pi's module does", () => {
		const ours = require(lite);
		const pis = require(join(themeDir, "theme.js"));
		for (const name of ["dark", "light"]) {
			for (const mode of ["truecolor", "256color"]) {
				const path = join(themeDir, `${name}.json`);
				sameColours(ours.loadThemeFromPath(path, mode), pis.loadThemeFromPath(path, mode), `${name} ${mode}`);
			}
		}
	});

	test("checks a theme file of the user's as pi's module does, building the schema only then", () => {
		const ours = require(lite);
		const pis = require(join(themeDir, "theme.js"));
		const write = (name, json) => {
			const path = join(scratch, `${name}.json`);
			writeFileSync(path, typeof json === "string" ? json : JSON.stringify(json));
			return path;
		};
		// Valid: variables, 256-colour indices, empty (default) colours, an export section.
		const valid = write("valid", {
			name: "valid",
			vars: { ...dark.vars, primary: "#336699", grey: 244 },
			colors: { ...dark.colors, accent: "primary", muted: "grey", text: "", selectedBg: 17 },
			export: { pageBg: "primary", cardBg: 236 },
		});
		for (const mode of ["truecolor", "256color"]) sameColours(ours.loadThemeFromPath(valid, mode), pis.loadThemeFromPath(valid, mode), `valid ${mode}`);
		const { accent, ...withoutAccent } = dark.colors;
		const invalid = {
			"a value of the wrong type": { name: "bad", colors: { ...dark.colors, accent: true } },
			"an index out of range": { name: "bad", colors: { ...dark.colors, muted: 256 } },
			"a fractional index": { name: "bad", colors: { ...dark.colors, muted: 12.5 } },
			"missing colours": { name: "bad", colors: withoutAccent },
			"missing colours and a bad value": { name: "bad", colors: { ...withoutAccent, dim: null } },
			"no name": { colors: dark.colors },
			"a name with a slash": { name: "a/b", colors: dark.colors },
			"a bad variable": { name: "bad", vars: { x: [] }, colors: dark.colors },
			"a bad export colour": { name: "bad", colors: dark.colors, export: { pageBg: false } },
			"an unresolvable variable": { name: "bad", colors: { ...dark.colors, accent: "nowhere" } },
			"not JSON": "{ name: ",
			"not an object": "[]",
		};
		for (const [label, json] of Object.entries(invalid)) {
			const path = write("invalid", json);
			const theirs = thrown(() => pis.loadThemeFromPath(path));
			assert.ok(theirs, `pi rejects ${label}`);
			assert.equal(thrown(() => ours.loadThemeFromPath(path)), theirs, label);
		}
	});

	test("styles text (bold, italic, ...) as pi's module does at every colour level", () => {
		for (const FORCE_COLOR of ["0", "1", "2", "3", ""]) {
			const seen = run(
				`const ours = require(${JSON.stringify(lite)});
				const pis = require(${JSON.stringify(join(themeDir, "theme.js"))});
				const path = ${JSON.stringify(join(themeDir, "dark.json"))};
				const a = ours.loadThemeFromPath(path, "truecolor"), b = pis.loadThemeFromPath(path, "truecolor");
				const texts = ["x", "", "two\\nlines", "a \\x1b[1mnested\\x1b[22m b", 42];
				console.log(JSON.stringify(${JSON.stringify(STYLES)}.flatMap((s) => texts.map((t) => [s, a[s](t), b[s](t)]))));`,
				{ FORCE_COLOR },
			);
			for (const [style, ours, theirs] of seen) assert.equal(ours, theirs, `${style} with FORCE_COLOR=${FORCE_COLOR}`);
		}
	});

	test("initialises a built-in theme without chalk, tty, child_process, TypeBox or highlight.js, and loads each on first use", () => {
		const seen = run(`
			const Module = require("node:module");
			const requested = [];
			const load = Module._load;
			Module._load = function (request, ...rest) { requested.push(request); return load.call(this, request, ...rest); };
			const builtins = () => process.moduleLoadList.filter((m) => /^NativeModule (tty|child_process)$/.test(m));
			const snapshot = () => ({ requested: requested.filter((r) => /typebox|chalk|highlight|cross-spawn|tty|child_process/.test(r)), builtins: builtins() });
			const m = require(${JSON.stringify(lite)});
			m.initTheme(undefined, false);
			const theme = globalThis[Symbol.for("@earendil-works/pi-coding-agent:theme")];
			const accent = theme.fg("accent", "x");
			const initialised = snapshot();
			const bold = theme.bold("x");
			const styled = snapshot();
			m.loadThemeFromPath(${JSON.stringify(join(themeDir, "light.json"))});
			const checked = snapshot();
			console.log(JSON.stringify({ accent, bold, initialised, styled, checked }));`,
			{ COLORTERM: "truecolor", FORCE_COLOR: "1" },
		);
		assert.match(seen.accent, /^\x1b\[38;2;\d+;\d+;\d+mx\x1b\[39m$/);
		assert.equal(seen.bold, "\x1b[1mx\x1b[22m");
		assert.deepEqual(seen.initialised, { requested: [], builtins: [] }, "nothing but the theme itself is loaded");
		assert.ok(seen.styled.requested.some((r) => r.endsWith("theme.tau-lite-chalk.cjs")), "the first style loads chalk");
		assert.ok(!seen.styled.requested.some((r) => r.startsWith("typebox")), "styling does not load TypeBox");
		assert.deepEqual([...new Set(seen.checked.requested.filter((r) => r.startsWith("typebox")))].sort(), ["typebox", "typebox/compile"], "checking a theme file builds the schema");
		assert.ok(!seen.checked.requested.some((r) => /highlight|cross-spawn|child_process/.test(r)));
	});

	test("is compiled from the code cache written at install, and without it when the code is not the one cached", () => {
		const probe = (dir) => `
			const vm = require("node:vm");
			const Script = vm.Script;
			const scripts = [];
			vm.Script = class extends Script { constructor(...args) { super(...args); scripts.push(args[1]?.cachedData ? { given: true, rejected: this.cachedDataRejected } : { given: false }); } };
			const { Theme } = require(${JSON.stringify(join(dir, "theme.tau-lite.cjs"))});
			const t = new Theme({ accent: "#336699" }, { selectedBg: 17 }, "256color");
			console.log(JSON.stringify({ scripts, accent: t.fg("accent", "x"), selected: t.bg("selectedBg", "x") }));`;
		const installed = run(probe(themeDir));
		assert.deepEqual(installed.scripts, [{ given: true, rejected: false }], "this Node accepts the cache postinstall wrote");
		// A copy: the code file's modification time differs from the one the cache was taken of.
		const copy = mkdtempSync(join(scratch, "copy-"));
		for (const file of files) copyFileSync(join(themeDir, file), join(copy, file));
		const copied = run(probe(copy));
		assert.deepEqual(copied.scripts, [{ given: false }], "a cache not taken of this code file is not used");
		assert.deepEqual(copied, { ...installed, scripts: copied.scripts });
		const theirs = new (require(join(themeDir, "theme.js")).Theme)({ accent: "#336699" }, { selectedBg: 17 }, "256color");
		assert.deepEqual([installed.accent, installed.selected], [theirs.fg("accent", "x"), theirs.bg("selectedBg", "x")]);
		assert.ok(readFileSync(join(themeDir, "theme.tau-lite.code.v8")).length > 1000);
	});
});
