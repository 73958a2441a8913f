// The parts of pi's extension API that host.test.mjs does not reach, driven the same way (this
// file plays tau's side of the protocol against host.mjs) with fixtures/surface.ts. The coverage
// table in docs/extensions.md cites these tests by name.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const HOST = join(here, "..", "host.cjs");
const EXT = join(here, "fixtures", "surface.ts");
const agentDir = mkdtempSync(join(tmpdir(), "tau-node-host-agent-"));
const workDir = mkdtempSync(join(tmpdir(), "tau-node-host-cwd-"));

const MODELS = [
	{ provider: "mock", id: "m1", name: "Mock One", api: "openai-completions", contextWindow: 1000, maxTokens: 100 },
	{ provider: "mock", id: "m2", name: "Mock Two", api: "openai-completions", contextWindow: 2000, maxTokens: 200 },
];
const ENTRIES = [
	{ type: "message", id: "a1", parentId: null, timestamp: "2025-01-01T00:00:00.000Z", message: { role: "user", content: "hi" } },
	{ type: "message", id: "b1", parentId: "a1", timestamp: "2025-01-01T00:00:01.000Z", message: { role: "assistant", content: [] } },
	{ type: "message", id: "b2", parentId: "a1", timestamp: "2025-01-01T00:00:02.000Z", message: { role: "assistant", content: [] } },
	{ type: "label", id: "l1", parentId: "b2", timestamp: "2025-01-01T00:00:03.000Z", targetId: "a1", label: "start" },
];
const STATE = {
	model: MODELS[0],
	thinkingLevel: "off",
	isIdle: true,
	hasPendingMessages: true,
	activeTools: ["read", "drawn"],
	allTools: ["read", "bash", "drawn"].map((name) => ({ name, description: name, parameters: {} })),
	commands: [
		{ name: "ui", source: "extension", sourceInfo: { path: EXT, source: "cli", scope: "temporary" } },
		{ name: "review", description: "Review", source: "prompt", sourceInfo: { path: "/p/review.md", source: "local", scope: "user" } },
		{ name: "skill:tidy", description: "Tidies", source: "skill", sourceInfo: { path: "/s/tidy/SKILL.md", source: "local", scope: "user" } },
	],
	sessionId: "s-1",
	sessionFile: join(workDir, "session.jsonl"),
	sessionName: "named",
	sessionDir: workDir,
	header: { type: "session", id: "s-1", cwd: workDir },
	leafId: "l1",
	entries: { reset: true, append: ENTRIES },
	contextUsage: { tokens: 120, contextWindow: 1000, percent: 12 },
	systemPrompt: "You are a test.",
	systemPromptOptions: { cwd: workDir, selectedTools: ["read"] },
	projectTrusted: false,
	availableModels: [MODELS[0]],
	allModels: MODELS,
};

/** One host process, the frames it wrote, and tau's answers to its actions. */
class HostProcess {
	constructor(actions = {}) {
		this.frames = [];
		this.waiters = [];
		this.stderr = "";
		this.actions = actions;
		this.nextId = 1;
		this.child = spawn(process.execPath, [HOST], {
			cwd: workDir,
			env: { ...process.env, TAU_EXTENSION_PROTOCOL: "1", PI_CODING_AGENT_DIR: agentDir },
			stdio: ["pipe", "pipe", "pipe"],
		});
		this.exited = new Promise((resolve) => this.child.on("exit", (code) => resolve(code)));
		let buffer = "";
		this.child.stdout.setEncoding("utf8");
		this.child.stdout.on("data", (chunk) => {
			buffer += chunk;
			let newline;
			while ((newline = buffer.indexOf("\n")) !== -1) {
				const line = buffer.slice(0, newline);
				buffer = buffer.slice(newline + 1);
				if (line.trim()) this.receive(JSON.parse(line));
			}
		});
		this.child.stderr.setEncoding("utf8");
		this.child.stderr.on("data", (chunk) => {
			this.stderr += chunk;
		});
	}

	receive(frame) {
		this.frames.push(frame);
		if (frame.type === "action" && frame.id !== undefined) {
			const handler = this.actions[frame.action];
			Promise.resolve(handler ? handler(frame) : null).then(
				(result) => this.send({ type: "response", id: frame.id, result: result ?? null }),
				(err) => this.send({ type: "response", id: frame.id, error: err.message }),
			);
		}
		for (const waiter of [...this.waiters]) {
			if (waiter.match(frame)) {
				this.waiters.splice(this.waiters.indexOf(waiter), 1);
				waiter.resolve(frame);
			}
		}
	}

	send(frame) {
		this.child.stdin.write(`${JSON.stringify(frame)}\n`);
	}

	waitFor(match, since = 0) {
		const seen = this.frames.slice(since).find(match);
		if (seen) return Promise.resolve(seen);
		return new Promise((resolve, reject) => {
			const waiter = { match, resolve };
			this.waiters.push(waiter);
			setTimeout(() => {
				if (!this.waiters.includes(waiter)) return;
				this.waiters.splice(this.waiters.indexOf(waiter), 1);
				reject(new Error(`timed out; frames: ${JSON.stringify(this.frames)}\nstderr: ${this.stderr}`));
			}, 10000).unref();
		});
	}

	async result(frame) {
		const id = `t${this.nextId++}`;
		this.send({ ...frame, id });
		const response = await this.waitFor((f) => f.type === "response" && f.id === id);
		assert.equal(response.error, undefined, `request failed: ${response.error}`);
		return response.result;
	}

	/** Runs a command and returns `{label: value}` from the notifications it sent, and the frames it caused. */
	async command(name, state) {
		const since = this.frames.length;
		await this.result({ type: "run_command", extension: EXT, name, args: "", state });
		const frames = this.frames.slice(since);
		return { seen: reports(frames), frames };
	}

	event(payload, extra = {}) {
		return this.result({ type: "event", extension: EXT, event: payload, ...extra });
	}
}

function reports(frames) {
	const seen = {};
	for (const frame of frames) {
		if (frame.type !== "ui_request" || frame.method !== "notify") continue;
		const at = frame.message.indexOf("=");
		const value = JSON.parse(frame.message.slice(at + 1));
		seen[frame.message.slice(0, at)] = value === "<undefined>" ? undefined : value;
	}
	return seen;
}

let host;
let init;
const answers = {
	get_api_key: (frame) => (frame.provider === "mock" ? { apiKey: "secret", headers: { "x-test": "1" } } : null),
	wait_for_idle: () => null,
	new_session: () => ({ cancelled: false }),
	fork: () => ({ cancelled: true }),
	switch_session: () => ({ cancelled: false }),
	send_user_message: () => null,
};
before(async () => {
	host = new HostProcess(answers);
	init = await host.result({ type: "initialize", protocol: 1, tau: "test", cwd: workDir, agentDir, mode: "rpc", hasUI: true, extensions: [EXT], state: STATE });
});
after(async () => {
	if (host.child.exitCode === null) host.child.kill();
	rmSync(agentDir, { recursive: true, force: true });
	rmSync(workDir, { recursive: true, force: true });
});

describe("the rest of pi's extension API", () => {
	test("registrations pi's RPC mode never calls (renderers, completions) load and stay in the host", () => {
		const { manifest, error } = init.extensions[0];
		assert.equal(error, undefined, error);
		assert.deepEqual(manifest.tools.map((t) => Object.keys(t).sort()), [["description", "label", "name", "parameters"]]);
		assert.deepEqual(manifest.commands, [
			{ name: "completes", description: "Has argument completions" },
			{ name: "ui" },
			{ name: "context" },
			{ name: "session" },
			{ name: "replace" },
			{ name: "api" },
		]);
	});

	test("providers registered while loading travel as data; functions are dropped with a warning; unregister removes a queued one", () => {
		const { providers } = init.extensions[0].manifest;
		assert.deepEqual(
			providers.map((p) => p.name),
			["loaded-llm"],
		);
		assert.equal(providers[0].config.streamSimple, undefined);
		assert.equal(providers[0].config.models[0].id, "x");
		assert.match(host.stderr, /provider "loaded-llm": streamSimple cannot be bridged/);
	});

	test("ctx.ui in RPC mode: display calls are ui_request frames, terminal-only members are pi's RPC no-ops", async () => {
		const since = host.frames.length;
		const id = "ui-cmd";
		host.send({ type: "run_command", id, extension: EXT, name: "ui", args: "" });
		const select = await host.waitFor((f) => f.type === "ui_request" && f.method === "select", since);
		assert.deepEqual([select.title, select.options], ["Pick", ["a", "b"]]);
		host.send({ type: "ui_response", id: select.id, value: "b" });
		const editor = await host.waitFor((f) => f.type === "ui_request" && f.method === "editor", since);
		assert.deepEqual([editor.title, editor.prefill], ["Edit", "draft"]);
		host.send({ type: "ui_response", id: editor.id, value: "edited" });
		await host.waitFor((f) => f.type === "response" && f.id === id, since);
		const frames = host.frames.slice(since);
		const seen = reports(frames);
		assert.deepEqual(seen, {
			onTerminalInput: "function",
			custom: undefined,
			getEditorText: "",
			getEditorComponent: undefined,
			getAllThemes: [],
			getTheme: undefined,
			setTheme: { success: false, error: "Theme switching not supported in RPC mode" },
			getToolsExpanded: false,
			select: "b",
			editor: "edited",
		});
		// Only these reach tau: the terminal-only calls and a component widget send nothing.
		const sent = frames.filter((f) => f.type === "ui_request" && f.method !== "notify");
		assert.deepEqual(
			sent.map((f) => f.method),
			["set_editor_text", "setWidget", "select", "editor"],
		);
		assert.equal(sent[0].text, "pasted", "pasteToEditor falls back to setEditorText, as in pi's RPC mode");
		assert.deepEqual([sent[1].widgetKey, sent[1].widgetLines, sent[1].widgetPlacement], ["lines", ["one", "two"], "belowEditor"]);
	});

	test("ctx reads come from tau's state; abort and shutdown are actions", async () => {
		const { seen, frames } = await host.command("context");
		assert.deepEqual(seen, {
			mode: "rpc",
			hasUI: true,
			cwd: workDir,
			isProjectTrusted: false,
			hasPendingMessages: true,
			signal: "none",
			getSystemPrompt: "You are a test.",
			getSystemPromptOptions: STATE.systemPromptOptions,
			getAll: ["m1", "m2"],
			getAvailable: ["m1"],
			getApiKeyAndHeaders: { ok: true, apiKey: "secret", headers: { "x-test": "1" } },
			getApiKeyForProvider: "secret",
			getProviderAuthStatus: { configured: true },
			getProviderDisplayName: "mock",
			isUsingOAuth: false,
			getError: undefined,
			getCwd: workDir,
			getSessionDir: workDir,
			getSessionId: "s-1",
			getSessionFile: STATE.sessionFile,
			getSessionName: "named",
			getEntry: "a1",
			getTree: [["a1", "start", [["b1", null, []], ["b2", null, [["l1", null, []]]]]]],
		});
		const actions = frames.filter((f) => f.type === "action");
		assert.deepEqual(
			actions.map((f) => [f.action, f.id === undefined ? "no reply" : "reply"]),
			[
				["abort", "no reply"],
				["get_api_key", "reply"],
				["get_api_key", "reply"],
				["register_provider", "no reply"],
				["unregister_provider", "no reply"],
				["shutdown", "no reply"],
			],
		);
	});

	test("ctx.signal is the running request's signal while a run is going", async () => {
		const { seen } = await host.command("context", { isIdle: false });
		assert.equal(seen.signal, false);
		await host.command("context", { isIdle: true });
	});

	test("command ctx session calls are actions answered with pi's {cancelled}", async () => {
		const { seen, frames } = await host.command("session");
		assert.deepEqual(seen, { newSession: { cancelled: false }, fork: { cancelled: true }, switchSession: { cancelled: false } });
		const actions = frames.filter((f) => f.type === "action");
		assert.deepEqual(
			actions.map((f) => f.action),
			["wait_for_idle", "new_session", "fork", "switch_session"],
		);
		assert.equal(actions[1].parentSession, "/parent.jsonl");
		assert.deepEqual([actions[2].entryId, actions[2].position], ["b1", "at"]);
		assert.equal(actions[3].sessionPath, "/other.jsonl");
	});

	test("a withSession ctx's sendUserMessage waits for tau", async () => {
		const replacing = new HostProcess({
			...answers,
			switch_session: async () => {
				await replacing.result({ type: "reinitialize", reason: "resume" });
				return { cancelled: false };
			},
		});
		await replacing.result({ type: "initialize", protocol: 1, tau: "test", cwd: workDir, agentDir, mode: "rpc", hasUI: true, extensions: [EXT], state: STATE });
		await replacing.result({ type: "run_command", extension: EXT, name: "replace", args: "" });
		const sent = replacing.frames.find((f) => f.type === "action" && f.action === "send_user_message");
		assert.ok(sent.id, "carries an id: the promise settles with tau's answer");
		assert.deepEqual([sent.content, sent.deliverAs], ["hello again", "followUp"]);
		replacing.send({ type: "shutdown" });
		await replacing.exited;
	});

	test("pi's labels, messages, command and tool lists, exec and event bus", async () => {
		const { seen, frames } = await host.command("api");
		assert.deepEqual(seen, {
			getLabel: "here",
			setLabelMissing: "Entry nope not found",
			getCommands: ["extension:ui", "prompt:review", "skill:skill:tidy"],
			getAllTools: ["read", "bash", "drawn"],
			exec: { stdout: "out", code: 3, killed: false },
			events: [{ heard: 7 }],
		});
		const actions = frames.filter((f) => f.type === "action");
		assert.deepEqual(
			actions.map((f) => f.action),
			["set_label", "send_message", "send_user_message"],
		);
		assert.deepEqual([actions[0].entryId, actions[0].label], ["b1", "here"]);
		assert.deepEqual(actions[1].message, { customType: "card", content: "shown", display: true, details: { n: 1 } });
		assert.deepEqual([actions[1].triggerTurn, actions[1].deliverAs], [true, "nextTurn"]);
		assert.deepEqual([actions[2].content, actions[2].deliverAs], [[{ type: "text", text: "go on" }], "steer"]);
	});

	test("event results the other fixtures do not return", async () => {
		assert.deepEqual(await host.event({ type: "resources_discover", cwd: "/w", reason: "startup" }), {
			skillPaths: ["/w/skills"],
			promptPaths: ["/w/prompts"],
			themePaths: ["/w/themes"],
		});
		assert.deepEqual(await host.event({ type: "tool_result", toolCallId: "c", toolName: "drawn", input: {}, content: [], details: undefined, isError: false }), {
			content: [{ type: "text", text: "redrawn" }],
		});
		assert.deepEqual(await host.event({ type: "input", text: "picture", source: "rpc" }), {
			action: "transform",
			text: "with picture",
			images: [{ type: "image", data: "AAAA", mimeType: "image/png" }],
		});
		const tree = { type: "session_before_tree", preparation: { targetId: "a1", oldLeafId: "l1", commonAncestorId: "a1", entriesToSummarize: [], userWantsSummary: true } };
		assert.deepEqual(await host.event(tree), { customInstructions: "focus", replaceInstructions: true, label: "mine" });
		assert.deepEqual(await host.event({ type: "session_before_fork", entryId: "b1", position: "before" }), { cancel: false, skipConversationRestore: true });
		assert.deepEqual(await host.event({ type: "before_provider_request", payload: { model: "m1" } }), { payload: { model: "m1", temperature: 0 } });
	});

	test("observed events reach their handlers with pi's payload fields, message_update without waiting", async () => {
		const since = host.frames.length;
		const payloads = [
			{ type: "agent_start" },
			{ type: "message_start", message: { role: "assistant", content: [] } },
			{ type: "tool_execution_start", toolCallId: "c", toolName: "drawn", args: {} },
			{ type: "tool_execution_update", toolCallId: "c", toolName: "drawn", args: {}, partialResult: { content: [] } },
			{ type: "tool_execution_end", toolCallId: "c", toolName: "drawn", result: { content: [] }, isError: false },
			{ type: "after_provider_response", status: 200, headers: {} },
			{ type: "model_select", model: MODELS[1], previousModel: MODELS[0], source: "set" },
			{ type: "thinking_level_select", level: "high", previousLevel: "off" },
			{ type: "session_compact", compactionEntry: { type: "compaction", id: "k1" }, fromExtension: false, reason: "manual", willRetry: false },
			{ type: "session_tree", newLeafId: "a1", oldLeafId: "l1" },
			{ type: "session_shutdown", reason: "quit" },
		];
		for (const payload of payloads) assert.equal(await host.event(payload), null);
		// tau sends each token's message_update without an id and does not wait for it (T68).
		host.send({ type: "event", extension: EXT, event: { type: "message_update", assistantMessageEvent: { type: "text_delta", contentIndex: 0, delta: "x" } } });
		await host.waitFor((f) => f.type === "ui_request" && f.message?.startsWith("event:message_update="), since);
		const seen = reports(host.frames.slice(since));
		assert.deepEqual(seen, {
			"event:agent_start": [],
			"event:message_start": ["message"],
			"event:tool_execution_start": ["args", "toolCallId", "toolName"],
			"event:tool_execution_update": ["args", "partialResult", "toolCallId", "toolName"],
			"event:tool_execution_end": ["isError", "result", "toolCallId", "toolName"],
			"event:after_provider_response": ["headers", "status"],
			"event:model_select": ["model", "previousModel", "source"],
			"event:thinking_level_select": ["level", "previousLevel"],
			"event:session_compact": ["compactionEntry", "fromExtension", "reason", "willRetry"],
			"event:session_tree": ["newLeafId", "oldLeafId"],
			"event:session_shutdown": ["reason"],
			"event:message_update": ["assistantMessageEvent"],
		});
		assert.equal(host.frames.slice(since).filter((f) => f.type === "extension_error").length, 0);
	});
});
