// Owns the set of hosted extensions: one slot per path (surviving re-instantiation), loading
// each module with jiti as pi 0.79.10 does, creating generations of instances, and finding the
// instance a tau request is for.

import { existsSync, readFileSync } from "node:fs";
import { basename, dirname, join, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { ExtensionInstance, Generation } from "./extension.mjs";
import { createSessionManagerView, Mirror } from "./mirror.mjs";
import { importExtension, loadEventBusFactory, setThemeSetting } from "./packages.mjs";
import { errorMessage } from "./wire.mjs";

/** What survives re-instantiation of one extension path: its CLI flag values and the factory
 * pi would re-run for a session replacement. */
class Slot {
	constructor(path) {
		this.path = path;
		this.flagValues = new Map();
		this.factory = undefined;
		this.instance = undefined;
	}
}

export class Host {
	constructor() {
		this.mirror = new Mirror();
		this.sessionManagerView = createSessionManagerView(this.mirror);
		this.cwd = process.cwd();
		this.mode = "rpc";
		this.hasUI = true;
		this.slots = new Map();
		this.createEventBus = undefined;
	}

	/** `initialize`: load every extension in order and describe each (protocol §2.1). */
	async initialize(frame) {
		if (typeof frame.cwd === "string") this.cwd = frame.cwd;
		if (typeof frame.mode === "string") this.mode = frame.mode;
		this.hasUI = frame.hasUI !== undefined ? Boolean(frame.hasUI) : this.mode === "rpc";
		// getAgentDir() inside pi's packages reads this variable at call time.
		if (typeof frame.agentDir === "string" && !process.env.PI_CODING_AGENT_DIR) process.env.PI_CODING_AGENT_DIR = frame.agentDir;
		this.mirror.cwd = this.cwd;
		this.mirror.apply(frame.state);
		setThemeSetting(readThemeSetting(process.env.PI_CODING_AGENT_DIR ?? frame.agentDir, this.cwd, this.mirror.projectTrusted));
		const paths = Array.isArray(frame.extensions) ? frame.extensions : [];
		for (const path of paths) if (!this.slots.has(path)) this.slots.set(path, new Slot(path));
		return { extensions: await this.instantiateAll(paths, { reimport: true }) };
	}

	/** `reinitialize`: pi builds new instances after a session replacement (re-running the cached
	 * factories) or a reload (re-importing the modules); the old ones go stale. */
	async reinitialize(frame) {
		this.mirror.apply(frame.state);
		const reimport = frame.reason === "reload";
		for (const slot of this.slots.values()) slot.instance?.invalidate();
		return { extensions: await this.instantiateAll([...this.slots.keys()], { reimport }) };
	}

	async instantiateAll(paths, { reimport }) {
		if (paths.length) this.createEventBus ??= await loadEventBusFactory();
		// A new bus per generation: pi gives a replaced session a new one; for reload pi keeps the
		// old bus and its stale listeners, which ext §10.3 lets the host fix.
		const createEventBus = this.createEventBus;
		const generation = new Generation(createEventBus && (() => createEventBus()));
		const results = [];
		const created = [];
		for (const path of paths) {
			const slot = this.slots.get(path);
			const outcome = await this.instantiate(slot, generation, reimport);
			if (outcome.error) {
				slot.instance = undefined;
				results.push({ path, error: outcome.error });
			} else {
				slot.instance = outcome.instance;
				created.push(outcome.instance);
				results.push({ path, manifest: outcome.instance.manifest() });
			}
		}
		generation.bound = true;
		for (const instance of created) instance.announced = true;
		return results;
	}

	async instantiate(slot, generation, reimport) {
		if (reimport || !slot.factory) {
			const loaded = await loadFactory(slot.path);
			if (loaded.error) return loaded;
			slot.factory = loaded.factory;
		}
		const instance = new ExtensionInstance(this, slot, generation);
		try {
			await slot.factory(instance.api);
		} catch (err) {
			instance.invalidate();
			return { error: `Failed to load extension: ${errorMessage(err)}` };
		}
		return { instance };
	}

	setFlags(frame) {
		const slot = this.slots.get(frame.extension);
		if (!slot || !frame.values || typeof frame.values !== "object") return;
		for (const [name, value] of Object.entries(frame.values)) slot.flagValues.set(name, value);
	}

	currentInstance(path) {
		return this.slots.get(path)?.instance;
	}

	requireInstance(path) {
		const instance = this.currentInstance(path);
		if (!instance) throw new Error(`Extension is not loaded: ${path}`);
		return instance;
	}

	allRegisteredToolNames() {
		const names = [];
		for (const slot of this.slots.values()) if (slot.instance) names.push(...slot.instance.tools.keys());
		return names;
	}

	/** Which hosted extension a stack trace points into, for errors nobody caught. The first
	 * frame that lies in an extension's file (or, for an `index.*` entry, its directory) wins. */
	attribute(err) {
		const stack = err instanceof Error && typeof err.stack === "string" ? err.stack : "";
		const files = [];
		for (const match of stack.matchAll(/(?:\(|at )((?:file:\/\/)?\/[^():\n]+):\d+:\d+/g)) {
			files.push(match[1].startsWith("file://") ? fileURLToPath(match[1]) : match[1]);
		}
		for (const file of files) {
			for (const path of this.slots.keys()) {
				if (file === path) return path;
				if (/^index\.[cm]?[jt]s$/.test(basename(path)) && file.startsWith(dirname(path) + sep)) return path;
			}
		}
		return undefined;
	}
}

/** Loads one module the way pi's loader does and returns its factory or pi's error text. */
async function loadFactory(path) {
	if (!existsSync(path)) return { error: `Extension path does not exist: ${path}` };
	try {
		const factory = await importExtension(path);
		if (typeof factory !== "function") return { error: `Extension does not export a valid factory function: ${path}` };
		return { factory };
	} catch (err) {
		return { error: `Failed to load extension: ${errorMessage(err)}` };
	}
}

/** The `theme` setting pi's RPC mode passes to initTheme: project settings win over global
 * ones, but only in a trusted project; a "light/dark" pair means "detect". */
function readThemeSetting(agentDir, cwd, projectTrusted) {
	const read = (file) => {
		try {
			return JSON.parse(readFileSync(file, "utf8"))?.theme;
		} catch {
			return undefined;
		}
	};
	const global = agentDir ? read(join(agentDir, "settings.json")) : undefined;
	const project = projectTrusted ? read(join(cwd, ".pi", "settings.json")) : undefined;
	const theme = project ?? global;
	return typeof theme === "string" && !theme.includes("/") ? theme : undefined;
}
