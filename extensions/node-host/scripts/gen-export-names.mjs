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
		if (reexports) {
			for (const exportName of names) {
				const found = declaringModule(entry, exportName);
				if (found) modules[exportName] = [relative(dirname(entry), found.file), found.name];
			}
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
