// tau's Node extension host: runs pi 0.79 TypeScript/JavaScript extensions unmodified and speaks
// tau's extension protocol (docs/extensions.md) for them on stdin/stdout. This module owns the
// process: stdout protection, crash containment, and routing each incoming frame. host.cjs
// calls main(), from the start-up snapshot (lib/host.snapshot.blob) or the install-time bundle
// (lib/host.bundle.cjs) when they are current, else from these sources. Importing it does
// nothing else: the snapshot evaluates every module at install, long before the host runs.

import { guardStdout } from "./stdout-guard.mjs";
import module from "node:module";
import { fileURLToPath } from "node:url";
import { privateCacheDir } from "./cache.mjs";
import { executeTool, dispatchEvent, prepareArguments, runCommand, runShortcut } from "./dispatch.mjs";
import { canRequireEsm, preloadTheme } from "./packages.mjs";
import { Host } from "./runtime.mjs";
import { cancelAllScopes, cancelScope, closeScope, openScope } from "./scope.mjs";
import { closeAllDialogs, settleDialog } from "./ui.mjs";
import { errorMessage, readFrames, rejectAllPending, respond, respondError, send, settleResponse } from "./wire.mjs";

/** Starts the host on this process's stdin and stdout. */
export function main() {
	guardStdout();
	// jiti and pi's packages are imported later, dynamically; on Node >= 22.1 their compiled code
	// is then cached on disk between runs (a no-op on Node 20, which lacks the API). Node's default
	// folder is in the shared temp directory, where another user could plant compiled code, so the
	// cache is used only in a private folder of the agent directory.
	if (module.enableCompileCache) {
		const compileCache = privateCacheDir(process.env.PI_CODING_AGENT_DIR, "node-compile");
		if (compileCache) module.enableCompileCache(compileCache);
	}
	// The host as tau started it (errors not traced to an extension are the host's): the entry
	// Node ran, whether this module runs from its file, the bundle or the snapshot.
	hostPath = process.argv[1] ?? fileURLToPath(new URL("../host.cjs", import.meta.url));
	host = new Host();
	process.on("uncaughtException", contain);
	process.on("unhandledRejection", contain);
	// A write to a model object an extension was handed (docs/extensions.md §4 `update_model`).
	host.mirror.onModelWrite = (provider, modelId, patch) =>
		send({ type: "action", extension: hostPath, action: "update_model", provider, modelId, patch });
	readFrames(onFrame, exit);
}

let hostPath;
let host;

let initialized;
// Frames that need extension code wait for this; on Node without require(esm) it also covers
// importing pi's theme, which ctx.ui.theme must hand out synchronously.
let ready;

// pi would die here; tau's host reports the error against the extension whose code threw and
// keeps serving the others.
function contain(err) {
	const extension = host.attribute(err) ?? hostPath;
	try {
		send({ type: "extension_error", extension, event: "uncaught", error: errorMessage(err) });
	} catch {
		// stdout is gone; the stdout guard exits the process.
	}
	process.stderr.write(`${err instanceof Error && err.stack ? err.stack : String(err)}\n`);
}

function exit() {
	cancelAllScopes();
	closeAllDialogs();
	rejectAllPending("Extension host is shutting down");
	process.exit(0);
}

/**
 * Answers a tau request once `work` settles; `state` has already been applied. An `event`
 * without an id is one tau does not wait for (a token's `message_update`): it runs, unanswered.
 */
function serve(frame, kind, work) {
	const scope = openScope(frame.id, kind);
	const done = Promise.resolve(ready).then(() => work(scope));
	if (frame.id === undefined) {
		done.catch(() => {}).finally(() => closeScope(scope));
		return;
	}
	done
		.then(
			(result) => respond(frame.id, result),
			(err) => respondError(frame.id, err),
		)
		.finally(() => closeScope(scope));
}

function onFrame(frame) {
	// State rides on the frame that needs it, so it is applied before anything reads it, and in
	// arrival order even though requests then run concurrently.
	if (frame.state && frame.type !== "initialize") host.mirror.apply(frame.state);
	switch (frame.type) {
		case "initialize":
			if (initialized) return respondError(frame.id, new Error("Already initialized"));
			initialized = host.initialize(frame);
			ready = initialized.then(() => (canRequireEsm ? undefined : preloadTheme())).catch(() => {});
			initialized.then(
				(result) => respond(frame.id, result),
				(err) => respondError(frame.id, err),
			);
			return;
		case "reinitialize": {
			const renewed = Promise.resolve(ready).then(() => host.reinitialize(frame));
			ready = renewed.catch(() => {});
			renewed.then(
				(result) => respond(frame.id, result),
				(err) => respondError(frame.id, err),
			);
			return;
		}
		case "flags":
			return void Promise.resolve(initialized).then(() => host.setFlags(frame));
		case "event":
			return serve(frame, "event", (scope) => dispatchEvent(host, host.requireInstance(frame.extension), frame.event ?? {}, scope));
		case "execute_tool":
			return serve(frame, "execute_tool", (scope) => executeTool(host, host.requireInstance(frame.extension), frame, scope));
		case "prepare_arguments":
			return serve(frame, "prepare_arguments", () => prepareArguments(host.requireInstance(frame.extension), frame));
		case "run_command":
			return serve(frame, "run_command", (scope) => runCommand(host, host.requireInstance(frame.extension), frame, scope));
		case "run_shortcut":
			return serve(frame, "run_shortcut", (scope) => runShortcut(host, host.requireInstance(frame.extension), frame, scope));
		case "cancel":
			return cancelScope(frame.id);
		case "ui_response":
			return settleDialog(frame);
		case "response":
			return void settleResponse(frame);
		case "shutdown":
			return exit();
		default:
			// Unknown frame types are ignored so a later protocol version can add them.
			return;
	}
}
