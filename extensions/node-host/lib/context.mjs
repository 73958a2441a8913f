// Owns the `ctx` objects handed to handlers, tools and commands (ext §4.1-4.3). Reads come from
// the mirror; calls that change tau's state become `action` frames. Like pi's, every member is
// resolved when read and throws once its extension instance has gone stale.

import { createNoUI, createRpcUI } from "./ui.mjs";
import { errorMessage, request, send } from "./wire.mjs";

export function createModelRegistry(host, instance) {
	const mirror = host.mirror;
	return {
		find: (provider, modelId) => mirror.findModel(provider, modelId),
		getAll: () => [...mirror.allModels],
		getAvailable: () => [...mirror.availableModels],
		hasConfiguredAuth: (model) => mirror.hasConfiguredAuth(model),
		isUsingOAuth: () => false,
		getProviderDisplayName: (provider) => provider,
		getProviderAuthStatus: (provider) =>
			mirror.availableModels.some((m) => m.provider === provider) ? { configured: true } : { configured: false },
		getError: () => undefined,
		refresh: () => {},
		// Keys live in tau; an older tau that does not know the action answers with an error,
		// which becomes pi's `{ok:false, error}` shape.
		getApiKeyAndHeaders: async (model) => {
			try {
				const answer = await request({ type: "action", extension: instance.path, action: "get_api_key", provider: model?.provider, modelId: model?.id });
				return { ok: true, ...(answer ?? {}) };
			} catch (err) {
				return { ok: false, error: errorMessage(err) };
			}
		},
		getApiKeyForProvider: async (provider) => {
			try {
				const answer = await request({ type: "action", extension: instance.path, action: "get_api_key", provider });
				return answer?.apiKey;
			} catch {
				return undefined;
			}
		},
		registerProvider: (name, config) => instance.api.registerProvider(name, config),
		unregisterProvider: (name) => instance.api.unregisterProvider(name),
	};
}

/** ExtensionContext for one dispatch. `scope` is the tau request it serves (or undefined for code
 * running outside any request, e.g. a shortcut). */
export function createContext(host, instance, scope) {
	const guard = () => instance.assertActive();
	const mirror = host.mirror;
	let ui;
	return {
		get ui() {
			guard();
			ui ??= host.hasUI ? createRpcUI(instance.path, scope) : createNoUI();
			return ui;
		},
		get mode() {
			guard();
			return host.mode;
		},
		get hasUI() {
			guard();
			return host.hasUI;
		},
		get cwd() {
			guard();
			return host.cwd;
		},
		get sessionManager() {
			guard();
			return host.sessionManagerView;
		},
		get modelRegistry() {
			guard();
			return instance.modelRegistry;
		},
		get model() {
			guard();
			return mirror.model;
		},
		isIdle: () => {
			guard();
			return mirror.isIdle;
		},
		isProjectTrusted: () => {
			guard();
			return mirror.projectTrusted;
		},
		// pi hands out the run's signal, and nothing while idle; here the request's signal stands in
		// for the run's, so a tau `cancel` (abort, deadline) reaches whatever the handler passed it to.
		get signal() {
			guard();
			if (!scope) return undefined;
			return mirror.isIdle && scope.kind !== "execute_tool" ? undefined : scope.signal;
		},
		abort: () => {
			guard();
			send({ type: "action", extension: instance.path, action: "abort" });
		},
		hasPendingMessages: () => {
			guard();
			return mirror.hasPendingMessages;
		},
		shutdown: () => {
			guard();
			send({ type: "action", extension: instance.path, action: "shutdown" });
		},
		getContextUsage: () => {
			guard();
			return mirror.contextUsage ?? undefined;
		},
		compact: (options) => {
			guard();
			const fields = options?.customInstructions !== undefined ? { customInstructions: options.customInstructions } : {};
			request({ type: "action", extension: instance.path, action: "compact", ...fields }).then(
				(result) => options?.onComplete?.(result),
				(err) => options?.onError?.(err instanceof Error ? err : new Error(String(err))),
			);
		},
		getSystemPrompt: () => {
			guard();
			return mirror.systemPrompt;
		},
	};
}

/** ExtensionCommandContext: the above plus the session-control calls (ext §4.2). */
export function createCommandContext(host, instance, scope) {
	const context = Object.defineProperties({}, Object.getOwnPropertyDescriptors(createContext(host, instance, scope)));
	const guard = () => instance.assertActive();
	const act = (action, fields = {}) => request({ type: "action", extension: instance.path, action, ...fields });
	const replacing = async (action, fields, options) => {
		const answer = await act(action, fields);
		const cancelled = Boolean(answer?.cancelled);
		if (!cancelled && typeof options?.withSession === "function") {
			// By now tau has re-instantiated the extension (`reinitialize`) and run its session_start;
			// withSession runs in the old closure but talks to the new instance, as in pi.
			const current = host.currentInstance(instance.path) ?? instance;
			await options.withSession(createReplacedSessionContext(host, current, scope));
		}
		return { cancelled };
	};
	Object.assign(context, {
		getSystemPromptOptions: () => {
			guard();
			return host.mirror.systemPromptOptions ?? { cwd: host.cwd };
		},
		waitForIdle: async () => {
			guard();
			await act("wait_for_idle");
			host.mirror.runEnded();
		},
		newSession: (options) => {
			guard();
			if (typeof options?.setup === "function") {
				process.stderr.write(`${instance.path}: newSession({setup}) is not supported by tau's Node host; setup was not called\n`);
			}
			return replacing("new_session", options?.parentSession !== undefined ? { parentSession: options.parentSession } : {}, options);
		},
		fork: (entryId, options) => {
			guard();
			return replacing("fork", { entryId, position: options?.position }, options);
		},
		navigateTree: async (targetId, options) => {
			guard();
			const answer = await act("navigate_tree", {
				targetId,
				summarize: options?.summarize,
				customInstructions: options?.customInstructions,
				replaceInstructions: options?.replaceInstructions,
				label: options?.label,
			});
			return { cancelled: Boolean(answer?.cancelled) };
		},
		switchSession: (sessionPath, options) => {
			guard();
			return replacing("switch_session", { sessionPath }, options);
		},
		reload: async () => {
			guard();
			await act("reload");
		},
	});
	return context;
}

function createReplacedSessionContext(host, instance, scope) {
	const context = createCommandContext(host, instance, scope);
	const act = (action, fields) => request({ type: "action", extension: instance.path, action, ...fields });
	context.sendMessage = async (message, options) => {
		instance.assertActive();
		await act("send_message", messageFields(message, options));
	};
	context.sendUserMessage = async (content, options) => {
		instance.assertActive();
		await act("send_user_message", { content, deliverAs: options?.deliverAs });
	};
	return context;
}

export function messageFields(message, options) {
	const { customType, content, display, details } = message ?? {};
	return { message: { customType, content, display, details }, triggerTurn: options?.triggerTurn, deliverAs: options?.deliverAs };
}
