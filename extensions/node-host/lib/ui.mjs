// Owns `ctx.ui` (ext §4.4, rpc.md §13): dialogs become `ui_request` frames answered by
// `ui_response`, display calls become fire-and-forget `ui_request` frames, and everything that
// needs a terminal is the no-op pi's RPC mode has. Without UI (json/print) every member is pi's
// no-op column.

import { randomUuid } from "./ids.mjs";
import { getTheme } from "./packages.mjs";
import { send } from "./wire.mjs";

const openDialogs = new Map();

/** Routes a `ui_response`; answers for dialogs that already ended are ignored, as in pi. */
export function settleDialog(frame) {
	const answer = openDialogs.get(frame.id);
	if (answer) answer(frame);
}

/** Closes every open dialog with its default, telling tau; used on shutdown. */
export function closeAllDialogs() {
	for (const id of [...openDialogs.keys()]) openDialogs.get(id)?.({ cancelled: true }, true);
}

const pickValue = (response) => (response.cancelled ? undefined : "value" in response ? response.value : undefined);
const pickConfirmed = (response) => (response.cancelled ? false : "confirmed" in response ? response.confirmed : false);

function openDialog(extensionPath, scope, options, fallback, fields, parse) {
	if (options?.signal?.aborted || scope?.cancelled) return Promise.resolve(fallback);
	const id = randomUuid();
	return new Promise((resolve) => {
		let timer;
		const finish = (value, tellTau) => {
			if (!openDialogs.has(id)) return;
			openDialogs.delete(id);
			if (timer) clearTimeout(timer);
			options?.signal?.removeEventListener("abort", onAbort);
			scope?.dialogClosers.delete(onAbort);
			// tau must stop showing a dialog whose answer nobody will read.
			if (tellTau) send({ type: "ui_cancel", id });
			resolve(value);
		};
		const onAbort = () => finish(fallback, true);
		openDialogs.set(id, (response, closing) => (closing ? onAbort() : finish(parse(response ?? {}), false)));
		options?.signal?.addEventListener("abort", onAbort, { once: true });
		scope?.dialogClosers.add(onAbort);
		// tau shows the countdown; the local timer makes the default stick even if tau's answer
		// arrives late or never.
		if (options?.timeout) timer = setTimeout(onAbort, options.timeout);
		send({ type: "ui_request", id, extension: extensionPath, ...fields });
	});
}

/** The members that need a terminal: what pi's RPC and print modes do instead (nothing). */
function terminalOnly() {
	return {
		custom: async () => undefined,
		onTerminalInput: () => () => {},
		setWorkingMessage: () => {},
		setWorkingVisible: () => {},
		setWorkingIndicator: () => {},
		setHiddenThinkingLabel: () => {},
		setFooter: () => {},
		setHeader: () => {},
		setEditorComponent: () => {},
		getEditorComponent: () => undefined,
		addAutocompleteProvider: () => {},
		getToolsExpanded: () => false,
		setToolsExpanded: () => {},
		getAllThemes: () => [],
		getTheme: () => undefined,
	};
}

function notice(extensionPath, fields) {
	send({ type: "ui_request", id: randomUuid(), extension: extensionPath, ...fields });
}

export function createRpcUI(extensionPath, scope) {
	const ui = {
		select: (title, options, opts) =>
			openDialog(extensionPath, scope, opts, undefined, { method: "select", title, options, timeout: opts?.timeout }, pickValue),
		confirm: (title, message, opts) =>
			openDialog(extensionPath, scope, opts, false, { method: "confirm", title, message, timeout: opts?.timeout }, pickConfirmed),
		input: (title, placeholder, opts) =>
			openDialog(extensionPath, scope, opts, undefined, { method: "input", title, placeholder, timeout: opts?.timeout }, pickValue),
		// pi's editor has neither timeout nor signal; only a tau cancel of the request ends it early.
		editor: (title, prefill) => openDialog(extensionPath, scope, undefined, undefined, { method: "editor", title, prefill }, pickValue),
		notify: (message, type) => notice(extensionPath, { method: "notify", message, notifyType: type }),
		setStatus: (key, text) => notice(extensionPath, { method: "setStatus", statusKey: key, statusText: text }),
		setWidget: (key, content, options) => {
			if (content === undefined || Array.isArray(content)) {
				notice(extensionPath, { method: "setWidget", widgetKey: key, widgetLines: content, widgetPlacement: options?.placement });
			}
		},
		setTitle: (title) => notice(extensionPath, { method: "setTitle", title }),
		setEditorText: (text) => notice(extensionPath, { method: "set_editor_text", text }),
		pasteToEditor: (text) => ui.setEditorText(text),
		getEditorText: () => "",
		...terminalOnly(),
		setTheme: () => ({ success: false, error: "Theme switching not supported in RPC mode" }),
		get theme() {
			return getTheme();
		},
	};
	return ui;
}

export function createNoUI() {
	return {
		select: async () => undefined,
		confirm: async () => false,
		input: async () => undefined,
		editor: async () => undefined,
		notify: () => {},
		setStatus: () => {},
		setWidget: () => {},
		setTitle: () => {},
		setEditorText: () => {},
		pasteToEditor: () => {},
		getEditorText: () => "",
		...terminalOnly(),
		setTheme: () => ({ success: false, error: "UI not available" }),
		get theme() {
			return getTheme();
		},
	};
}
