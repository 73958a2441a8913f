// Checks docs/extensions.md's coverage table against pi's own type definitions of the extension
// API, as installed with the host: every member pi declares must have a row, every row must name
// a member pi still declares, and every row must say how it stands (a test that shows it, or why
// not). When the host moves to a newer pi, what that version adds shows up here as missing rows.
//
// The .d.ts files are read with a small, tolerant parser (no TypeScript dependency): interface
// and class bodies, `Pick<…>` / `Omit<…>` of them, type-literal unions, and the `on(event: "…")`
// overloads of ExtensionAPI.

import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..", "..");
const dist = join(here, "..", "node_modules", "@earendil-works", "pi-coding-agent", "dist", "core");
const DOC = join(repo, "docs", "extensions.md");
const SECTION = "## Coverage of pi 0.79's extension API";

// ---- A tolerant reader of declaration files -------------------------------------------------

function stripComments(source) {
	// Block comments anywhere; line comments only where they take the whole line, so a `//` in a
	// string literal on a code line survives.
	return source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

/** The text between the brace at `open` and its match. */
function braced(text, open) {
	let depth = 0;
	for (let i = open; i < text.length; i++) {
		if (text[i] === "{") depth++;
		else if (text[i] === "}" && --depth === 0) return text.slice(open + 1, i);
	}
	throw new Error(`unbalanced braces after offset ${open}`);
}

/** Splits `text` at top-level occurrences of `separator` (outside (), [], {} and <…> of generics). */
function splitTop(text, separator) {
	const parts = [];
	let depth = 0;
	let start = 0;
	for (let i = 0; i < text.length; i++) {
		const c = text[i];
		if ("([{".includes(c)) depth++;
		else if (")]}".includes(c)) depth--;
		else if (c === "<") depth++;
		else if (c === ">" && text[i - 1] !== "=") depth--;
		else if (depth === 0 && c === separator) {
			parts.push(text.slice(start, i));
			start = i + 1;
		}
	}
	parts.push(text.slice(start));
	return parts.map((p) => p.trim()).filter(Boolean);
}

/** Member statements of an interface/class/type-literal body: `{name, text}` per statement. */
function statements(body) {
	const out = [];
	for (const statement of splitTop(body, ";")) {
		const text = statement.replace(/\s+/g, " ");
		if (/^(private|protected|static)\b/.test(text) || /^constructor\b/.test(text)) continue;
		const match = /^(?:readonly\s+)?(?:get\s+|set\s+)?([A-Za-z_$][\w$]*)\s*\??\s*[(<:]/.exec(text);
		if (match) out.push({ name: match[1], text });
	}
	return out;
}

const unique = (list) => [...new Set(list)];

class Declarations {
	constructor(files) {
		this.sources = files.map((file) => stripComments(readFileSync(file, "utf8")));
		this.source = this.sources.join("\n");
	}

	/** `{body, extends}` of `interface name` or `class name`, or undefined. */
	container(name) {
		const re = new RegExp(`(?:^|\\n)\\s*(?:export\\s+)?(?:declare\\s+)?(?:interface|class)\\s+${name}\\b([^{]*)\\{`);
		const match = re.exec(this.source);
		if (!match) return undefined;
		const heading = match[1];
		const body = braced(this.source, match.index + match[0].length - 1);
		const ext = /\bextends\s+(.+)$/.exec(heading.trim());
		return { body, extends: ext ? splitTop(ext[1], ",") : [] };
	}

	/** The right-hand side of `type name = …;`, or undefined. */
	alias(name) {
		const re = new RegExp(`(?:^|\\n)\\s*(?:export\\s+)?(?:declare\\s+)?type\\s+${name}\\b(?:<[^=]*>)?\\s*=`);
		const match = re.exec(this.source);
		if (!match) return undefined;
		const rest = this.source.slice(match.index + match[0].length);
		return splitTop(rest, ";")[0];
	}

	/** The member names a type offers directly (own members of an interface; the picked names of
	 * `Pick`; the kept names of `Omit`; every field of a union of type literals). */
	membersOf(type) {
		type = type.trim();
		const pick = /^(Pick|Omit)<\s*(\w+)\s*,\s*([^>]+)>$/.exec(type);
		if (pick) {
			const names = [...pick[3].matchAll(/"([^"]+)"/g)].map((m) => m[1]);
			if (pick[1] === "Pick") return names;
			return this.membersOf(pick[2]).filter((name) => !names.includes(name));
		}
		const container = this.container(type);
		if (container) return unique(statements(container.body).map((s) => s.name));
		const alias = this.alias(type);
		if (alias === undefined) throw new Error(`pi's definitions have no type ${type}`);
		if (alias.includes("{")) {
			const fields = [];
			for (const part of splitTop(alias, "|")) {
				if (part.startsWith("{")) fields.push(...statements(braced(part, 0)).map((s) => s.name));
			}
			return unique(fields);
		}
		if (/^[A-Z]\w*(<.*>)?$/.test(alias) || /^(Pick|Omit)</.test(alias)) return this.membersOf(alias);
		return []; // `unknown` and other opaque results: the whole value is the result
	}

	/** ExtensionAPI's `on(event: "name", handler: H)` overloads: `[{name, result}]`, `result` the
	 * result type a handler may return (undefined when it returns nothing). */
	eventOverloads() {
		const api = this.container("ExtensionAPI");
		const events = [];
		for (const { name, text } of statements(api.body)) {
			if (name !== "on") continue;
			const match = /^on\(\s*event:\s*"([^"]+)"\s*,\s*handler:\s*(.+)\):\s*void$/.exec(text);
			if (!match) throw new Error(`cannot read the overload ${text}`);
			events.push({ name: match[1], result: this.handlerResult(match[2].trim()) });
		}
		return events;
	}

	handlerResult(handler) {
		const generic = /^ExtensionHandler<\s*\w+\s*(?:,\s*(\w+)\s*)?>$/.exec(handler);
		if (generic) return generic[1];
		const alias = this.alias(handler);
		if (alias === undefined) throw new Error(`cannot read the handler type ${handler}`);
		const returned = alias.slice(alias.lastIndexOf("=>") + 2);
		return /\b(?!Promise\b)([A-Z]\w*)/.exec(returned)?.[1];
	}

	/** Every `type: "…"` literal of an interface in types.d.ts (the first file): the event names
	 * pi's payloads use (the session manager's entry types are in another file). */
	eventTypeLiterals() {
		return unique([...this.sources[0].matchAll(/\n\s*type:\s*"([a-z_]+)";/g)].map((m) => m[1]));
	}
}

// ---- What pi 0.79 declares ------------------------------------------------------------------

const pi = new Declarations([
	join(dist, "extensions", "types.d.ts"),
	join(dist, "session-manager.d.ts"),
	join(dist, "model-registry.d.ts"),
	join(dist, "event-bus.d.ts"),
]);

/** Table heading (the first code span of a `###` heading) → the members pi declares for it. */
function declared() {
	const tables = {
		ExtensionAPI: pi.membersOf("ExtensionAPI"),
		ExtensionContext: pi.membersOf("ExtensionContext"),
		ExtensionCommandContext: pi.membersOf("ExtensionCommandContext"),
		ReplacedSessionContext: pi.membersOf("ReplacedSessionContext"),
		ExtensionUIContext: pi.membersOf("ExtensionUIContext"),
		ReadonlySessionManager: pi.membersOf("ReadonlySessionManager"),
		ModelRegistry: pi.membersOf("ModelRegistry"),
		EventBus: pi.membersOf("EventBus"),
		ToolDefinition: pi.membersOf("ToolDefinition"),
		RegisteredCommand: pi.membersOf('Omit<RegisteredCommand, "name" | "sourceInfo">'),
	};
	// Events: each name, and `name.field` for each field of the result its handlers may return.
	const overloads = pi.eventOverloads();
	const events = [];
	for (const name of unique([...overloads.map((o) => o.name), ...pi.eventTypeLiterals()])) {
		events.push(name);
		const result = overloads.find((o) => o.name === name)?.result;
		if (result) events.push(...pi.membersOf(result).map((field) => `${name}.${field}`));
	}
	tables.events = events;
	return tables;
}

// ---- What the table says --------------------------------------------------------------------

const STATUSES = ["supported", "partial", "not supported"];

function readTable() {
	const doc = readFileSync(DOC, "utf8");
	const start = doc.indexOf(`\n${SECTION}\n`);
	assert.notEqual(start, -1, `docs/extensions.md has no section "${SECTION}"`);
	const rest = doc.slice(start + SECTION.length + 2);
	const end = rest.search(/\n## /);
	const section = end === -1 ? rest : rest.slice(0, end);
	const tables = {};
	let current;
	for (const line of section.split("\n")) {
		const heading = /^### .*?`([^`]+)`/.exec(line);
		if (heading) {
			current = tables[heading[1]] = [];
			continue;
		}
		if (!current || !line.startsWith("|") || /^\|\s*-/.test(line) || /^\|\s*member\s*\|/.test(line)) continue;
		const cells = splitRow(line);
		const member = /^`([^`]+)`/.exec(cells[0] ?? "")?.[1];
		current.push({ line, member, status: cells[1], shownBy: cells[2] ?? "" });
	}
	return tables;
}

/** Cells of a Markdown table row; `|` inside code spans does not split. */
function splitRow(line) {
	const cells = [];
	let cell = "";
	let code = false;
	for (const c of line.trim().replace(/^\||\|$/g, "")) {
		if (c === "`") code = !code;
		if (c === "|" && !code) {
			cells.push(cell.trim());
			cell = "";
		} else cell += c;
	}
	cells.push(cell.trim());
	return cells;
}

/** The tests a cell cites, as `file::name` code spans. */
function citations(text) {
	return [...text.matchAll(/`([\w.-]+\.(?:test\.mjs|rs))::([^`]+)`/g)].map((m) => ({ file: m[1], name: m[2] }));
}

function citationExists({ file, name }) {
	if (file.endsWith(".test.mjs")) {
		const path = join(here, file);
		if (!existsSync(path)) return false;
		const source = readFileSync(path, "utf8");
		return source.includes(JSON.stringify(name)) || source.includes(`'${name}'`);
	}
	const path = join(repo, "crates", "tau", "tests", "rpc", file);
	return existsSync(path) && new RegExp(`\\bfn ${name}\\(`).test(readFileSync(path, "utf8"));
}

// ---- The checks -----------------------------------------------------------------------------

describe("the coverage table of pi's extension API (docs/extensions.md)", () => {
	const expected = declared();
	const table = readTable();

	test("pi's definitions are read (the parser still understands them)", () => {
		assert.ok(expected.ExtensionAPI.includes("registerTool") && expected.ExtensionAPI.includes("on"));
		assert.ok(expected.ExtensionUIContext.includes("theme"));
		assert.ok(expected.ReadonlySessionManager.includes("getBranch"));
		assert.ok(expected.events.includes("tool_call.block"));
		assert.ok(expected.events.includes("input.action"));
		for (const [name, members] of Object.entries(expected)) assert.ok(members.length > 0, `${name} has no members`);
	});

	for (const name of Object.keys(expected)) {
		test(`${name}: one row per member pi 0.79 declares, and no other`, () => {
			const rows = table[name];
			assert.ok(rows, `docs/extensions.md has no table headed \`${name}\` in "${SECTION}"`);
			const listed = rows.map((row) => row.member);
			const missing = expected[name].filter((member) => !listed.includes(member));
			const extra = listed.filter((member) => !expected[name].includes(member));
			const twice = listed.filter((member, i) => listed.indexOf(member) !== i);
			assert.deepEqual(
				{ missing, extra, twice },
				{ missing: [], extra: [], twice: [] },
				`${name}: add rows for what pi declares (missing), remove rows pi no longer has (extra)`,
			);
		});

		test(`${name}: every row has a status and a test or a reason`, () => {
			const problems = [];
			for (const row of table[name] ?? []) {
				if (!STATUSES.includes(row.status)) problems.push(`${row.member}: status "${row.status}" is not one of ${STATUSES.join(", ")}`);
				const cited = citations(row.shownBy);
				for (const citation of cited) {
					if (!citationExists(citation)) problems.push(`${row.member}: no test ${citation.file}::${citation.name}`);
				}
				if (row.status !== "not supported" && cited.length === 0) problems.push(`${row.member}: ${row.status} but no test cited`);
				if (row.status !== "supported" && !/\bT\d+\b|[a-z]{3,}/.test(row.shownBy.replace(/`[^`]*`/g, ""))) {
					problems.push(`${row.member}: ${row.status} without a reason`);
				}
			}
			assert.deepEqual(problems, []);
		});
	}

	test("no table for an interface the checker does not know", () => {
		assert.deepEqual(
			Object.keys(table).filter((name) => !(name in expected)),
			[],
		);
	});
});

// `node test/coverage.test.mjs --list` prints what pi declares, to start a table from.
if (process.argv.includes("--list")) {
	for (const [name, members] of Object.entries(declared())) console.log(`${name} (${members.length}): ${members.join(", ")}`);
}
