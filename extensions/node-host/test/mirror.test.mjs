// The host's mirror of tau's state on its own (lib/mirror.mjs): its writes stay on top of
// tau's states until tau echoes them, and a state that is not newer moves nothing back.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
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
