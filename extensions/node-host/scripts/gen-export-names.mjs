// Regenerates lib/export-names.json, which the lazy facades of lib/packages.mjs need before the
// packages are loaded: for each pi package served through a facade, its export names, and for a
// package whose entry module only re-exports (`export { … } from "./…"`, no code of its own), the
// module that declares each export, followed through further re-exports, and its name there.
// `npm test` checks that the file still matches the installed packages.
//
//   node scripts/gen-export-names.mjs

import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { LAZY_PACKAGES } from "../lib/packages.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

export async function exportTable() {
	const table = {};
	for (const name of LAZY_PACKAGES) {
		const entry = fileURLToPath(import.meta.resolve(`@earendil-works/${name}`));
		const names = Object.keys(await import(`@earendil-works/${name}`)).sort();
		const reexports = parseReexports(entry);
		const modules = {};
		for (const exportName of names) {
			if (reexports) {
				const found = declaringModule(entry, exportName);
				if (found) modules[exportName] = [relative(dirname(entry), found.file), found.name];
				continue;
			}
			// The entry runs code of its own (pi-ai registers its image providers): an export may
			// still be loaded alone when nothing that code reaches is reachable from the module
			// declaring it, so it cannot tell whether that code ran (StringEnum, TypeBox's Type).
			const found = isolatedDeclaration(entry, exportName);
			if (found?.package && sideEffects(entry)) modules[exportName] = [`npm:${found.package}`, found.name];
			else if (found && !touches(found.file, sideEffects(entry))) modules[exportName] = [relative(dirname(entry), found.file), found.name];
		}
		table[name] = { names, modules };
	}
	return table;
}

/** A module's `export { a, b as c } from "./x.js"` statements as exported name → [file, name],
 * or undefined when it has any other statement (its own code, `export *`, imports). */
function parseReexports(file) {
	const source = readFileSync(file, "utf8")
		.replace(/\/\*[\s\S]*?\*\//g, "")
		.replace(/^\s*\/\/.*$/gm, "");
	const map = new Map();
	const rest = source.replace(/export\s*\{([^}]*)\}\s*from\s*"(\.[^"]+)"\s*;?/g, (_, list, from) => {
		for (const item of list.split(",").map((s) => s.trim()).filter(Boolean)) {
			const [local, exported = local] = item.split(/\s+as\s+/);
			map.set(exported, [join(dirname(file), from), local]);
		}
		return "";
	});
	return rest.trim() === "" ? map : undefined;
}

/** The package's own modules a module reaches through its relative imports and re-exports,
 * itself included. */
function closure(file, seen = new Set()) {
	if (seen.has(file)) return seen;
	seen.add(file);
	const source = readFileSync(file, "utf8");
	for (const [, from] of source.matchAll(/(?:from|import)\s*"(\.{1,2}\/[^"]+)"/g)) closure(join(dirname(file), from), seen);
	return seen;
}

/** What the entry's own code can reach: the closure of the modules it imports (not the ones
 * it only re-exports). */
function sideEffects(entry) {
	const source = readFileSync(entry, "utf8");
	// A bare `import "package";` runs code this walk cannot follow: nothing is loaded alone.
	if (/^\s*import\s*"[^.][^"]*"/m.test(source)) return undefined;
	const reached = new Set();
	for (const [, from] of source.matchAll(/^\s*import\s[^;]*?from\s*"(\.{1,2}\/[^"]+)"/gm)) closure(join(dirname(entry), from), reached);
	return reached;
}

function touches(file, reached) {
	if (!reached) return true;
	for (const module of closure(file)) if (reached.has(module)) return true;
	return false;
}

/** Where `name` comes from, following `export { … } from` and `export * from` chains: a bare
 * package's export (`{package, name}`) or the module of the package that declares it
 * (`{file, name}`); undefined when neither is found, or when two `export *` targets both
 * provide the name. */
function isolatedDeclaration(file, name, depth = 0) {
	if (depth > 8) return undefined;
	const source = readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
	for (const [, list, from] of source.matchAll(/export\s*\{([^}]*)\}\s*from\s*"([^"]+)"/g)) {
		for (const item of list.split(",").map((s) => s.trim()).filter(Boolean)) {
			const [local, exported = local] = item.split(/\s+as\s+/);
			if (exported !== name) continue;
			if (!from.startsWith(".")) return { package: from, name: local };
			return isolatedDeclaration(join(dirname(file), from), local, depth + 1);
		}
	}
	const declared = new RegExp(`export\\s+(?:async\\s+)?(?:function\\*?|class|const|let|var)\\s+${name.replace(/\$/g, "\\$")}\\b`);
	if (declared.test(source)) return { file, name };
	const found = [...source.matchAll(/export\s*\*\s*from\s*"(\.[^"]+)"/g)]
		.map(([, from]) => join(dirname(file), from))
		.filter((target) => exportsName(target, name, depth + 1));
	return found.length === 1 ? isolatedDeclaration(found[0], name, depth + 1) : undefined;
}

/** Whether a module exports `name` itself or through its re-exports. */
function exportsName(file, name, depth) {
	if (depth > 8) return false;
	const source = readFileSync(file, "utf8");
	const escaped = name.replace(/\$/g, "\\$");
	if (new RegExp(`export\\s+(?:async\\s+)?(?:function\\*?|class|const|let|var)\\s+${escaped}\\b`).test(source)) return true;
	if (new RegExp(`export\\s*\\{[^}]*\\b${escaped}\\b[^}]*\\}`).test(source)) return true;
	return [...source.matchAll(/export\s*\*\s*from\s*"(\.[^"]+)"/g)].some(([, from]) => exportsName(join(dirname(file), from), name, depth + 1));
}

/** Follows an export through re-exporting modules to the module that declares it. */
function declaringModule(file, name) {
	for (let depth = 0; depth < 8; depth++) {
		const source = readFileSync(file, "utf8");
		const reexport = [...source.matchAll(/export\s*\{([^}]*)\}\s*from\s*"(\.[^"]+)"/g)]
			.flatMap(([, list, from]) => list.split(",").map((s) => s.trim()).filter(Boolean).map((item) => [item.split(/\s+as\s+/), from]))
			.find(([[local, exported = local]]) => exported === name);
		if (reexport) {
			[file, name] = [join(dirname(file), reexport[1]), reexport[0][0]];
			continue;
		}
		if (/export\s*\*/.test(source)) return undefined;
		const declared = new RegExp(`export\\s+(?:async\\s+)?(?:function\\*?|class|const|let|var)\\s+${name.replace(/\$/g, "\\$")}\\b`);
		return declared.test(source) ? { file, name } : undefined;
	}
	return undefined;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
	const table = await exportTable();
	writeFileSync(join(root, "lib", "export-names.json"), `${JSON.stringify(table, null, "\t")}\n`);
	for (const [name, { names, modules }] of Object.entries(table)) console.log(`${name}: ${names.length} exports, ${Object.keys(modules).length} by module`);
}
