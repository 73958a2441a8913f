// The host's mirror of tau's state on its own (lib/mirror.mjs): its writes stay on top of
// tau's states until tau echoes them, and a state that is not newer moves nothing back.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DeferredJson, parseFrame } from "../lib/deferred-json.mjs";
import { randomHex, randomUuid } from "../lib/ids.mjs";
import { Mirror } from "../lib/mirror.mjs";

const message = (id, parentId, role = "assistant") => ({ type: "message", id, parentId, message: { role } });
const mark = (id, parentId, n) => ({ type: "custom", id, parentId, customType: "mark", data: { n } });
const branchIds = (mirror) => mirror.getBranch().map((e) => e.id);

describe("the mirror", () => {
	test("an entry the host appended stays on the branch while tau's older states arrive", () => {
		const mirror = new Mirror();
		mirror.apply({ version: 1, entries: { reset: true, append: [message("u1", null, "user")] }, leafId: "u1" });
		const entry = mirror.appendProvisionalCustomEntry("mark", { n: 1 });
		// tau recorded its assistant message before it carried out the append.
		mirror.apply({ version: 2, entries: { append: [message("a1", "u1")] }, leafId: "a1" });
		assert.deepEqual(branchIds(mirror), ["u1", "a1", entry.id]);
		mirror.confirmEntryId(entry, "m1");
		assert.deepEqual(branchIds(mirror), ["u1", "a1", "m1"]);
		mirror.apply({ version: 3, entries: { append: [mark("m1", "a1", 1)] }, leafId: "m1" });
		assert.deepEqual(branchIds(mirror), ["u1", "a1", "m1"]);
		assert.equal(mirror.getEntries().length, 3, "one copy of the echoed entry");
		assert.equal(mirror.pending.length, 0);
	});

	test("tau's echo may overtake its answer: matched by type and data, one copy kept", () => {
		const mirror = new Mirror();
		mirror.apply({ version: 1, entries: { reset: true, append: [message("u1", null, "user")] }, leafId: "u1" });
		const entry = mirror.appendProvisionalCustomEntry("mark", { n: 7 });
		entry.data.n = 8; // the extension changes its object afterwards; tau recorded 7
		mirror.apply({ version: 2, entries: { append: [mark("m7", "u1", 7)] }, leafId: "m7" });
		mirror.confirmEntryId(entry, "m7");
		assert.deepEqual(branchIds(mirror), ["u1", "m7"]);
		assert.equal(mirror.getEntries().length, 2);
	});

	test("a state that is not newer adds entries but moves no value back", () => {
		const mirror = new Mirror();
		mirror.apply({ version: 5, thinkingLevel: "high", entries: { reset: true, append: [message("u1", null, "user")] }, leafId: "u1" });
		mirror.apply({ version: 4, thinkingLevel: "off", entries: { append: [message("a0", "u1")] }, leafId: "a0" });
		assert.equal(mirror.thinkingLevel, "high");
		assert.equal(mirror.leafId, "u1");
		assert.ok(mirror.getEntries().some((e) => e.id === "a0"));
	});

	test("a failed append leaves no trace", () => {
		const mirror = new Mirror();
		mirror.apply({ version: 1, entries: { reset: true, append: [message("u1", null, "user")] }, leafId: "u1" });
		const entry = mirror.appendProvisionalCustomEntry("mark", { n: 1 });
		mirror.dropProvisionalEntry(entry);
		mirror.apply({ version: 2, entries: { append: [message("a1", "u1")] }, leafId: "a1" });
		assert.deepEqual(branchIds(mirror), ["u1", "a1"]);
	});
});

describe("model objects", () => {
	const big = { provider: "mock", id: "big", name: "Big", contextWindow: 1000000, maxTokens: 1000 };

	test("one object per model, in ctx.model and the lists alike, across states", () => {
		const mirror = new Mirror();
		mirror.apply({ version: 1, model: big, allModels: [big], availableModels: [big] });
		const first = mirror.model;
		assert.equal(mirror.allModels[0], first);
		assert.equal(mirror.availableModels[0], first);
		mirror.apply({ version: 2, model: { ...big, name: "Bigger" } });
		assert.equal(mirror.model, first, "the same object, brought up to date");
		assert.equal(first.name, "Bigger");
	});

	test("a write to a field tau keeps is reported once and survives a state built before it", () => {
		const mirror = new Mirror();
		const writes = [];
		mirror.onModelWrite = (provider, id, patch) => writes.push({ provider, id, patch });
		mirror.apply({ version: 1, model: big, allModels: [big] });
		mirror.model.contextWindow = 200000;
		mirror.model.contextWindow = 200000;
		mirror.model.note = "mine"; // not a model field tau keeps: stays local
		assert.deepEqual(writes, [{ provider: "mock", id: "big", patch: { contextWindow: 200000 } }]);
		mirror.apply({ version: 2, model: big });
		assert.equal(mirror.model.contextWindow, 200000, "a state from before the write does not undo it");
		mirror.apply({ version: 3, model: { ...big, contextWindow: 200000 } });
		mirror.apply({ version: 4, model: { ...big, contextWindow: 300000 } });
		assert.equal(mirror.model.contextWindow, 300000, "once echoed, tau's later values apply");
	});
});

describe("the model catalog", () => {
	const catalog = Array.from({ length: 800 }, (_, i) => ({ id: `m${i}`, name: `Model ${i}`, provider: "p", contextWindow: 1000 + i, maxTokens: 100, reasoning: false }));
	const frameLine = (state) => JSON.stringify({ type: "event", id: "t2", extension: "/x.ts", event: { type: "session_start" }, state: { ...state, allModels: catalog } });

	test("ending a large frame, it stays text until an extension reads it", () => {
		const line = frameLine({ version: 1, projectTrusted: true });
		assert.ok(line.length > 64 * 1024, "the fixture is as large as tau's catalog");
		const frame = parseFrame(line);
		assert.ok(frame.state.allModels instanceof DeferredJson);
		assert.equal(frame.state.projectTrusted, true);
		const mirror = new Mirror();
		mirror.apply(frame.state);
		assert.ok(mirror.catalog instanceof DeferredJson, "not parsed by apply");
		assert.deepEqual(
			mirror.allModels.map((m) => ({ ...m })),
			catalog,
		);
		assert.equal(mirror.findModel("p", "m7").contextWindow, 1007);
	});

	test("a model sent after the catalog keeps its newer values and its object", () => {
		const mirror = new Mirror();
		mirror.apply(parseFrame(frameLine({ version: 1 })).state);
		mirror.apply({ version: 2, model: { ...catalog[3], contextWindow: 5 } });
		const current = mirror.model;
		assert.equal(mirror.findModel("p", "m3"), current, "one object per model");
		assert.equal(current.contextWindow, 5, "the catalog's older value did not come back");
	});

	test("a line not shaped as tau writes it is parsed whole", () => {
		const nested = JSON.stringify({ type: "event", id: "t3", state: { version: 1 }, event: { type: "x", data: "y".repeat(70000), allModels: [1] } });
		assert.deepEqual(parseFrame(nested).event.allModels, [1]);
		assert.equal(parseFrame(nested).state.allModels, undefined);
		const small = JSON.stringify({ type: "event", state: { allModels: [{ id: "a", provider: "b" }] } });
		assert.deepEqual(parseFrame(small).state.allModels, [{ id: "a", provider: "b" }]);
	});
});

describe("ids the host makes up", () => {
	test("UUIDs in the form crypto.randomUUID writes, all different", () => {
		const seen = new Set(Array.from({ length: 1000 }, randomUuid));
		assert.equal(seen.size, 1000);
		for (const id of seen) assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
		assert.match(randomHex(8), /^[0-9a-f]{8}$/);
	});
});
