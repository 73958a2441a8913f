// Owns one instance of one extension: the `pi` object its factory receives (ext §2.2), the
// tables its registrations fill, and the manifest tau learns them from (protocol §3). Before
// the factory generation is bound, action methods throw pi's "not initialized" error; afterwards
// they become `action` frames, and registrations become `register` frames.

import { createModelRegistry, messageFields } from "./context.mjs";
import { getExecCommand } from "./packages.mjs";
import { request, send } from "./wire.mjs";

const NOT_INITIALIZED = "Extension runtime not initialized. Action methods cannot be called during extension loading.";
export const STALE_MESSAGE =
	"This extension ctx is stale after session replacement or reload. Do not use a captured pi or command ctx after ctx.newSession(), ctx.fork(), ctx.switchSession(), or ctx.reload(). For newSession, fork, and switchSession, move post-replacement work into withSession and use the ctx passed to withSession. For reload, do not use the old ctx after await ctx.reload().";

/** A set of instances created together (startup, or one `reinitialize`). pi binds the action
 * methods once every factory of the set has run; until then they throw. */
export class Generation {
	/** `bus`: the bus, or a function that makes it when an extension first reads `pi.events`. */
	constructor(bus) {
		this.makeBus = typeof bus === "function" ? bus : undefined;
		this.madeBus = typeof bus === "function" ? undefined : bus;
		this.bound = false;
	}

	get bus() {
		if (this.makeBus) {
			this.madeBus = this.makeBus();
			this.makeBus = undefined;
		}
		return this.madeBus;
	}
}

export class ExtensionInstance {
	constructor(host, slot, generation) {
		this.host = host;
		this.slot = slot;
		this.path = slot.path;
		this.generation = generation;
		this.handlers = new Map();
		this.tools = new Map();
		this.commands = new Map();
		this.flags = new Map();
		this.shortcuts = new Map();
		this.messageRenderers = new Map();
		this.providers = new Map();
		this.staleMessage = undefined;
		// Set once the manifest has gone to tau; later registrations travel as `register` frames.
		this.announced = false;
		this.modelRegistry = createModelRegistry(host, this);
		this.api = this.createApi();
	}

	assertActive() {
		if (this.staleMessage) throw new Error(this.staleMessage);
	}

	invalidate() {
		this.staleMessage ??= STALE_MESSAGE;
	}

	assertBound() {
		if (!this.generation.bound) throw new Error(NOT_INITIALIZED);
	}

	action(action, fields = {}) {
		send({ type: "action", extension: this.path, action, ...fields });
	}

	announce(fields) {
		if (this.announced) send({ type: "register", extension: this.path, ...fields });
	}

	createApi() {
		const self = this;
		const host = this.host;
		const mirror = host.mirror;
		return {
			on(event, handler) {
				self.assertActive();
				const list = self.handlers.get(event);
				if (list) list.push(handler);
				else {
					self.handlers.set(event, [handler]);
					self.announce({ events: [event] });
				}
				// pi 1.x returns an unsubscribe function; 0.79 returns nothing, so offering one is
				// harmless and lets extensions written for 1.x load.
				return () => {
					const current = self.handlers.get(event);
					const index = current ? current.indexOf(handler) : -1;
					if (index !== -1) current.splice(index, 1);
				};
			},
			registerTool(tool) {
				self.assertActive();
				self.tools.set(tool.name, tool);
				if (self.announced) {
					// pi activates a tool name it has not seen before as soon as it is registered.
					const manifest = toolManifest(tool);
					if (!mirror.allTools.some((t) => t.name === tool.name)) {
						mirror.allTools = [...mirror.allTools, { name: tool.name, description: tool.description, parameters: manifest.parameters, promptGuidelines: tool.promptGuidelines }];
						if (!mirror.activeTools.includes(tool.name)) mirror.activeTools = [...mirror.activeTools, tool.name];
					}
					self.announce({ tools: [manifest] });
				}
			},
			registerCommand(name, options) {
				self.assertActive();
				self.commands.set(name, { name, ...options });
				self.announce({ commands: [commandManifest(name, options)] });
			},
			registerShortcut(shortcut, options) {
				self.assertActive();
				self.shortcuts.set(shortcut, { shortcut, ...options });
				self.announce({ shortcuts: [shortcut] });
			},
			registerFlag(name, options) {
				self.assertActive();
				self.flags.set(name, { name, ...options });
				if (options?.default !== undefined && !self.slot.flagValues.has(name)) self.slot.flagValues.set(name, options.default);
				self.announce({ flags: [flagManifest(name, options)] });
			},
			registerMessageRenderer(customType, renderer) {
				self.assertActive();
				self.messageRenderers.set(customType, renderer);
			},
			getFlag(name) {
				self.assertActive();
				return self.flags.has(name) ? self.slot.flagValues.get(name) : undefined;
			},
			sendMessage(message, options) {
				self.assertActive();
				self.assertBound();
				// Fire-and-forget as in pi; tau reports a failure as extension_error for `<runtime>`.
				self.action("send_message", messageFields(message, options));
				// A turn it triggers starts at once in pi: the handler reads isIdle() false next.
				if (options?.triggerTurn) mirror.runStarting();
			},
			sendUserMessage(content, options) {
				self.assertActive();
				self.assertBound();
				self.action("send_user_message", { content, deliverAs: options?.deliverAs });
				mirror.runStarting();
			},
			appendEntry(customType, data) {
				self.assertActive();
				self.assertBound();
				const entry = mirror.appendProvisionalCustomEntry(customType, data);
				request({ type: "action", extension: self.path, action: "append_entry", customType, data, entryId: entry.id }).then(
					(answer) => mirror.confirmEntryId(entry, answer?.id),
					(err) => {
						mirror.dropProvisionalEntry(entry);
						process.stderr.write(`${self.path}: appendEntry failed: ${err.message}\n`);
					},
				);
			},
			setSessionName(name) {
				self.assertActive();
				self.assertBound();
				mirror.sessionName = String(name).trim() || undefined;
				self.action("set_session_name", { name });
			},
			getSessionName() {
				self.assertActive();
				self.assertBound();
				return mirror.sessionName;
			},
			setLabel(entryId, label) {
				self.assertActive();
				self.assertBound();
				if (!mirror.byId.has(entryId)) throw new Error(`Entry ${entryId} not found`);
				mirror.setLabel(entryId, label);
				self.action("set_label", { entryId, label });
			},
			exec(command, args, options) {
				self.assertActive();
				return getExecCommand().then((execCommand) => execCommand(command, args, options?.cwd ?? host.cwd, options));
			},
			getActiveTools() {
				self.assertActive();
				self.assertBound();
				return [...mirror.activeTools];
			},
			getAllTools() {
				self.assertActive();
				self.assertBound();
				return mirror.allTools.map((tool) => ({ ...tool }));
			},
			setActiveTools(toolNames) {
				self.assertActive();
				self.assertBound();
				const names = Array.isArray(toolNames) ? toolNames : [];
				// pi ignores names it does not know; tau does the same with the list it receives.
				const known = new Set([...mirror.allTools.map((t) => t.name), ...host.allRegisteredToolNames()]);
				mirror.activeTools = known.size ? [...new Set(names.filter((n) => known.has(n)))] : [...new Set(names)];
				self.action("set_active_tools", { names });
			},
			getCommands() {
				self.assertActive();
				self.assertBound();
				return mirror.commands.map((command) => ({ ...command }));
			},
			setModel(model) {
				self.assertActive();
				if (!self.generation.bound) return Promise.reject(new Error("Extension runtime not initialized"));
				return request({ type: "action", extension: self.path, action: "set_model", provider: model?.provider, modelId: model?.id }).then((ok) => {
					if (ok === true) mirror.model = mirror.findModel(model.provider, model.id) ?? model;
					return ok === true;
				});
			},
			getThinkingLevel() {
				self.assertActive();
				self.assertBound();
				return mirror.thinkingLevel;
			},
			setThinkingLevel(level) {
				self.assertActive();
				self.assertBound();
				mirror.thinkingLevel = level;
				self.action("set_thinking_level", { level });
			},
			registerProvider(name, config) {
				self.assertActive();
				const data = providerData(self.path, name, config);
				if (self.generation.bound) self.action("register_provider", { name, config: data });
				else self.providers.set(name, data);
			},
			unregisterProvider(name) {
				self.assertActive();
				if (self.generation.bound) self.action("unregister_provider", { name });
				else self.providers.delete(name);
			},
			get events() {
				return self.generation.bus;
			},
		};
	}

	manifest() {
		const manifest = {
			tools: [...this.tools.values()].map(toolManifest),
			commands: [...this.commands.entries()].map(([name, options]) => commandManifest(name, options)),
			flags: [...this.flags.entries()].map(([name, options]) => flagManifest(name, options)),
			events: [...this.handlers.keys()],
			shortcuts: [...this.shortcuts.keys()],
		};
		if (this.providers.size) manifest.providers = [...this.providers.entries()].map(([name, config]) => ({ name, config }));
		return manifest;
	}
}

/** TypeBox keeps its own markers in non-enumerable keys, so a JSON round trip yields the plain
 * JSON Schema pi sends to providers. */
function jsonSchema(schema) {
	return schema === undefined ? { type: "object", properties: {} } : JSON.parse(JSON.stringify(schema));
}

export function toolManifest(tool) {
	const manifest = { name: tool.name, label: tool.label, description: tool.description, parameters: jsonSchema(tool.parameters) };
	if (tool.promptSnippet !== undefined) manifest.promptSnippet = tool.promptSnippet;
	if (tool.promptGuidelines !== undefined) manifest.promptGuidelines = tool.promptGuidelines;
	if (tool.executionMode !== undefined) manifest.executionMode = tool.executionMode;
	if (typeof tool.prepareArguments === "function") manifest.prepareArguments = true;
	return manifest;
}

function commandManifest(name, options) {
	const manifest = { name };
	if (options?.description !== undefined) manifest.description = options.description;
	return manifest;
}

function flagManifest(name, options) {
	const manifest = { name, type: options?.type };
	if (options?.default !== undefined) manifest.default = options.default;
	if (options?.description !== undefined) manifest.description = options.description;
	return manifest;
}

/** Provider configs cross the wire as data; their function members (`streamSimple`, `oauth`)
 * would need a streaming bridge that protocol 1 does not have. */
function providerData(path, name, config) {
	const dropped = [];
	const data = JSON.parse(
		JSON.stringify(config ?? {}, (key, value) => {
			if (typeof value === "function") {
				dropped.push(key);
				return undefined;
			}
			return value;
		}),
	);
	if (dropped.length) {
		process.stderr.write(`${path}: provider "${name}": ${dropped.join(", ")} cannot be bridged to tau and was dropped\n`);
	}
	return data;
}
