// Plays tau's side of the extension protocol (docs/extensions.md) against host.mjs: spawns the
// host, sends frames, answers its actions, and checks what comes back.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Compile } from "typebox/schema";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const HOST = join(here, "..", "host.cjs");
const fixture = (name) => join(here, "fixtures", name);
const example = (name) => join(here, "fixtures", "pi-examples", name);

const agentDir = mkdtempSync(join(tmpdir(), "tau-node-host-agent-"));
const workDir = mkdtempSync(join(tmpdir(), "tau-node-host-cwd-"));

const MODELS = [
	{ provider: "mock", id: "m1", name: "Mock One", api: "openai-completions", contextWindow: 1000, maxTokens: 100 },
	{ provider: "mock", id: "m2", name: "Mock Two", api: "openai-completions", contextWindow: 2000, maxTokens: 200 },
];
const BASE_STATE = {
	model: MODELS[0],
	thinkingLevel: "off",
	isIdle: true,
	hasPendingMessages: false,
	activeTools: ["read", "bash", "edit", "write"],
	allTools: ["read", "bash", "edit", "write", "grep", "find", "ls"].map((name) => ({ name, description: name, parameters: {} })),
	commands: [],
	sessionId: "s-1",
	sessionFile: join(workDir, "session.jsonl"),
	sessionDir: workDir,
	header: { type: "session", id: "s-1", cwd: workDir },
	leafId: null,
	entries: { reset: true, append: [] },
	contextUsage: { tokens: 120, contextWindow: 1000, percent: 12 },
	systemPrompt: "You are a test.",
	availableModels: [MODELS[0]],
	allModels: MODELS,
};

/** One host process and the frames it wrote. */
class HostProcess {
	constructor({ actions = {} } = {}) {
		this.frames = [];
		this.waiters = [];
		this.stderr = "";
		this.stderrWaiters = [];
		this.actionHandlers = actions;
		this.nextId = 1;
		this.child = spawn(process.execPath, [HOST], {
			cwd: workDir,
			env: { ...process.env, TAU_EXTENSION_PROTOCOL: "1", PI_CODING_AGENT_DIR: agentDir },
			stdio: ["pipe", "pipe", "pipe"],
		});
		this.exited = new Promise((resolve) => this.child.on("exit", (code, signal) => resolve({ code, signal })));
		let buffer = "";
		this.child.stdout.setEncoding("utf8");
		this.child.stdout.on("data", (chunk) => {
			buffer += chunk;
			let newline;
			while ((newline = buffer.indexOf("\n")) !== -1) {
				const line = buffer.slice(0, newline);
				buffer = buffer.slice(newline + 1);
				if (line.trim()) this.receive(line);
			}
		});
		this.child.stderr.setEncoding("utf8");
		this.child.stderr.on("data", (chunk) => {
			this.stderr += chunk;
			for (const waiter of [...this.stderrWaiters]) {
				if (waiter.pattern.test(this.stderr)) {
					this.stderrWaiters.splice(this.stderrWaiters.indexOf(waiter), 1);
					waiter.resolve();
				}
			}
		});
	}

	/** Resolves once stderr matches `pattern`: stderr is another pipe than the frames, so a
	 * line written before a response may still be on its way when the response is read. */
	waitForStderr(pattern, timeoutMs = 10000) {
		if (pattern.test(this.stderr)) return Promise.resolve();
		return new Promise((resolve, reject) => {
			const waiter = { pattern, resolve };
			this.stderrWaiters.push(waiter);
			setTimeout(() => {
				if (this.stderrWaiters.includes(waiter)) {
					this.stderrWaiters.splice(this.stderrWaiters.indexOf(waiter), 1);
					reject(new Error(`timed out waiting for ${pattern} on stderr; got: ${this.stderr}`));
				}
			}, timeoutMs);
		});
	}

	receive(line) {
		let frame;
		try {
			frame = JSON.parse(line);
		} catch {
			frame = { type: "<not json>", line };
		}
		this.frames.push(frame);
		if (frame.type === "action" && frame.id !== undefined) this.answerAction(frame);
		for (const waiter of [...this.waiters]) {
			if (waiter.match(frame)) {
				this.waiters.splice(this.waiters.indexOf(waiter), 1);
				waiter.resolve(frame);
			}
		}
	}

	answerAction(frame) {
		const handler = this.actionHandlers[frame.action];
		Promise.resolve(handler ? handler(frame) : null).then(
			(result) => this.send({ type: "response", id: frame.id, result: result ?? null }),
			(err) => this.send({ type: "response", id: frame.id, error: err.message }),
		);
	}

	send(frame) {
		this.child.stdin.write(`${JSON.stringify(frame)}\n`);
	}

	/** Resolves with the first frame (already received or still to come) that `match` accepts;
	 * `since` (a `frames.length` taken earlier) skips what arrived before it. */
	waitFor(match, { since = 0, timeoutMs = 10000 } = {}) {
		const seen = this.frames.slice(since).find(match);
		if (seen) return Promise.resolve(seen);
		return new Promise((resolve, reject) => {
			const waiter = { match, resolve };
			this.waiters.push(waiter);
			setTimeout(() => {
				if (this.waiters.includes(waiter)) {
					this.waiters.splice(this.waiters.indexOf(waiter), 1);
					reject(new Error(`timed out waiting for a frame; got ${JSON.stringify(this.frames)}\nstderr: ${this.stderr}`));
				}
			}, timeoutMs);
		});
	}

	async request(frame, timeoutMs) {
		const id = frame.id ?? `t${this.nextId++}`;
		this.send({ ...frame, id });
		return this.waitFor((f) => f.type === "response" && f.id === id, { timeoutMs });
	}

	async result(frame, timeoutMs) {
		const response = await this.request(frame, timeoutMs);
		assert.equal(response.error, undefined, `request failed: ${response.error}`);
		return response.result;
	}

	initialize(extensions, state = BASE_STATE, extra = {}) {
		return this.result({ type: "initialize", protocol: 1, tau: "test", cwd: workDir, agentDir, mode: "rpc", hasUI: true, extensions, state, ...extra }, 20000);
	}

	framesOf(type) {
		return this.frames.filter((frame) => frame.type === type);
	}

	async close() {
		if (this.child.exitCode === null) this.send({ type: "shutdown" });
		return this.exited;
	}
}

const hosts = [];
function startHost(options) {
	const host = new HostProcess(options);
	hosts.push(host);
	return host;
}
after(async () => {
	for (const host of hosts) {
		if (host.child.exitCode === null) host.child.kill();
	}
	rmSync(agentDir, { recursive: true, force: true });
	rmSync(workDir, { recursive: true, force: true });
});

const event = (extension, payload, extra = {}) => ({ type: "event", extension, event: payload, ...extra });

describe("a small extension", () => {
	const basic = fixture("basic.ts");
	let host;
	let init;

	test("initialize returns its manifest", async () => {
		host = startHost({ actions: {} });
		init = await host.initialize([basic]);
		assert.equal(init.extensions.length, 1);
		const { path, manifest, error } = init.extensions[0];
		assert.equal(path, basic);
		assert.equal(error, undefined);
		assert.deepEqual(
			manifest.tools.map((t) => t.name),
			["echo", "wait", "fail"],
		);
		const echo = manifest.tools[0];
		assert.equal(echo.label, "Echo");
		assert.equal(echo.promptSnippet, "Echo text");
		assert.deepEqual(echo.promptGuidelines, ["Use echo to repeat text."]);
		assert.deepEqual(echo.parameters, {
			type: "object",
			required: ["text"],
			properties: { text: { type: "string", description: "What to echo" }, times: { type: "number" } },
		});
		const wait = manifest.tools[1];
		assert.equal(wait.executionMode, "sequential");
		assert.equal(wait.prepareArguments, true);
		assert.deepEqual(manifest.commands, [{ name: "greet", description: "Asks for a name" }, { name: "fails" }]);
		assert.deepEqual(manifest.flags, [
			{ name: "shout", type: "boolean", default: false, description: "Upper-case echoes" },
			{ name: "greeting", type: "string" },
		]);
		assert.deepEqual(manifest.events, [
			"session_start",
			"tool_call",
			"input",
			"turn_end",
			"tool_result",
			"message_end",
			"before_agent_start",
			"context",
			"session_before_switch",
		]);
		assert.deepEqual(manifest.shortcuts, ["ctrl+alt+b"]);
	});

	test("console.log and process.stdout.write never reach stdout", async () => {
		await host.result(event(basic, { type: "session_start", reason: "startup" }));
		assert.ok(host.frames.every((frame) => frame.type !== "<not json>"), "every stdout line is a frame");
		assert.match(host.stderr, /basic: console\.log during load/);
		assert.match(host.stderr, /basic: stdout write during load/);
		await host.waitForStderr(/basic: session_start startup/);
	});

	test("ctx.ui.theme is pi's theme, with 256-colour escapes", async () => {
		const status = await host.waitFor((f) => f.type === "ui_request" && f.method === "setStatus");
		assert.equal(status.extension, basic);
		assert.equal(status.statusKey, "basic");
		assert.match(status.statusText, /^\u001b\[38;5;\d+mready\u001b\[39m$/);
	});

	test("tool_call: first block wins, in-place edits come back, a throw blocks", async () => {
		assert.deepEqual(await host.result(event(basic, { type: "tool_call", toolCallId: "c1", toolName: "bash", input: { command: "rm -rf /" } })), {
			block: true,
			reason: "no rm",
			input: { command: "rm -rf /" },
		});
		assert.deepEqual(await host.result(event(basic, { type: "tool_call", toolCallId: "c2", toolName: "echo", input: { text: "hi" } })), { input: { text: "[hi]" } });
		const errorsBefore = host.framesOf("extension_error").length;
		assert.deepEqual(await host.result(event(basic, { type: "tool_call", toolCallId: "c3", toolName: "bash", input: { command: "explode" } })), {
			block: true,
			reason: "handler exploded",
			input: { command: "explode" },
		});
		assert.equal(host.framesOf("extension_error").length, errorsBefore, "a throwing tool_call handler is not an extension_error");
	});

	test("a throwing handler sends extension_error and the next handler still runs", async () => {
		const result = await host.result(event(basic, { type: "turn_end", turnIndex: 0, message: { role: "assistant", content: [] }, toolResults: [] }));
		assert.equal(result, null);
		const error = await host.waitFor((f) => f.type === "extension_error" && f.event === "turn_end");
		assert.deepEqual(error, { type: "extension_error", extension: basic, event: "turn_end", error: "turn_end handler broke" });
		await host.waitFor((f) => f.type === "ui_request" && f.method === "notify" && f.message === "second turn_end handler ran");
	});

	test("event results follow pi's rules", async () => {
		assert.deepEqual(await host.result(event(basic, { type: "input", text: "?why", source: "rpc" })), { action: "transform", text: "question: why" });
		assert.deepEqual(await host.result(event(basic, { type: "input", text: "?stop", source: "rpc" })), { action: "handled" });
		assert.equal(await host.result(event(basic, { type: "input", text: "plain", source: "rpc" })), null);

		assert.deepEqual(
			await host.result(event(basic, { type: "tool_result", toolCallId: "c2", toolName: "echo", input: {}, content: [], details: {}, isError: true })),
			{ details: { patched: true }, isError: false },
		);

		const replaced = await host.result(event(basic, { type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "original" }] } }));
		assert.deepEqual(replaced, { message: { role: "assistant", content: [{ type: "text", text: "replaced" }] } });
		await host.waitFor((f) => f.type === "extension_error" && f.event === "message_end" && f.error === "message_end handlers must return a message with the same role");

		assert.deepEqual(await host.result(event(basic, { type: "before_agent_start", prompt: "p", systemPrompt: "base", systemPromptOptions: { cwd: workDir } })), {
			message: { customType: "note", content: "n1", display: false },
			systemPrompt: "base\nextra\nmore",
		});
		assert.deepEqual(await host.result(event(basic, { type: "before_agent_start", prompt: "two", systemPrompt: "base", systemPromptOptions: { cwd: workDir } })), {
			message: { customType: "note", content: "n1", display: false },
			messages: [
				{ customType: "note", content: "n1", display: false },
				{ customType: "note", content: "n2", display: true },
			],
			systemPrompt: "base\nextra\nmore",
		});

		const context = await host.result(event(basic, { type: "context", messages: [{ role: "user", content: "hi", timestamp: 0 }] }));
		assert.deepEqual(
			context.messages.map((m) => m.content),
			["hi", "injected"],
		);

		assert.deepEqual(await host.result(event(basic, { type: "session_before_switch", reason: "new" })), { cancel: true });
		assert.equal(await host.result(event(basic, { type: "session_before_switch", reason: "resume" })), null);
		assert.equal(await host.result(event(basic, { type: "agent_start" })), null, "unsubscribed events answer null");
	});

	test("execute_tool streams onUpdate as tool_update and answers the result", async () => {
		const response = await host.request({ type: "execute_tool", extension: basic, toolCallId: "call-1", toolName: "echo", params: { text: "ab", times: 2 } });
		// The returned object, whole, under `result` (a throw is the other shape).
		assert.deepEqual(response.result, { result: { content: [{ type: "text", text: "abab" }], details: { length: 2 } } });
		const update = host.frames.find((f) => f.type === "tool_update" && f.id === response.id);
		assert.deepEqual(update.partialResult, { content: [{ type: "text", text: "echoing call-1" }], details: { step: 1 } });
		assert.ok(host.frames.indexOf(update) < host.frames.indexOf(response), "updates precede the result");
	});

	test("flags from tau reach getFlag", async () => {
		host.send({ type: "flags", extension: basic, values: { shout: true } });
		const result = await host.result({ type: "execute_tool", extension: basic, toolCallId: "call-2", toolName: "echo", params: { text: "ab" } });
		assert.equal(result.result.content[0].text, "AB");
	});

	test("a throwing tool is an error result", async () => {
		assert.deepEqual(await host.result({ type: "execute_tool", extension: basic, toolCallId: "call-3", toolName: "fail", params: {} }), {
			content: [{ type: "text", text: "tool exploded" }],
			details: {},
			isError: true,
		});
	});

	test("cancel aborts the signal a running tool was given", async () => {
		const id = "cancel-me";
		host.send({ type: "execute_tool", id, extension: basic, toolCallId: "call-4", toolName: "wait", params: {} });
		await new Promise((resolve) => setTimeout(resolve, 100));
		assert.equal(host.frames.find((f) => f.type === "response" && f.id === id), undefined, "still running before cancel");
		host.send({ type: "cancel", id });
		const response = await host.waitFor((f) => f.type === "response" && f.id === id);
		assert.deepEqual(response.result, { result: { content: [{ type: "text", text: "aborted: true" }] } });
	});

	test("prepare_arguments runs the tool's prepareArguments", async () => {
		assert.deepEqual(await host.result({ type: "prepare_arguments", extension: basic, toolName: "wait", arguments: "old-style" }), { raw: "old-style" });
		assert.deepEqual(await host.result({ type: "prepare_arguments", extension: basic, toolName: "echo", arguments: { text: "x" } }), { text: "x" });
	});

	test("dialogs: ui_request / ui_response round trip, and a local timeout sends ui_cancel", async () => {
		const id = "cmd-greet";
		host.send({ type: "run_command", id, extension: basic, name: "greet", args: "now" });
		const ask = await host.waitFor((f) => f.type === "ui_request" && f.method === "input");
		assert.deepEqual({ ...ask, id: undefined }, { type: "ui_request", id: undefined, extension: basic, method: "input", title: "Your name?", placeholder: "name" });
		host.send({ type: "ui_response", id: ask.id, value: "Ada" });
		const confirm = await host.waitFor((f) => f.type === "ui_request" && f.method === "confirm");
		assert.equal(confirm.timeout, 50);
		// No answer: the host's own timer resolves pi's default and tells tau to stop waiting.
		const cancel = await host.waitFor((f) => f.type === "ui_cancel" && f.id === confirm.id);
		assert.ok(cancel);
		const notify = await host.waitFor((f) => f.type === "ui_request" && f.method === "notify" && f.message.startsWith("hello"));
		assert.equal(notify.message, "hello Ada now confirmed=false");
		assert.equal(notify.notifyType, "info");
		assert.equal((await host.waitFor((f) => f.type === "response" && f.id === id)).result, null);
	});

	test("cancel closes the request's open dialogs", async () => {
		const id = "cmd-greet-2";
		const since = host.frames.length;
		host.send({ type: "run_command", id, extension: basic, name: "greet", args: "" });
		const ask = await host.waitFor((f) => f.type === "ui_request" && f.method === "input", { since });
		host.send({ type: "cancel", id });
		await host.waitFor((f) => f.type === "ui_cancel" && f.id === ask.id, { since });
		// A cancelled request's later dialogs resolve their defaults at once, without a ui_request.
		const notify = await host.waitFor((f) => f.type === "ui_request" && f.method === "notify", { since });
		assert.equal(host.frames.slice(since).filter((f) => f.type === "ui_request" && f.method === "confirm").length, 0);
		assert.equal(notify.message, "hello undefined  confirmed=false");
		await host.waitFor((f) => f.type === "response" && f.id === id);
	});

	test("a throwing command answers with its error", async () => {
		const response = await host.request({ type: "run_command", extension: basic, name: "fails", args: "" });
		assert.equal(response.error, "command broke");
	});

	test("shutdown exits promptly", async () => {
		const started = Date.now();
		const { code } = await host.close();
		assert.equal(code, 0);
		assert.ok(Date.now() - started < 1000);
	});
});

describe("load failures", () => {
	test("each failure is reported with pi's text and the rest still load", async () => {
		const host = startHost();
		const paths = [
			fixture("throws-in-factory.ts"),
			fixture("not-a-function.ts"),
			fixture("syntax-error.ts"),
			fixture("action-in-factory.ts"),
			fixture("missing.ts"),
			fixture("commonjs.cts"),
		];
		const init = await host.initialize(paths);
		const byPath = Object.fromEntries(init.extensions.map((e) => [e.path, e]));
		assert.deepEqual(
			init.extensions.map((e) => e.path),
			paths,
		);
		assert.equal(byPath[paths[0]].error, "Failed to load extension: factory refused");
		assert.equal(byPath[paths[1]].error, `Extension does not export a valid factory function: ${paths[1]}`);
		assert.match(byPath[paths[2]].error, /^Failed to load extension: .*syntax-error\.ts:\d+:\d+/s);
		assert.equal(
			byPath[paths[3]].error,
			"Failed to load extension: Extension runtime not initialized. Action methods cannot be called during extension loading.",
		);
		assert.equal(byPath[paths[4]].error, `Extension path does not exist: ${paths[4]}`);
		assert.deepEqual(byPath[paths[5]].manifest.commands, [{ name: "cjs", description: "from CommonJS" }]);
		const response = await host.request(event(paths[0], { type: "session_start", reason: "startup" }));
		assert.match(response.error, /not loaded/);
		await host.close();
	});
});

describe("pi's module aliases", () => {
	test("both scopes and both TypeBox names resolve to the host's single copies", async () => {
		const host = startHost();
		const init = await host.initialize([fixture("aliases.ts")]);
		assert.equal(init.extensions[0].error, undefined);
		assert.equal(init.extensions[0].manifest.commands[0].description, Array(10).fill("true").join(","));
		await host.close();
	});
});

describe("the state mirror", () => {
	test("reads come from tau's state and own writes show at once", async () => {
		const actions = [];
		const host = startHost({
			actions: {
				append_entry: (frame) => {
					actions.push(frame);
					return { id: "e-new" };
				},
				set_model: (frame) => {
					actions.push(frame);
					return true;
				},
			},
		});
		const ext = fixture("session.ts");
		const entries = [
			{ type: "message", id: "a1", parentId: null, timestamp: "2025-01-01T00:00:00.000Z", message: { role: "user", content: "hi" } },
			{ type: "message", id: "b1", parentId: "a1", timestamp: "2025-01-01T00:00:01.000Z", message: { role: "assistant", content: [] } },
			{ type: "message", id: "b2", parentId: "a1", timestamp: "2025-01-01T00:00:02.000Z", message: { role: "assistant", content: [] } },
		];
		await host.initialize([ext], BASE_STATE);
		const state = { entries: { append: entries }, leafId: "b2", availableModels: MODELS };
		// A label arrives as an entry later; the leaf moves with the appended entry.
		const label = { type: "label", id: "l1", parentId: "b2", timestamp: "2025-01-01T00:00:03.000Z", targetId: "a1", label: "start" };
		state.entries.append.push(label);
		state.leafId = "l1";
		await host.result({ type: "run_command", extension: ext, name: "inspect", args: "", state });
		const seen = Object.fromEntries(
			host
				.framesOf("ui_request")
				.filter((f) => f.method === "notify")
				.map((f) => {
					const at = f.message.indexOf("=");
					return [f.message.slice(0, at), JSON.parse(f.message.slice(at + 1))];
				}),
		);
		assert.deepEqual(seen.branch, ["a1", "b2", "l1"]);
		assert.deepEqual(seen.branchFrom, ["a1", "b1"]);
		assert.equal(seen.leaf, "l1");
		assert.equal(seen.label, "start");
		assert.equal(seen.header, "s-1");
		assert.equal(seen.model, "m1");
		assert.equal(seen.found, "Mock Two");
		assert.equal(seen.auth, true);
		assert.deepEqual(seen.usage, BASE_STATE.contextUsage);
		assert.equal(seen.idle, true);
		assert.deepEqual(seen.afterAppend, ["message", "message", "message", "label", "custom"]);
		assert.equal(seen.appendParent, "l1");
		assert.deepEqual(seen.active, ["read", "bash"]);
		assert.equal(seen.thinking, "high");
		assert.equal(seen.name, "renamed");
		assert.equal(seen.confirmedLeaf, "e-new");
		assert.equal(seen.ok, true);
		assert.equal(seen.modelAfter, "m2");

		const sent = host.framesOf("action");
		assert.deepEqual(
			sent.map((f) => f.action),
			["append_entry", "set_active_tools", "set_thinking_level", "set_session_name", "set_model"],
		);
		assert.match(sent[0].entryId, /^[0-9a-f]{8}$/, "the host chooses the new entry's id");
		assert.deepEqual(sent[0], { type: "action", id: sent[0].id, extension: ext, action: "append_entry", customType: "marker", data: { n: 1 }, entryId: sent[0].entryId });
		assert.deepEqual(sent[1].names, ["read", "nonexistent", "bash"]);
		assert.equal(sent[1].id, undefined, "fire-and-forget actions carry no id");
		assert.deepEqual([sent[4].provider, sent[4].modelId], ["mock", "m2"]);
		await host.close();
	});

	test("registrations after initialize are sent as register frames", async () => {
		const host = startHost();
		const ext = fixture("session.ts");
		await host.initialize([ext]);
		await host.result({ type: "run_command", extension: ext, name: "register-late", args: "" });
		const registers = host.framesOf("register");
		assert.equal(registers.length, 2);
		assert.equal(registers[0].tools[0].name, "late");
		assert.deepEqual(registers[1], { type: "register", extension: ext, events: ["agent_end"] });
		await host.close();
	});

	test("errors nobody caught become extension_error for the extension and the host keeps running", async () => {
		const host = startHost();
		const ext = fixture("session.ts");
		await host.initialize([ext]);
		await host.result({ type: "run_command", extension: ext, name: "crash-later", args: "" });
		const timer = await host.waitFor((f) => f.type === "extension_error" && f.error === "timer exploded");
		assert.deepEqual(timer, { type: "extension_error", extension: ext, event: "uncaught", error: "timer exploded" });
		const rejection = await host.waitFor((f) => f.type === "extension_error" && f.error === "nobody caught this");
		assert.equal(rejection.extension, ext);
		assert.equal(await host.result({ type: "run_command", extension: ext, name: "register-late", args: "" }), null);
		await host.close();
	});

	test("reinitialize builds new instances; the old pi and ctx go stale; withSession gets the new one", async () => {
		const ext = fixture("session.ts");
		const host = startHost({
			actions: {
				// tau's side of ctx.newSession(): replace the session, re-instantiate, then answer.
				new_session: async () => {
					const again = await host.result({ type: "reinitialize", reason: "new" });
					assert.deepEqual(
						again.extensions[0].manifest.commands.map((c) => c.name),
						["inspect", "crash-later", "replace", "counts", "register-late"],
					);
					assert.equal(again.extensions[0].manifest.commands[3].description, "1/2", "a replacement re-runs the cached factory");
					return { cancelled: false };
				},
				send_message: () => null,
			},
		});
		await host.initialize([ext]);
		await host.result({ type: "run_command", extension: ext, name: "replace", args: "" });
		const note = host.framesOf("ui_request").find((f) => f.method === "notify");
		assert.equal(note.message, "old pi stale, old ctx stale");
		const sent = host.framesOf("action").find((f) => f.action === "send_message");
		assert.ok(sent.id, "a withSession ctx's sendMessage waits for tau");
		assert.deepEqual(sent.message, { customType: "after", content: "replaced", display: true });
		const reloaded = await host.result({ type: "reinitialize", reason: "reload" });
		assert.equal(reloaded.extensions[0].manifest.commands[3].description, "2/3", "a reload re-evaluates the module");
		await host.close();
	});

	test("without UI (print/json) dialogs take their defaults and nothing reaches the wire", async () => {
		const host = startHost();
		const path = example("rpc-demo.ts");
		await host.initialize([path], BASE_STATE, { mode: "print", hasUI: false });
		await host.result(event(path, { type: "session_start", reason: "startup" }));
		assert.deepEqual(await host.result(event(path, { type: "tool_call", toolCallId: "c", toolName: "bash", input: { command: "sudo ls" } })), {
			block: true,
			reason: "Dangerous command blocked (no UI)",
			input: { command: "sudo ls" },
		});
		await host.result({ type: "run_command", extension: path, name: "rpc-input", args: "" });
		assert.deepEqual(host.framesOf("ui_request"), []);
		await host.close();
	});

	test("stdin EOF ends the host", async () => {
		const host = startHost();
		await host.initialize([]);
		host.child.stdin.end();
		const { code } = await host.exited;
		assert.equal(code, 0);
	});
});

/** What each pi example registers (ext §9); the manifest is checked field by field. */
const EXAMPLES = {
	"rpc-demo.ts": {
		tools: [],
		commands: ["rpc-input", "rpc-editor", "rpc-prefill"],
		flags: [],
		events: ["session_start", "turn_start", "turn_end", "tool_call", "session_before_switch"],
		shortcuts: [],
	},
	"plan-mode/index.ts": {
		tools: [],
		commands: ["plan", "todos"],
		flags: [{ name: "plan", type: "boolean", default: false, description: "Start in plan mode (read-only exploration)" }],
		events: ["tool_call", "context", "before_agent_start", "turn_end", "agent_end", "session_start"],
		shortcuts: ["ctrl+alt+p"],
	},
	"todo.ts": { tools: ["todo"], commands: ["todos"], flags: [], events: ["session_start", "session_tree"], shortcuts: [] },
	"preset.ts": {
		tools: [],
		commands: ["preset"],
		flags: [{ name: "preset", type: "string", description: "Preset configuration to use" }],
		events: ["before_agent_start", "session_start", "turn_start"],
		shortcuts: ["ctrl+shift+u"],
	},
	"git-checkpoint.ts": { tools: [], commands: [], flags: [], events: ["tool_result", "turn_start", "session_before_fork", "agent_end"], shortcuts: [] },
	"input-transform.ts": { tools: [], commands: [], flags: [], events: ["input"], shortcuts: [] },
	"trigger-compact.ts": { tools: [], commands: ["trigger-compact"], flags: [], events: ["turn_end"], shortcuts: [] },
	"dynamic-tools.ts": { tools: [], commands: ["add-echo-tool"], flags: [], events: ["session_start"], shortcuts: [] },
	"structured-output.ts": { tools: ["structured_output"], commands: [], flags: [], events: [], shortcuts: [] },
};

describe("pi's examples load unmodified", () => {
	for (const [name, expected] of Object.entries(EXAMPLES)) {
		test(name, async () => {
			const host = startHost({ actions: { append_entry: () => ({ id: "e1" }), set_model: () => true } });
			const path = example(name);
			const init = await host.initialize([path]);
			const { manifest, error } = init.extensions[0];
			assert.equal(error, undefined, error);
			assert.deepEqual(
				manifest.tools.map((t) => t.name),
				expected.tools,
			);
			assert.deepEqual(
				manifest.commands.map((c) => c.name),
				expected.commands,
			);
			assert.deepEqual(manifest.flags, expected.flags);
			assert.deepEqual(manifest.events, expected.events);
			assert.deepEqual(manifest.shortcuts, expected.shortcuts);
			const response = await host.request(event(path, { type: "session_start", reason: "startup" }));
			assert.equal(response.error, undefined);
			assert.equal(response.result, null);
			await new Promise((resolve) => setTimeout(resolve, 50));
			assert.deepEqual(host.framesOf("extension_error"), []);
			await host.close();
		});
	}

	test("todo.ts: the tool schema is plain JSON Schema and execute keeps state", async () => {
		const host = startHost();
		const path = example("todo.ts");
		const init = await host.initialize([path]);
		assert.deepEqual(init.extensions[0].manifest.tools[0].parameters, {
			type: "object",
			required: ["action"],
			properties: {
				action: { type: "string", enum: ["list", "add", "toggle", "clear"] },
				text: { type: "string", description: "Todo text (for add)" },
				id: { type: "number", description: "Todo ID (for toggle)" },
			},
		});
		await host.result(event(path, { type: "session_start", reason: "startup" }));
		const added = await host.result({ type: "execute_tool", extension: path, toolCallId: "t1", toolName: "todo", params: { action: "add", text: "write tests" } });
		assert.equal(added.result.content[0].text, "Added todo #1: write tests");
		const listed = await host.result({ type: "execute_tool", extension: path, toolCallId: "t2", toolName: "todo", params: { action: "list" } });
		assert.equal(listed.result.content[0].text, "[ ] #1: write tests");
		await host.close();
	});

	test("preset.ts: a --preset flag applies model, thinking level and tools through actions", async () => {
		writeFileSync(join(agentDir, "presets.json"), JSON.stringify({ fast: { provider: "mock", model: "m2", thinkingLevel: "high", tools: ["read", "grep", "nope"] } }));
		const host = startHost({ actions: { set_model: () => true, append_entry: () => ({ id: "e1" }) } });
		const path = example("preset.ts");
		await host.initialize([path]);
		host.send({ type: "flags", extension: path, values: { preset: "fast" } });
		await host.result(event(path, { type: "session_start", reason: "startup" }));
		const actions = host.framesOf("action");
		assert.deepEqual(
			actions.map((a) => a.action),
			["set_model", "set_thinking_level", "set_active_tools"],
		);
		assert.deepEqual(actions[2].names, ["read", "grep"]);
		const notes = host.framesOf("ui_request").filter((f) => f.method === "notify").map((f) => f.message);
		assert.deepEqual(notes, ['Preset "fast": Unknown tools: nope', 'Preset "fast" activated']);
		const status = host.framesOf("ui_request").find((f) => f.method === "setStatus");
		assert.match(status.statusText, /\u001b\[38;5;\d+mpreset:fast\u001b\[39m/);
		await host.result(event(path, { type: "turn_start", turnIndex: 0, timestamp: 0 }));
		const append = await host.waitFor((f) => f.type === "action" && f.action === "append_entry");
		assert.deepEqual([append.customType, append.data], ["preset-state", { name: "fast" }]);
		await host.close();
	});

	test("dynamic-tools.ts: a tool registered in session_start is announced before the answer", async () => {
		const host = startHost();
		const path = example("dynamic-tools.ts");
		await host.initialize([path]);
		const response = await host.request(event(path, { type: "session_start", reason: "startup" }));
		const register = host.frames.find((f) => f.type === "register");
		assert.ok(host.frames.indexOf(register) < host.frames.indexOf(response));
		assert.equal(register.tools[0].name, "echo_session");
		assert.equal(register.tools[0].promptSnippet, "Echo back user-provided text with [session] prefix");
		await host.close();
	});

	test("input-transform.ts: transform and handled", async () => {
		const host = startHost();
		const path = example("input-transform.ts");
		await host.initialize([path]);
		assert.deepEqual(await host.result(event(path, { type: "input", text: "?quick what", source: "rpc" })), {
			action: "transform",
			text: "Respond briefly in 1-2 sentences: what",
		});
		assert.deepEqual(await host.result(event(path, { type: "input", text: "ping", source: "rpc" })), { action: "handled" });
		await host.close();
	});

	test("trigger-compact.ts: /trigger-compact sends a compact action and reports its completion", async () => {
		const host = startHost({ actions: { compact: () => ({ summary: "s" }) } });
		const path = example("trigger-compact.ts");
		await host.initialize([path]);
		await host.result({ type: "run_command", extension: path, name: "trigger-compact", args: "be brief" });
		const compact = await host.waitFor((f) => f.type === "action" && f.action === "compact");
		assert.equal(compact.customInstructions, "be brief");
		await host.waitFor((f) => f.type === "ui_request" && f.message === "Compaction completed");
		await host.close();
	});

	test("plan-mode: --plan restricts tools at session_start and blocks unsafe bash", async () => {
		const host = startHost({ actions: { append_entry: () => ({ id: "e1" }) } });
		const path = example("plan-mode/index.ts");
		await host.initialize([path]);
		host.send({ type: "flags", extension: path, values: { plan: true } });
		await host.result(event(path, { type: "session_start", reason: "startup" }));
		const setTools = await host.waitFor((f) => f.type === "action" && f.action === "set_active_tools");
		assert.deepEqual(setTools.names, ["read", "bash", "grep", "find", "ls", "questionnaire"]);
		const blocked = await host.result(event(path, { type: "tool_call", toolCallId: "c", toolName: "bash", input: { command: "rm -rf x" } }));
		assert.equal(blocked.block, true);
		assert.match(blocked.reason, /^Plan mode: command blocked/);
		assert.deepEqual(await host.result(event(path, { type: "tool_call", toolCallId: "d", toolName: "bash", input: { command: "ls" } })), { input: { command: "ls" } });
		await host.close();
	});
});

// Every `action` frame a host wrote in these tests has the shape tau's protocol schema gives
// it (`ExtensionAction` in docs/protocol.schema.json, generated from tau's own types).
describe("the frames the host writes", () => {
	test("every action frame matches tau's schema", async () => {
		const schema = JSON.parse(readFileSync(join(here, "..", "..", "..", "docs", "protocol.schema.json"), "utf8"));
		const check = Compile({ $defs: schema.$defs, $ref: "#/$defs/ExtensionAction" });
		const actions = hosts.flatMap((host) => host.framesOf("action"));
		assert.ok(actions.length >= 10, `the tests sent actions (${actions.length})`);
		for (const { type, id, extension, ...action } of actions) {
			assert.ok(check.Check(action), `${JSON.stringify(action)} does not match ExtensionAction`);
		}
	});
	test("every ui_request frame matches tau's schema", async () => {
		const schema = JSON.parse(readFileSync(join(here, "..", "..", "..", "docs", "protocol.schema.json"), "utf8"));
		const check = Compile({ $defs: schema.$defs, $ref: "#/$defs/ExtensionUiRequestFrame" });
		const requests = hosts.flatMap((host) => host.framesOf("ui_request"));
		assert.ok(requests.length >= 3, `the tests asked for dialogs (${requests.length})`);
		for (const { type, ...request } of requests) {
			assert.ok(check.Check(request), `${JSON.stringify(request)} does not match ExtensionUiRequestFrame`);
		}
	});
});
