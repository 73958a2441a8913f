// How the host reaches the packages installed beside it (lib/packages.mjs): one TypeBox for the
// host, pi's packages and every extension, loaded from the CommonJS file scripts/bundle-typebox.mjs
// writes, with its code cache; alias targets resolved as Node would; jiti started without the
// builtins it does not use.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { resolvePackage } from "../lib/packages.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const lib = join(here, "..", "lib");
const libUrl = (file) => JSON.stringify(pathToFileURL(join(lib, file)).href);
const hostRequire = createRequire(join(lib, "packages.mjs"));
/** `specifier` as the host resolves it, for a script that runs elsewhere. */
const resolved = (specifier) => JSON.stringify(pathToFileURL(hostRequire.resolve(specifier)).href);
const scratch = mkdtempSync(join(tmpdir(), "tau-node-host-packages-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Runs `script` (an ES module) in a fresh Node, as the host is, and returns what it printed as JSON. */
function run(script) {
	const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", cwd: scratch, env: { ...process.env, PI_CODING_AGENT_DIR: "" } });
	assert.equal(child.status, 0, child.stderr);
	return JSON.parse(child.stdout);
}

test("an extension, pi's packages and the host share one TypeBox, loaded with its code cache", () => {
	const report = run(`
		import { createRequire } from "node:module";
		const { newJiti } = await import(${libUrl("packages.mjs")});
		const { codeCacheUse } = await import(${libUrl("code-cache.mjs")});
		const jiti = await newJiti(false);
		const ext = (await jiti.import(${JSON.stringify(join(here, "fixtures", "typebox-identity.ts"))}, { default: true }))();
		const native = await import(${resolved("typebox")});
		const required = createRequire(${libUrl("packages.mjs")})("typebox");
		const type = await import(${resolved("typebox/type")});
		const piHelpers = await import(${JSON.stringify(pathToFileURL(join(here, "..", "node_modules", "@earendil-works", "pi-ai", "dist", "utils", "typebox-helpers.js")).href)});
		console.log(JSON.stringify({
			extensionAndImport: ext.Type === native.Type,
			sinclairAndTypebox: ext.SinclairType === ext.Type,
			importAndRequire: native.Type === required.Type,
			acrossEntryPoints: type.Any === native.Any && (await import(${resolved("typebox/compile")})).Compile === ext.Compile,
			piSchemaChecks: ext.Value.Check(ext.fromPi, "a") && !ext.Value.Check(ext.fromPi, "c") && ext.Compile(ext.fromPi).Check("b"),
			piHelpersLoaded: typeof piHelpers.StringEnum === "function",
			use: Object.fromEntries(Object.entries(codeCacheUse()).map(([file, use]) => [file.split("/").pop(), use])),
		}));
	`);
	assert.deepEqual(
		{ ...report, use: report.use["tau-typebox.cjs"] },
		{ extensionAndImport: true, sinclairAndTypebox: true, importAndRequire: true, acrossEntryPoints: true, piSchemaChecks: true, piHelpersLoaded: true, use: "used" },
	);
});

test("TypeBox's entry points re-export one CommonJS file", () => {
	for (const subpath of ["", "/compile", "/value", "/type", "/schema", "/guard", "/error", "/system", "/format"]) {
		const file = hostRequire.resolve(`typebox${subpath}`);
		const esm = file.replace(/\.mjs$/, ".tau-esm.mjs");
		const report = run(`
			const wrapper = await import(${JSON.stringify(pathToFileURL(file).href)});
			const original = await import(${JSON.stringify(pathToFileURL(esm).href)});
			console.log(JSON.stringify({ wrapper: Object.keys(wrapper).sort(), original: Object.keys(original).sort() }));
		`);
		assert.deepEqual(report.wrapper, report.original, `typebox${subpath} exports the names it did`);
	}
});

test("each part of TypeBox's CommonJS file is made once, however often it is read", () => {
	const report = run(`
		import { createRequire } from "node:module";
		const { requireWithCodeCache } = await import(${libUrl("code-cache.mjs")});
		const file = createRequire(${libUrl("packages.mjs")}).resolve("typebox").replace(/[^/]*$/, "tau-typebox.cjs");
		const parts = ["index", "compile", "value"];
		const first = parts.map((part) => requireWithCodeCache(file)[part]);
		console.log(JSON.stringify(parts.map((part, i) => requireWithCodeCache(file)[part] === first[i])));
	`);
	// A fresh copy per read cost ~300 property definitions each time (`typebox` was read ~8
	// times while loading an extension that builds a schema).
	assert.deepEqual(report, [true, true, true]);
});

test("cross-spawn runs from its one-file parse module, under its own entry point", () => {
	const root = dirname(hostRequire.resolve("cross-spawn"));
	const report = run(`
		import { createRequire } from "node:module";
		import { readFileSync } from "node:fs";
		const require = createRequire(${libUrl("packages.mjs")});
		const crossSpawn = require("cross-spawn");
		const ran = crossSpawn.sync(process.execPath, ["-e", "process.stdout.write('ran')"], { encoding: "utf8" });
		const loaded = Object.keys(require.cache).filter((file) => file.includes("node_modules")).map((file) => file.split("node_modules/").pop());
		console.log(JSON.stringify({ output: ran.stdout, loaded, bundled: readFileSync(${JSON.stringify(join(root, "lib", "parse.js"))}, "utf8").includes("scripts/bundle-cross-spawn.mjs") }));
	`);
	assert.equal(report.output, "ran");
	assert.equal(report.bundled, true, "lib/parse.js is the bundle");
	// The entry point (which ES modules scan for export names) stays the small original; which,
	// isexe, path-key and shebang-command come inside parse.js.
	assert.deepEqual(report.loaded.sort(), ["cross-spawn/index.js", "cross-spawn/lib/enoent.js", "cross-spawn/lib/parse.js"]);
});

test("alias targets are the files Node's resolvers name", () => {
	for (const specifier of ["@earendil-works/pi-coding-agent", "@earendil-works/pi-agent-core", "@earendil-works/pi-tui", "@earendil-works/pi-ai", "@earendil-works/pi-ai/oauth", "jiti"]) {
		assert.equal(resolvePackage(specifier), fileURLToPath(import.meta.resolve(specifier, pathToFileURL(join(lib, "packages.mjs")).href)), specifier);
	}
	for (const specifier of ["typebox", "typebox/compile", "typebox/value", "jiti"]) {
		assert.equal(resolvePackage(specifier, "require"), hostRequire.resolve(specifier), `${specifier} (require)`);
	}
	assert.throws(() => resolvePackage("no-such-package-here"), /no-such-package-here/);
});

test("jiti starts without the builtins it uses only on a transpile-cache miss or for debugging", () => {
	const cacheDir = join(scratch, "jiti-cache");
	const load = () =>
		run(`
			const { newJiti } = await import(${libUrl("packages.mjs")});
			const jiti = await newJiti(${JSON.stringify(cacheDir)});
			const factory = await jiti.import(${JSON.stringify(join(here, "fixtures", "basic.ts"))}, { default: true });
			console.log(JSON.stringify({ loaded: typeof factory, builtins: process.moduleLoadList.filter((m) => /^NativeModule (tty|assert|perf_hooks|fs\\/promises)$/.test(m)) }));
		`);
	assert.equal(load().loaded, "function", "first load, cache miss");
	assert.deepEqual(load(), { loaded: "function", builtins: [] });
});
