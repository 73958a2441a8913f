// `tau --mode acp` driven by the official TypeScript ACP client (@agentclientprotocol/sdk,
// protocol v1) against tau-mock-llm: what an editor does, through the client editors use.
//
// Needs the debug binaries: `cargo build -p tau -p tau-mock-llm` (or TAU_BIN / MOCK_BIN).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Readable, Writable } from "node:stream";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const root = resolve(fileURLToPath(import.meta.url), "../../../../../..");
const TAU = process.env.TAU_BIN ?? join(root, "target/debug/tau");
const MOCK = process.env.MOCK_BIN ?? join(root, "target/debug/tau-mock-llm");

/** Starts tau-mock-llm on a free port; resolves with its URL and a stop function. */
async function startMock() {
  const child = spawn(MOCK, ["--port", "0"], { stdio: ["ignore", "pipe", "inherit"] });
  const line = await new Promise((done, fail) => {
    const lines = createInterface({ input: child.stdout });
    lines.once("line", done);
    child.once("error", fail);
  });
  const { url } = JSON.parse(line);
  return {
    url,
    push: async (...replies) => {
      const response = await fetch(`${url}/_mock/replies`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(replies),
      });
      assert.equal(response.ok, true);
    },
    requests: async () => (await fetch(`${url}/_mock/requests`)).json(),
    stop: () => child.kill(),
  };
}

/** Fresh agent, home and working directories, with one model served by `mock`. */
function dirs(mock, { reasoning = false } = {}) {
  const base = mkdtempSync(join(tmpdir(), "tau-acp-ts-"));
  const d = { agent: join(base, "agent"), home: join(base, "home"), cwd: join(base, "cwd") };
  for (const dir of Object.values(d)) mkdirSync(dir, { recursive: true });
  const models = {
    providers: {
      mock: {
        baseUrl: `${mock.url}/v1`,
        api: "openai-completions",
        apiKey: "k",
        models: [{ id: "mock-1", reasoning, contextWindow: 100000, maxTokens: 4096 }],
      },
    },
  };
  writeFileSync(join(d.agent, "models.json"), JSON.stringify(models));
  return d;
}

/**
 * Spawns `tau --mode acp` in `d` and runs `op(ctx, updates)` on a connected client;
 * `updates` collects every `session/update` as it arrives. tau is stopped afterwards.
 */
async function withTau(d, op, { onPermission, args = [], fs, terminal } = {}) {
  // Tools run without asking unless a test asks for a mode: what it checks is not the
  // permission request (tested on its own below).
  const mode = args.includes("--permission-mode") ? [] : ["--permission-mode", "allowAll"];
  const child = spawn(TAU, ["--mode", "acp", ...mode, ...args], {
    cwd: d.cwd,
    env: { PATH: process.env.PATH, HOME: d.home, TAU_AGENT_DIR: d.agent },
    stdio: ["pipe", "pipe", "ignore"],
  });
  const updates = [];
  const app = client({ name: "tau-acp-ts-tests" })
    .onNotification(methods.client.session.update, ({ params }) => {
      updates.push(params);
    })
    .onRequest(methods.client.session.requestPermission, async ({ params }) => {
      assert.ok(onPermission, "no permission request was expected");
      return onPermission(params);
    })
    .onRequest(methods.client.fs.readTextFile, async ({ params }) => fs.read(params))
    .onRequest(methods.client.fs.writeTextFile, async ({ params }) => fs.write(params))
    .onRequest(methods.client.terminal.create, async ({ params }) => terminal.create(params))
    .onRequest(methods.client.terminal.output, async ({ params }) => terminal.output(params))
    .onRequest(methods.client.terminal.waitForExit, async ({ params }) => terminal.waitForExit(params))
    .onRequest(methods.client.terminal.kill, async ({ params }) => terminal.kill(params))
    .onRequest(methods.client.terminal.release, async ({ params }) => terminal.release(params));
  const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  try {
    return await app.connectWith(stream, async (ctx) => {
      const init = await ctx.request(methods.agent.initialize, {
        protocolVersion: 1,
        clientCapabilities: {
          ...(fs ? { fs: { readTextFile: true, writeTextFile: true } } : {}),
          ...(terminal ? { terminal: true } : {}),
        },
      });
      return op(ctx, updates, init);
    });
  } finally {
    child.kill();
  }
}

const kinds = (updates) => updates.map((n) => n.update.sessionUpdate);

/**
 * What a client shows of the tool call `id` by the time it runs: its `tool_call` (announced
 * as the model starts writing it) with the `tool_call_update`s before `in_progress` laid over
 * it, field by field.
 */
function shownBeforeRunning(updates, id) {
  const shown = {};
  for (const { update } of updates.filter((n) => n.update.toolCallId === id)) {
    if (update.sessionUpdate === "tool_call_update" && update.status === "in_progress") break;
    Object.assign(shown, update);
  }
  return shown;
}
const text = (updates, kind) =>
  updates
    .filter((n) => n.update.sessionUpdate === kind)
    .map((n) => n.update.content.text)
    .join("");

test("initialize, a new session, a streamed prompt that ends its turn", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock);
    await mock.push({
      content: [
        { type: "thinking", text: "hmm" },
        { type: "text", text: "Hello there", chunks: ["Hel", "lo", " there"] },
      ],
    });
    await withTau(d, async (ctx, updates, init) => {
      assert.equal(init.protocolVersion, 1);
      assert.equal(init.agentCapabilities.loadSession, true);
      assert.deepEqual(
        init.authMethods.map((m) => m.id),
        ["env", "auth-json"],
      );
      const session = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
      assert.equal(session.configOptions[0].currentValue, "mock/mock-1");
      const answer = await ctx.request(methods.agent.session.prompt, {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text: "hi" }],
      });
      assert.equal(answer.stopReason, "end_turn");
      assert.equal(text(updates, "agent_message_chunk"), "Hello there");
      assert.equal(text(updates, "agent_thought_chunk"), "hmm");
      assert.ok(kinds(updates).includes("available_commands_update"));
    });
  } finally {
    mock.stop();
  }
});

test("an edit is a tool call with a diff", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock);
    writeFileSync(join(d.cwd, "a.txt"), "keep\nold\n");
    await mock.push(
      {
        content: [
          {
            type: "toolCall",
            id: "call_1",
            name: "edit",
            arguments: { path: "a.txt", edits: [{ oldText: "old", newText: "new" }] },
          },
        ],
      },
      "done",
    );
    await withTau(d, async (ctx, updates) => {
      const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
      const answer = await ctx.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "edit it" }],
      });
      assert.equal(answer.stopReason, "end_turn");
      const call = shownBeforeRunning(updates, "call_1");
      assert.equal(call.kind, "edit");
      assert.deepEqual(call.content, [
        { type: "diff", path: join(d.cwd, "a.txt"), oldText: "old", newText: "new" },
      ]);
      const done = updates.find(
        (n) => n.update.sessionUpdate === "tool_call_update" && n.update.status === "completed",
      );
      assert.equal(done.update.locations[0].line, 2);
      assert.equal(readFileSync(join(d.cwd, "a.txt"), "utf8"), "keep\nnew\n");
    });
  } finally {
    mock.stop();
  }
});

test("session/cancel ends a streamed reply with stopReason cancelled", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock);
    const words = Array.from({ length: 200 }, (_, i) => `w${i} `);
    await mock.push({
      content: [{ type: "text", text: words.join(""), chunks: words }],
      chunkDelayMs: 50,
    });
    await withTau(d, async (ctx, updates) => {
      const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
      const answer = ctx.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "talk" }],
      });
      while (!kinds(updates).includes("agent_message_chunk")) {
        await new Promise((r) => setTimeout(r, 10));
      }
      const sent = Date.now();
      await ctx.notify(methods.agent.session.cancel, { sessionId });
      assert.equal((await answer).stopReason, "cancelled");
      assert.ok(Date.now() - sent < 500, `cancel took ${Date.now() - sent} ms`);
      assert.ok(!text(updates, "agent_message_chunk").includes("w199"));
    });
  } finally {
    mock.stop();
  }
});

test("session/list and session/load replay a stored session", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock);
    await mock.push("noted");
    const sessionId = await withTau(d, async (ctx) => {
      const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
      await ctx.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "remember plum" }],
      });
      return sessionId;
    });
    await mock.push("plum");
    await withTau(d, async (ctx, updates) => {
      const listed = await ctx.request(methods.agent.session.list, { cwd: d.cwd });
      assert.deepEqual(
        listed.sessions.map((s) => s.sessionId),
        [sessionId],
      );
      await ctx.request(methods.agent.session.load, { sessionId, cwd: d.cwd, mcpServers: [] });
      assert.equal(text(updates, "user_message_chunk"), "remember plum");
      assert.equal(text(updates, "agent_message_chunk"), "noted");
      updates.length = 0;
      const answer = await ctx.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "which word?" }],
      });
      assert.equal(answer.stopReason, "end_turn");
      assert.equal(text(updates, "agent_message_chunk"), "plum");
      const last = (await mock.requests()).at(-1);
      assert.match(JSON.stringify(last.body), /remember plum/);
    });
  } finally {
    mock.stop();
  }
});

test("the thinking level is a session config option", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock, { reasoning: true });
    await withTau(d, async (ctx) => {
      const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
      const set = await ctx.request(methods.agent.session.setConfigOption, {
        sessionId,
        configId: "thinking",
        value: "high",
      });
      const thinking = set.configOptions.find((o) => o.id === "thinking");
      assert.equal(thinking.currentValue, "high");
      await assert.rejects(
        ctx.request(methods.agent.session.setConfigOption, {
          sessionId,
          configId: "thinking",
          value: "extreme",
        }),
      );
    });
  } finally {
    mock.stop();
  }
});

test("an extension's confirm dialog is a permission round trip", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock);
    // tau's test extension asks "Send?" before a prompt "ask" goes on, and on yes rewrites it.
    const guard = join(root, "crates/tau/tests/fixtures/extensions/guard.py");
    await mock.push("sent");
    const asked = [];
    await withTau(
      d,
      async (ctx) => {
        const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
        const answer = await ctx.request(methods.agent.session.prompt, {
          sessionId,
          prompt: [{ type: "text", text: "ask" }],
        });
        assert.equal(answer.stopReason, "end_turn");
        assert.equal(asked.length, 1);
        assert.equal(asked[0].toolCall.title, "Send?");
        const [request] = await mock.requests();
        assert.match(JSON.stringify(request.body), /asked and confirmed/);
      },
      {
        args: ["-e", guard],
        onPermission: (params) => {
          asked.push(params);
          const yes = params.options.find((o) => o.kind === "allow_once");
          return { outcome: { outcome: "selected", optionId: yes.optionId } };
        },
      },
    );
  } finally {
    mock.stop();
  }
});

test("the file tools read and write the editor's buffers when it offers fs", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock);
    writeFileSync(join(d.cwd, "buf.txt"), "disk\n");
    const buffers = new Map([[join(d.cwd, "buf.txt"), "unsaved change\n"]]);
    await mock.push(
      {
        content: [
          {
            type: "toolCall",
            id: "e1",
            name: "edit",
            arguments: { path: "buf.txt", edits: [{ oldText: "unsaved", newText: "saved" }] },
          },
        ],
      },
      "done",
    );
    await withTau(
      d,
      async (ctx) => {
        const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
        const answer = await ctx.request(methods.agent.session.prompt, {
          sessionId,
          prompt: [{ type: "text", text: "edit the buffer" }],
        });
        assert.equal(answer.stopReason, "end_turn");
        assert.equal(buffers.get(join(d.cwd, "buf.txt")), "saved change\n");
        assert.equal(readFileSync(join(d.cwd, "buf.txt"), "utf8"), "disk\n");
      },
      {
        fs: {
          read: ({ path }) => ({ content: buffers.get(path) }),
          write: ({ path, content }) => {
            buffers.set(path, content);
            return {};
          },
        },
      },
    );
  } finally {
    mock.stop();
  }
});

// Issue 41: what editors and ACP command-line clients expect across processes and requests.

/** Resolves once `check()` holds, polling; fails after a few seconds. */
async function until(check, what) {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const ALLOW_ALL = ["--permission-mode", "allowAll"];

test("a session made in one process is loaded, configured and prompted in others", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock, { reasoning: true });
    // As acpx runs `sessions new`, `set thinking low` and `prompt`: one process each.
    const sessionId = await withTau(d, async (ctx) => {
      const made = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
      return made.sessionId;
    });
    await withTau(d, async (ctx) => {
      const listed = await ctx.request(methods.agent.session.list, { cwd: d.cwd });
      assert.deepEqual(
        listed.sessions.map((s) => s.sessionId),
        [sessionId],
      );
      await ctx.request(methods.agent.session.load, { sessionId, cwd: d.cwd, mcpServers: [] });
      const set = await ctx.request(methods.agent.session.setConfigOption, {
        sessionId,
        configId: "thinking",
        value: "low",
      });
      assert.equal(set.configOptions.find((o) => o.id === "thinking").currentValue, "low");
    });
    await mock.push("hello from a later process");
    await withTau(d, async (ctx, updates) => {
      const loaded = await ctx.request(methods.agent.session.load, {
        sessionId,
        cwd: d.cwd,
        mcpServers: [],
      });
      assert.equal(loaded.configOptions.find((o) => o.id === "thinking").currentValue, "low");
      const answer = await ctx.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "say hello" }],
      });
      assert.equal(answer.stopReason, "end_turn");
      assert.equal(text(updates, "agent_message_chunk"), "hello from a later process");
      const [request] = await mock.requests();
      assert.equal(request.body.reasoning_effort, "low");
      const listed = await ctx.request(methods.agent.session.list, { cwd: d.cwd });
      assert.deepEqual(
        listed.sessions.map((s) => [s.sessionId, s.title]),
        [[sessionId, "say hello"]],
      );
    });
  } finally {
    mock.stop();
  }
});

test("bash runs in the editor's terminal, which the tool call embeds", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock);
    await mock.push(
      { content: [{ type: "toolCall", id: "b1", name: "bash", arguments: { command: "ls -la" } }] },
      "done",
    );
    const calls = [];
    const terminal = {
      create: (params) => {
        calls.push(["create", params]);
        return { terminalId: "term-1" };
      },
      waitForExit: (params) => {
        calls.push(["waitForExit", params]);
        return { exitCode: 0 };
      },
      output: (params) => {
        calls.push(["output", params]);
        return { output: "total 0\r\nfile-from-the-editor\r\n", truncated: false };
      },
      kill: (params) => {
        calls.push(["kill", params]);
        return {};
      },
      release: (params) => {
        calls.push(["release", params]);
        return {};
      },
    };
    await withTau(
      d,
      async (ctx, updates) => {
        const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
        const answer = await ctx.request(methods.agent.session.prompt, {
          sessionId,
          prompt: [{ type: "text", text: "list the files" }],
        });
        assert.equal(answer.stopReason, "end_turn");
        assert.deepEqual(
          calls.map(([name]) => name),
          ["create", "waitForExit", "output", "release"],
        );
        const [, create] = calls[0];
        assert.equal(create.sessionId, sessionId);
        assert.deepEqual(create.args, ["-c", "ls -la"]);
        assert.equal(create.cwd, d.cwd);
        assert.equal(create.outputByteLimit, 1 << 20);
        const embedded = updates.find(
          (n) =>
            n.update.toolCallId === "b1" &&
            n.update.content?.some((c) => c.type === "terminal" && c.terminalId === "term-1"),
        );
        assert.ok(embedded, "the call embeds the terminal");
        const done = updates.find((n) => n.update.toolCallId === "b1" && n.update.status === "completed");
        assert.equal(done.update.content, undefined, "the terminal stays the call's content");
        // The model reads the output as tau's own bash gives it.
        const [, second] = await mock.requests();
        assert.match(JSON.stringify(second.body), /total 0\\nfile-from-the-editor\\n/);
      },
      { terminal, args: ALLOW_ALL },
    );
  } finally {
    mock.stop();
  }
});

test("session/cancel kills and releases the editor's terminal", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock);
    await mock.push(
      { content: [{ type: "toolCall", id: "b1", name: "bash", arguments: { command: "sleep 100" } }] },
      "after the abort",
    );
    const calls = [];
    let exited;
    const terminal = {
      create: () => {
        calls.push("create");
        return { terminalId: "term-9" };
      },
      waitForExit: () => {
        calls.push("waitForExit");
        return new Promise((resolve) => {
          exited = resolve;
        });
      },
      kill: () => {
        calls.push("kill");
        exited?.({ signal: "SIGKILL" });
        return {};
      },
      output: () => {
        calls.push("output");
        return { output: "partial output\r\n", truncated: false };
      },
      release: () => {
        calls.push("release");
        return {};
      },
    };
    await withTau(
      d,
      async (ctx) => {
        const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
        const answer = ctx.request(methods.agent.session.prompt, {
          sessionId,
          prompt: [{ type: "text", text: "wait" }],
        });
        await until(() => calls.includes("waitForExit"), "the command to run");
        await ctx.notify(methods.agent.session.cancel, { sessionId });
        assert.equal((await answer).stopReason, "cancelled");
        assert.deepEqual(calls, ["create", "waitForExit", "kill", "output", "release"]);
        // The model's next request holds the call's result as tau words an abort.
        const next = await ctx.request(methods.agent.session.prompt, {
          sessionId,
          prompt: [{ type: "text", text: "go on" }],
        });
        assert.equal(next.stopReason, "end_turn");
        const last = (await mock.requests()).at(-1);
        assert.match(JSON.stringify(last.body), /partial output\\n\\n\\nCommand aborted/);
      },
      { terminal, args: ALLOW_ALL },
    );
  } finally {
    mock.stop();
  }
});

test("session/fork, session/close and session/resume; titles in session/list", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock);
    await mock.push("noted", "plum, in the fork", "still plum");
    await withTau(d, async (ctx, updates, init) => {
      const caps = init.agentCapabilities.sessionCapabilities;
      for (const cap of ["list", "resume", "close", "fork"]) assert.ok(caps[cap], cap);
      const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
      await ctx.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "Remember   the word\nplum" }],
      });
      const fork = await ctx.request("session/fork", { sessionId, cwd: d.cwd, mcpServers: [] });
      assert.notEqual(fork.sessionId, sessionId);
      await ctx.request(methods.agent.session.prompt, {
        sessionId: fork.sessionId,
        prompt: [{ type: "text", text: "which word?" }],
      });
      assert.match(JSON.stringify((await mock.requests()).at(-1).body), /Remember {3}the word\\nplum/);

      await ctx.request(methods.agent.session.close, { sessionId });
      await assert.rejects(
        ctx.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "hi" }] }),
      );
      updates.length = 0;
      const resumed = await ctx.request(methods.agent.session.resume, { sessionId, cwd: d.cwd, mcpServers: [] });
      assert.ok(resumed.configOptions.length > 0);
      assert.ok(!kinds(updates).includes("user_message_chunk"), "no history replayed");
      const answer = await ctx.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "and now?" }],
      });
      assert.equal(answer.stopReason, "end_turn");
      assert.equal(text(updates, "agent_message_chunk"), "still plum");

      const listed = await ctx.request(methods.agent.session.list, { cwd: d.cwd });
      assert.deepEqual(
        listed.sessions.map((s) => s.title),
        ["Remember the word plum", "Remember the word plum"],
      );
      assert.deepEqual(
        new Set(listed.sessions.map((s) => s.sessionId)),
        new Set([sessionId, fork.sessionId]),
      );
    });
  } finally {
    mock.stop();
  }
});

test("a tool call is announced while the model writes it", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock);
    writeFileSync(join(d.cwd, "notes.txt"), "some notes\n");
    const args = { path: "notes.txt", offset: 1, limit: 10 };
    await mock.push(
      {
        content: [{ type: "toolCall", id: "r1", name: "read", arguments: args }],
        chunkSize: 4,
        chunkDelayMs: 25,
      },
      "read it",
    );
    await withTau(
      d,
      async (ctx, updates) => {
        const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
        const answer = ctx.request(methods.agent.session.prompt, {
          sessionId,
          prompt: [{ type: "text", text: "read the notes" }],
        });
        await until(() => updates.some((n) => n.update.toolCallId === "r1"), "the announcement");
        const [first] = updates.filter((n) => n.update.toolCallId === "r1");
        assert.equal(first.update.sessionUpdate, "tool_call");
        assert.deepEqual(first.update.rawInput, {});
        assert.equal((await answer).stopReason, "end_turn");
        const mine = updates.filter((n) => n.update.toolCallId === "r1").map((n) => n.update);
        const running = mine.findIndex((u) => u.status === "in_progress");
        const streamed = mine.slice(1, running).filter((u) => u.rawInput);
        assert.ok(streamed.length >= 2, `partial arguments came: ${JSON.stringify(streamed)}`);
        assert.notDeepEqual(streamed[0].rawInput, args);
        assert.deepEqual(streamed.at(-1).rawInput, args);
        assert.equal(shownBeforeRunning(updates, "r1").title, "Read notes.txt");
      },
      { args: ALLOW_ALL },
    );
  } finally {
    mock.stop();
  }
});

test("a retry is shown to the editor as a thought", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock);
    writeFileSync(join(d.agent, "settings.json"), JSON.stringify({ retry: { baseDelayMs: 10 } }));
    await mock.push({ fault: { type: "rateLimited" } }, "recovered");
    await withTau(d, async (ctx, updates) => {
      const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
      const answer = await ctx.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "hi" }],
      });
      assert.equal(answer.stopReason, "end_turn");
      assert.match(text(updates, "agent_thought_chunk"), /Retrying in 10 ms \(attempt 1\/3\): /);
      assert.equal(text(updates, "agent_message_chunk"), "recovered");
    });
  } finally {
    mock.stop();
  }
});

test("tools ask through session/request_permission, and the modes are the session's", async () => {
  const mock = await startMock();
  try {
    const d = dirs(mock);
    const call = (id, command) => ({
      content: [{ type: "toolCall", id, name: "bash", arguments: { command } }],
    });
    await mock.push(call("b1", "echo one > one.txt"), call("b2", "echo two > two.txt"), "done");
    const asked = [];
    await withTau(
      d,
      async (ctx, updates) => {
        const created = await ctx.request(methods.agent.session.new, { cwd: d.cwd, mcpServers: [] });
        assert.equal(created.modes.currentModeId, "ask");
        assert.deepEqual(
          created.modes.availableModes.map((m) => m.id),
          ["ask", "acceptEdits", "plan", "allowAll"],
        );
        const { sessionId } = created;
        const answer = await ctx.request(methods.agent.session.prompt, {
          sessionId,
          prompt: [{ type: "text", text: "write two files" }],
        });
        assert.equal(answer.stopReason, "end_turn");
        // The first allowed once, the second refused.
        assert.deepEqual(
          asked.map((p) => [p.toolCall.toolCallId, p.toolCall.kind]),
          [
            ["b1", "execute"],
            ["b2", "execute"],
          ],
        );
        assert.equal(readFileSync(join(d.cwd, "one.txt"), "utf8"), "one\n");
        assert.throws(() => readFileSync(join(d.cwd, "two.txt")));
        const failed = updates.find(
          (n) => n.update.toolCallId === "b2" && n.update.status === "failed",
        );
        assert.ok(failed, "the refused call failed");
        // The editor switches to plan mode; tau says so.
        await ctx.request(methods.agent.session.setMode, { sessionId, modeId: "plan" });
        assert.ok(
          updates.some(
            (n) => n.update.sessionUpdate === "current_mode_update" && n.update.currentModeId === "plan",
          ),
        );
      },
      {
        args: ["--permission-mode", "ask"],
        onPermission: (params) => {
          asked.push(params);
          const kind = asked.length === 1 ? "allow_once" : "reject_once";
          const option = params.options.find((o) => o.kind === kind);
          return { outcome: { outcome: "selected", optionId: option.optionId } };
        },
      },
    );
  } finally {
    mock.stop();
  }
});
