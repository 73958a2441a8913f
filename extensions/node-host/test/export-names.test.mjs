// lib/export-names.json drives the lazy facades of lib/packages.mjs: it must match the installed
// pi packages, and each export it places in a module must be the very binding the package exports.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { declaredValue } from "../lib/packages.mjs";
import { exportTable } from "../scripts/gen-export-names.mjs";

const stored = JSON.parse(readFileSync(new URL("../lib/export-names.json", import.meta.url), "utf8"));

test("lib/export-names.json is current (else run scripts/gen-export-names.mjs)", async () => {
	const table = await exportTable();
	assert.deepEqual(stored, table);
	for (const [name, { modules }] of Object.entries(table)) {
		const entry = fileURLToPath(import.meta.resolve(`@earendil-works/${name}`));
		const whole = await import(`@earendil-works/${name}`);
		for (const [exportName, declared] of Object.entries(modules)) {
			assert.equal(declaredValue(entry, declared), whole[exportName], `${name}: ${exportName}`);
		}
	}
});
