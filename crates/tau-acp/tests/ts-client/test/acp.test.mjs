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
async function withTau(d, op, { onPermission, args = [], fs } = {}) {
  const child = spawn(TAU, ["--mode", "acp", ...args], {
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
    .onRequest(methods.client.fs.writeTextFile, async ({ params }) => fs.write(params));
  const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  try {
    return await app.connectWith(stream, async (ctx) => {
      const init = await ctx.request(methods.agent.initialize, {
        protocolVersion: 1,
        clientCapabilities: fs ? { fs: { readTextFile: true, writeTextFile: true } } : {},
      });
      return op(ctx, updates, init);
    });
  } finally {
    child.kill();
  }
}

const kinds = (updates) => updates.map((n) => n.update.sessionUpdate);
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
      const call = updates.find((n) => n.update.sessionUpdate === "tool_call").update;
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
