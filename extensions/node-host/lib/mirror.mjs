// Owns the host's copy of tau's state (protocol §5). pi extensions read the session, model and
// tool lists synchronously, so every read is answered from here; tau keeps it current through the
// `state` field of its frames and the host applies its own writes at once.

import { DeferredJson } from "./deferred-json.mjs";
import { randomHex } from "./ids.mjs";

/** The model fields tau keeps an extension's writes to (tau's `ModelPatch`). */
const MODEL_FIELDS = new Set(["name", "reasoning", "contextWindow", "maxTokens"]);

export class Mirror {
	constructor() {
		this.cwd = process.cwd();
		this.model = undefined;
		this.thinkingLevel = "off";
		this.isIdle = true;
		this.hasPendingMessages = false;
		this.activeTools = [];
		this.allTools = [];
		this.commands = [];
		this.sessionId = undefined;
		this.sessionFile = undefined;
		this.sessionName = undefined;
		this.sessionDir = undefined;
		this.header = null;
		this.leafId = null;
		this.contextUsage = undefined;
		this.systemPrompt = "";
		this.systemPromptOptions = undefined;
		this.projectTrusted = true;
		this.availableModels = [];
		// The catalog: an array, or the text of one not parsed yet (see `allModels`).
		this.catalog = [];
		// Model objects as pi hands them out: one per provider and id for the life of the
		// process (extensions key maps by them), and a write to a field tau keeps reaches tau
		// (`update_model`), as a write to pi's registry object changes pi's session.
		this.modelTargets = new Map();
		this.modelObjects = new Map();
		// Writes tau has not echoed yet, by model: a state built before tau applied them does
		// not undo them.
		this.modelWrites = new Map();
		/** Set by the host: reports a write, `(provider, id, patch)`. */
		this.onModelWrite = undefined;
		this.entries = [];
		this.byId = new Map();
		// Entries this process appended that tau's `entries.append` has not carried back yet.
		// tau applies them after what it has already recorded, so they stay on top of every
		// state that arrives before the echo: the mirror never goes back to a leaf without them.
		this.pending = [];
		// Each pending entry's data as JSON when it was appended (the extension may change the
		// object afterwards; tau recorded what it was sent).
		this.pendingData = new WeakMap();
		// Pending entries tau has answered (their id is tau's from then on).
		this.confirmed = new WeakSet();
		// The last `state.version` applied (tau numbers the states it sends each process).
		this.version = 0;
		// setLabel has no reply, so its effect is kept here until tau's entries carry it.
		this.labelOverrides = new Map();
		this.labelsCache = undefined;
	}

	/**
	 * A message sent while idle starts a run, which pi marks at once: the extension's next read
	 * of isIdle() says so before tau's next state arrives. tau's states since carry the truth.
	 */
	runStarting() {
		this.isIdle = false;
	}

	/** tau answered waitForIdle: no run streams. */
	runEnded() {
		this.isIdle = true;
	}

	/** Applies a `state` object: present keys replace, absent keys keep (protocol §5). */
	apply(state) {
		if (!state || typeof state !== "object") return;
		const plain = {
			model: (v) => v ?? undefined,
			thinkingLevel: (v) => v,
			isIdle: (v) => Boolean(v),
			hasPendingMessages: (v) => Boolean(v),
			activeTools: (v) => (Array.isArray(v) ? v : []),
			allTools: (v) => (Array.isArray(v) ? v : []),
			commands: (v) => (Array.isArray(v) ? v : []),
			sessionId: (v) => v ?? undefined,
			sessionFile: (v) => v ?? undefined,
			sessionName: (v) => v ?? undefined,
			sessionDir: (v) => v ?? undefined,
			header: (v) => v ?? null,
			contextUsage: (v) => v ?? undefined,
			systemPrompt: (v) => v ?? "",
			systemPromptOptions: (v) => v ?? undefined,
			projectTrusted: (v) => v !== false,
			availableModels: (v) => (Array.isArray(v) ? v.map((m) => this.modelObject(m)) : []),
			catalog: (v) => (v instanceof DeferredJson ? v : Array.isArray(v) ? v.map((m) => this.modelObject(m)) : []),
		};
		plain.model = (v) => (v ? this.modelObject(v) : undefined);
		// tau sends states in order; one that is not newer than the last (a bug, or a frame
		// replayed) may only add entries, never move the values back.
		const stale = typeof state.version === "number" && state.version <= this.version;
		if (typeof state.version === "number" && !stale) this.version = state.version;
		if (!stale) {
			for (const [key, convert] of Object.entries(plain)) {
				const field = key === "catalog" ? "allModels" : key;
				if (Object.hasOwn(state, field)) this[key] = convert(state[field]);
			}
		}
		if (state.entries && typeof state.entries === "object") this.applyEntries(state.entries, stale);
		if (!stale && Object.hasOwn(state, "leafId")) this.leafId = state.leafId ?? null;
		this.rebasePending();
	}

	/**
	 * Every model tau knows. The catalog may arrive as text (wire.mjs defers parsing it); it is
	 * parsed here on first read. A model that already has its object (from a `model` or
	 * `availableModels` sent since) keeps it as it is: the catalog is older than those.
	 */
	get allModels() {
		if (this.catalog instanceof DeferredJson) {
			let parsed = [];
			try {
				parsed = this.catalog.parse();
			} catch (err) {
				process.stderr.write(`node-host: the model catalog is not JSON: ${err instanceof Error ? err.message : err}\n`);
			}
			this.catalog = (Array.isArray(parsed) ? parsed : []).map((json) => {
				const known = json && typeof json === "object" && this.modelObjects.get(`${json.provider}\u0000${json.id}`);
				return known || this.modelObject(json);
			});
		}
		return this.catalog;
	}

	/** The one object for the model `json` describes, brought up to date in place. */
	modelObject(json) {
		if (!json || typeof json !== "object") return json;
		const key = `${json.provider}\u0000${json.id}`;
		let target = this.modelTargets.get(key);
		if (!target) {
			target = {};
			this.modelTargets.set(key, target);
			this.modelObjects.set(key, new Proxy(target, { set: (t, field, value) => this.writeModel(key, t, field, value) }));
		}
		if (json !== target && json !== this.modelObjects.get(key)) {
			for (const field of Object.keys(target)) if (!Object.hasOwn(json, field)) delete target[field];
			Object.assign(target, json);
			const pending = this.modelWrites.get(key);
			for (const [field, value] of Object.entries(pending ?? {})) {
				if (json[field] === value) delete pending[field];
				else target[field] = value;
			}
		}
		return this.modelObjects.get(key);
	}

	writeModel(key, target, field, value) {
		const before = target[field];
		target[field] = value;
		if (MODEL_FIELDS.has(field) && before !== value && this.onModelWrite) {
			const pending = this.modelWrites.get(key) ?? {};
			pending[field] = value;
			this.modelWrites.set(key, pending);
			this.onModelWrite(target.provider, target.id, { [field]: value });
		}
		return true;
	}

	/** Puts the entries still waiting for tau's echo after tau's leaf, in the order appended. */
	rebasePending() {
		for (const entry of this.pending) {
			const at = this.entries.indexOf(entry);
			if (at !== -1) this.entries.splice(at, 1);
			this.entries.push(entry);
			entry.parentId = this.leafId;
			this.leafId = entry.id;
		}
	}

	/** The pending entry tau's `entry` echoes: the same id once tau answered it, else the
	 * oldest unanswered one with the same type and data (the echo can overtake the answer). */
	pendingEchoedBy(entry) {
		if (this.pending.length === 0) return undefined;
		const byId = this.pending.find((p) => p.id === entry.id);
		if (byId || entry.type !== "custom") return byId;
		const data = JSON.stringify(entry.data);
		return this.pending.find(
			(p) => !this.confirmed.has(p) && p.customType === entry.customType && this.pendingData.get(p) === data,
		);
	}

	applyEntries({ reset, append }, stale = false) {
		if (reset && !stale) {
			this.entries = [];
			this.byId.clear();
			this.labelOverrides.clear();
			for (const entry of this.pending) this.byId.set(entry.id, entry);
		}
		for (const entry of Array.isArray(append) ? append : []) {
			if (!entry || typeof entry !== "object") continue;
			const echoed = this.pendingEchoedBy(entry);
			if (echoed) {
				// tau echoes the entries the host appended itself; keep one copy, tau's.
				this.pending.splice(this.pending.indexOf(echoed), 1);
				this.byId.delete(echoed.id);
				const at = this.entries.indexOf(echoed);
				if (at !== -1) this.entries.splice(at, 1);
			}
			const known = entry.id !== undefined ? this.byId.get(entry.id) : undefined;
			if (known) {
				this.entries[this.entries.indexOf(known)] = entry;
			} else {
				this.entries.push(entry);
			}
			if (entry.id !== undefined) this.byId.set(entry.id, entry);
			if (entry.type === "label") this.labelOverrides.delete(entry.targetId);
			if (entry.type !== "session" && !stale) this.leafId = entry.id ?? this.leafId;
		}
		this.labelsCache = undefined;
	}

	/** Adds a `custom` entry the way pi's appendCustomEntry does, under an id chosen here and
	 * sent with the `append_entry` action (tau keeps it when it is free; `confirmEntryId` takes
	 * tau's otherwise), so the extension can name the new entry at once, as in pi. */
	appendProvisionalCustomEntry(customType, data) {
		let id;
		do id = randomHex(8);
		while (this.byId.has(id));
		const entry = { type: "custom", customType, id, parentId: this.leafId, timestamp: new Date().toISOString() };
		if (data !== undefined) entry.data = data;
		this.entries.push(entry);
		this.byId.set(entry.id, entry);
		this.pending.push(entry);
		this.pendingData.set(entry, JSON.stringify(data));
		this.leafId = entry.id;
		return entry;
	}

	confirmEntryId(entry, id) {
		if (typeof id !== "string" || this.byId.get(entry.id) !== entry) return;
		this.confirmed.add(entry);
		if (id === entry.id) return;
		const provisional = entry.id;
		const echoed = this.byId.get(id);
		this.byId.delete(provisional);
		if (echoed && echoed !== entry) {
			// tau's state already carried the entry; drop the provisional twin.
			this.entries.splice(this.entries.indexOf(entry), 1);
			const at = this.pending.indexOf(entry);
			if (at !== -1) this.pending.splice(at, 1);
		} else {
			// Still pending until tau's state carries it, now under tau's id.
			entry.id = id;
			this.byId.set(id, entry);
		}
		for (const other of this.entries) if (other.parentId === provisional) other.parentId = id;
		if (this.leafId === provisional) this.leafId = id;
	}

	dropProvisionalEntry(entry) {
		if (this.byId.get(entry.id) !== entry) return;
		this.byId.delete(entry.id);
		this.entries.splice(this.entries.indexOf(entry), 1);
		const at = this.pending.indexOf(entry);
		if (at !== -1) this.pending.splice(at, 1);
		for (const other of this.pending) if (other.parentId === entry.id) other.parentId = entry.parentId ?? null;
		if (this.leafId === entry.id) this.leafId = entry.parentId ?? null;
	}

	setLabel(entryId, label) {
		this.labelOverrides.set(entryId, label || undefined);
	}

	labels() {
		if (!this.labelsCache) {
			const labels = new Map();
			for (const entry of this.entries) {
				if (entry.type !== "label") continue;
				if (entry.label) labels.set(entry.targetId, { label: entry.label, timestamp: entry.timestamp });
				else labels.delete(entry.targetId);
			}
			this.labelsCache = labels;
		}
		return this.labelsCache;
	}

	getLabel(id) {
		if (this.labelOverrides.has(id)) return this.labelOverrides.get(id);
		return this.labels().get(id)?.label;
	}

	getBranch(fromId) {
		const path = [];
		const start = fromId ?? this.leafId;
		let current = start ? this.byId.get(start) : undefined;
		const seen = new Set();
		while (current && !seen.has(current)) {
			seen.add(current);
			path.push(current);
			current = current.parentId ? this.byId.get(current.parentId) : undefined;
		}
		return path.reverse();
	}

	getTree() {
		const nodes = new Map();
		const roots = [];
		const entries = this.getEntries();
		for (const entry of entries) {
			const label = this.getLabel(entry.id);
			const node = { entry, children: [], label };
			const stamp = label !== undefined ? this.labels().get(entry.id)?.timestamp : undefined;
			if (stamp !== undefined) node.labelTimestamp = stamp;
			nodes.set(entry.id, node);
		}
		for (const entry of entries) {
			const node = nodes.get(entry.id);
			const parent = entry.parentId === null || entry.parentId === entry.id ? undefined : nodes.get(entry.parentId);
			if (parent) parent.children.push(node);
			else roots.push(node);
		}
		const stack = [...roots];
		while (stack.length) {
			const node = stack.pop();
			node.children.sort((a, b) => Date.parse(a.entry.timestamp) - Date.parse(b.entry.timestamp));
			stack.push(...node.children);
		}
		return roots;
	}

	getEntries() {
		return this.entries.filter((entry) => entry.type !== "session");
	}

	findModel(provider, modelId) {
		const match = (m) => m && m.provider === provider && m.id === modelId;
		return this.allModels.find(match) ?? this.availableModels.find(match) ?? (match(this.model) ? this.model : undefined);
	}

	hasConfiguredAuth(model) {
		return Boolean(model) && this.availableModels.some((m) => m.provider === model.provider && m.id === model.id);
	}
}

/** The read-only SessionManager view extensions get as `ctx.sessionManager` (ext §4.1). */
export function createSessionManagerView(mirror) {
	return {
		getCwd: () => mirror.cwd,
		getSessionDir: () => mirror.sessionDir,
		getSessionId: () => mirror.sessionId,
		getSessionFile: () => mirror.sessionFile,
		getLeafId: () => mirror.leafId,
		getLeafEntry: () => (mirror.leafId ? mirror.byId.get(mirror.leafId) : undefined),
		getEntry: (id) => mirror.byId.get(id),
		getLabel: (id) => mirror.getLabel(id),
		getBranch: (fromId) => mirror.getBranch(fromId),
		getHeader: () => mirror.header ?? null,
		getEntries: () => mirror.getEntries(),
		getTree: () => mirror.getTree(),
		getSessionName: () => mirror.sessionName,
		getChildren: (parentId) => mirror.getEntries().filter((entry) => entry.parentId === parentId),
		isPersisted: () => mirror.sessionFile !== undefined,
	};
}
