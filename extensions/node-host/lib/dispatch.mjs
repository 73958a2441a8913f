// Owns what happens inside one extension when tau sends it work: the event result rules of
// ext §3.1/§3.2 applied across that extension's handlers (tau chains the results across
// extensions), tool execution with progress updates, argument preparation and commands.

import { createCommandContext, createContext } from "./context.mjs";
import { errorMessage, send } from "./wire.mjs";

const SESSION_BEFORE = new Set(["session_before_switch", "session_before_fork", "session_before_compact", "session_before_tree"]);

function reportError(instance, event, err) {
	send({ type: "extension_error", extension: instance.path, event, error: errorMessage(err) });
}

/** Runs the extension's handlers for `event` in registration order and returns the extension's
 * combined result (protocol §2.3), or null when it has nothing to say. */
export async function dispatchEvent(host, instance, event, scope) {
	// The live list, as pi iterates it: a handler registered during the dispatch runs in it too.
	const handlers = instance.handlers.get(event.type) ?? [];
	if (handlers.length === 0) return null;
	if (event.type === "project_trust") return projectTrust(instance, event, handlers);
	// pi's `model_select` carries the registry's own model objects: the same ones
	// `ctx.model` and `getAll()` hand out (an extension keys maps by them).
	if (event.type === "model_select") {
		if (event.model) event.model = host.mirror.modelObject(event.model);
		if (event.previousModel) event.previousModel = host.mirror.modelObject(event.previousModel);
	}
	const ctx = createContext(host, instance, scope);
	const rule = RULES[event.type] ?? (SESSION_BEFORE.has(event.type) ? sessionBefore : observe);
	return rule({ host, instance, event, scope, ctx, handlers });
}

/** `project_trust` (ext §1.5, §4.5): asked before the session exists, with a context that has
 * no session and no UI (dialogs answer their defaults, `notify` goes to stderr). The first
 * `yes` or `no` decides; `undecided` asks the next handler. A throw (also pi's TypeError for a
 * handler that returns nothing) is a warning on stderr, not an `extension_error`. */
async function projectTrust(instance, event, handlers) {
	const ctx = {
		cwd: event.cwd,
		mode: "rpc",
		hasUI: false,
		ui: {
			select: async () => undefined,
			confirm: async () => false,
			input: async () => undefined,
			notify: (message) => process.stderr.write(`${message}\n`),
		},
	};
	for (const handler of handlers) {
		try {
			const value = await handler(event, ctx);
			if (value === undefined || value === null) throw new TypeError("Cannot read properties of undefined (reading 'trusted')");
			if (value.trusted === "yes" || value.trusted === "no") return { trusted: value.trusted, remember: value.remember === true };
		} catch (err) {
			process.stderr.write(`Warning: Extension "${instance.path}" project_trust error: ${errorMessage(err)}\n`);
		}
	}
	return null;
}

/** Calls one handler; a throw is reported and reads as "no result", as pi's runner does. */
async function attempt(instance, eventType, handler, event, ctx) {
	try {
		return { value: await handler(event, ctx) };
	} catch (err) {
		reportError(instance, eventType, err);
		return { failed: true };
	}
}

async function observe({ instance, event, ctx, handlers }) {
	for (const handler of handlers) await attempt(instance, event.type, handler, event, ctx);
	return null;
}

async function sessionBefore({ instance, event, ctx, handlers, scope }) {
	// The compaction and tree events carry the signal tau cancels when the user aborts.
	if (event.type === "session_before_compact" || event.type === "session_before_tree") event.signal = scope.signal;
	if (event.type === "session_before_compact") reviveFileOps(event.preparation);
	let result = null;
	for (const handler of handlers) {
		const { value } = await attempt(instance, event.type, handler, event, ctx);
		if (!value) continue;
		result = value;
		if (value.cancel) break;
	}
	return result;
}

/** pi's compaction preparation holds Sets, which JSON carries as arrays. */
function reviveFileOps(preparation) {
	const fileOps = preparation?.fileOps;
	if (!fileOps || typeof fileOps !== "object") return;
	for (const key of ["read", "written", "edited"]) {
		if (Array.isArray(fileOps[key])) fileOps[key] = new Set(fileOps[key]);
		else if (!(fileOps[key] instanceof Set)) fileOps[key] = new Set();
	}
}

const RULES = {
	// First block wins and in-place edits of `input` are what executes, so the (possibly mutated)
	// input always goes back. A throw blocks the call with its message and is not an
	// extension_error (ext §8).
	async tool_call({ event, ctx, handlers }) {
		for (const handler of handlers) {
			let value;
			try {
				value = await handler(event, ctx);
			} catch (err) {
				const reason = err instanceof Error ? err.message : `Extension failed, blocking execution: ${String(err)}`;
				return { block: true, reason, input: event.input };
			}
			if (value?.block) {
				const result = { block: true, input: event.input };
				if (value.reason !== undefined) result.reason = value.reason;
				return result;
			}
		}
		return { input: event.input };
	},

	// Chained partial patches: only the fields some handler set are returned.
	async tool_result({ instance, event, ctx, handlers }) {
		const current = { ...event };
		const patch = {};
		for (const handler of handlers) {
			const { value } = await attempt(instance, event.type, handler, current, ctx);
			if (!value) continue;
			for (const key of ["content", "details", "isError"]) {
				if (value[key] !== undefined) {
					current[key] = value[key];
					patch[key] = value[key];
				}
			}
		}
		return Object.keys(patch).length ? patch : null;
	},

	async message_end({ instance, event, ctx, handlers }) {
		let message = event.message;
		let replaced = false;
		for (const handler of handlers) {
			const { value } = await attempt(instance, event.type, handler, { ...event, message }, ctx);
			if (!value?.message) continue;
			if (value.message.role !== message?.role) {
				reportError(instance, "message_end", "message_end handlers must return a message with the same role");
				continue;
			}
			message = value.message;
			replaced = true;
		}
		return replaced ? { message } : null;
	},

	// Handlers may return new messages or edit the (already private) copy in place; either way
	// the result is what the LLM call uses.
	async context({ instance, event, ctx, handlers }) {
		const before = JSON.stringify(event.messages);
		let messages = event.messages;
		for (const handler of handlers) {
			const { value } = await attempt(instance, event.type, handler, { type: "context", messages }, ctx);
			if (value?.messages) messages = value.messages;
		}
		return messages !== event.messages || JSON.stringify(messages) !== before ? { messages } : null;
	},

	async before_provider_request({ instance, event, ctx, handlers }) {
		const before = JSON.stringify(event.payload);
		let payload = event.payload;
		for (const handler of handlers) {
			const { value } = await attempt(instance, event.type, handler, { type: "before_provider_request", payload }, ctx);
			if (value !== undefined) payload = value;
		}
		return payload !== event.payload || JSON.stringify(payload) !== before ? { payload } : null;
	},

	async before_agent_start({ host, instance, event, scope, handlers }) {
		let systemPrompt = event.systemPrompt;
		let promptChanged = false;
		const messages = [];
		// Inside this event getSystemPrompt() answers the prompt as chained so far.
		const base = createContext(host, instance, scope);
		const ctx = Object.defineProperties({}, Object.getOwnPropertyDescriptors(base));
		ctx.getSystemPrompt = () => {
			instance.assertActive();
			return systemPrompt;
		};
		for (const handler of handlers) {
			const current = { ...event, systemPrompt };
			const { value } = await attempt(instance, event.type, handler, current, ctx);
			if (!value) continue;
			if (value.message) messages.push(value.message);
			if (value.systemPrompt !== undefined) {
				systemPrompt = value.systemPrompt;
				promptChanged = true;
			}
		}
		if (!messages.length && !promptChanged) return null;
		const result = {};
		// `message` is what one pi handler returns; several handlers of one extension can each
		// add one, so `messages` then carries them all.
		if (messages.length) result.message = messages[0];
		if (messages.length > 1) result.messages = messages;
		if (promptChanged) result.systemPrompt = systemPrompt;
		return result;
	},

	async input({ instance, event, ctx, handlers }) {
		let text = event.text;
		let images = event.images;
		for (const handler of handlers) {
			const current = { ...event, text, images };
			const { value } = await attempt(instance, event.type, handler, current, ctx);
			if (value?.action === "handled") return { action: "handled" };
			if (value?.action === "transform") {
				text = value.text;
				images = value.images ?? images;
			}
		}
		if (text === event.text && images === event.images) return null;
		const result = { action: "transform", text };
		if (images !== undefined) result.images = images;
		return result;
	},

	async resources_discover({ instance, event, ctx, handlers }) {
		const paths = { skillPaths: [], promptPaths: [], themePaths: [] };
		for (const handler of handlers) {
			const { value } = await attempt(instance, event.type, handler, event, ctx);
			for (const key of Object.keys(paths)) {
				if (Array.isArray(value?.[key])) paths[key].push(...value[key]);
			}
		}
		return Object.values(paths).some((list) => list.length) ? paths : null;
	},

	async user_bash({ instance, event, ctx, handlers }) {
		for (const handler of handlers) {
			const { value } = await attempt(instance, event.type, handler, event, ctx);
			if (value) return value;
		}
		return null;
	},

	// pi reads `.trusted` off whatever a handler returns, so returning nothing is a handler error;
	// tau prints those as warnings rather than extension_error records.
	async project_trust({ instance, event, ctx, handlers }) {
		for (const handler of handlers) {
			try {
				const value = await handler(event, ctx);
				if (value.trusted === "undecided") continue;
				return value;
			} catch (err) {
				reportError(instance, "project_trust", err);
			}
		}
		return null;
	},
};

/** Runs a tool's execute (ext §5.3). Progress goes out as `tool_update` frames until the
 * promise settles; a throw is an error result, never a protocol error. */
export async function executeTool(host, instance, frame, scope) {
	const tool = instance.tools.get(frame.toolName);
	if (!tool) return errorResult(`Tool ${frame.toolName} not found`);
	let open = true;
	const onUpdate = (partialResult) => {
		if (!open) return;
		try {
			send({ type: "tool_update", id: frame.id, partialResult });
		} catch (err) {
			process.stderr.write(`${instance.path}: dropped a tool update: ${errorMessage(err)}\n`);
		}
	};
	try {
		const result = await tool.execute(frame.toolCallId, frame.params ?? {}, scope.signal, onUpdate, createContext(host, instance, scope));
		// The returned object, whole: pi keeps every key of it (an `isError: true` the tool set
		// itself included) in tool_execution_end, and only a throw is a failure.
		const returned = result && typeof result === "object" ? { ...result } : {};
		if (returned.content === undefined) returned.content = [];
		return { result: returned };
	} catch (err) {
		return errorResult(errorMessage(err));
	} finally {
		open = false;
	}
}

function errorResult(text) {
	return { content: [{ type: "text", text }], details: {}, isError: true };
}

/** A tool's prepareArguments, run before tau validates; a throw answers the request with an
 * error whose text becomes the tool result. */
export function prepareArguments(instance, frame) {
	const tool = instance.tools.get(frame.toolName);
	if (!tool) throw new Error(`Tool ${frame.toolName} not found`);
	if (typeof tool.prepareArguments !== "function") return frame.arguments;
	return tool.prepareArguments(frame.arguments);
}

/** A command handler; a throw answers with an error and tau writes pi's
 * `extension_error{extensionPath:"command:<name>"}`. */
export async function runShortcut(host, instance, frame, scope) {
	const shortcut = instance.shortcuts.get(frame.shortcut);
	if (!shortcut) throw new Error(`Unknown shortcut: ${frame.shortcut}`);
	await shortcut.handler(createContext(host, instance, scope));
	return null;
}

export async function runCommand(host, instance, frame, scope) {
	const command = instance.commands.get(frame.name);
	if (!command) throw new Error(`Unknown command: ${frame.name}`);
	await command.handler(frame.args ?? "", createCommandContext(host, instance, scope));
	return null;
}
