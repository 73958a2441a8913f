#!/usr/bin/env python3
"""MCP benchmark (issue 23): tau's own MCP client against pi 0.79 with the npm
`pi-mcp-adapter` extension, on the same servers, in the same run.

Two figures per server, each also measured against the server alone:

- start: from spawning the agent (a prompt already written to its stdin) to the end of the
  first MCP tool call (`tool_execution_end`, not an error). The model (tau-mock-llm) answers
  the prompt at once with a call of the server's `echo`. The server alone: from spawning it
  to its answer to `initialize`, by this script speaking MCP to it directly.
- per call: the time between a call's `tool_execution_start` and `tool_execution_end` lines
  as this script reads them, over --calls sequential calls in one run (one call per model
  reply), minus the median round trip of the same `tools/call` sent by this script straight
  to the server, with the same idle time before each call as the agent's run had (its median
  from a call's end to the next one's start: the model's turn). The idle time matters: a
  server woken after a few idle milliseconds answers slower than one called back to back
  (server-everything: 0.3 ms back to back, 0.9 ms after 5 ms idle). What is left is the
  agent's own work per call.

Servers: `rust` is tau-mcp's test server (a Rust binary, starts in milliseconds: what the
agent adds shows), `everything` is @modelcontextprotocol/server-everything from
crates/tau/tests/fixtures/mcp-servers (Node, installed there with `npm ci`).

pi-mcp-adapter is configured as close to tau as it goes: `lifecycle: "eager"` (connect at
start) and `directTools: true` (each tool offered by its name, not through the `mcp` proxy
tool). Its direct tools come from a metadata cache the first session writes, so one pi run
per server is made first and not counted.

    python3 bench/mcp.py [--runs 10] [--calls 200] [--servers rust,everything]
                         [--pi /tmp/pi-ref] [--adapter /tmp/pi-mcp-adapter]

Needs: cargo build --profile dist -p tau -p tau-mock-llm (and tau-mcp's test server: the
dist one if built, else target/debug/tau-mcp-test-server); pi 0.79 installed with
bench/reference/install-pi.sh into /tmp/pi-ref; the adapter with
`npm install pi-mcp-adapter@2.36.0` in /tmp/pi-mcp-adapter. A target that is missing is
left out, and the ratios with it.
"""
import argparse, json, os, select, statistics, subprocess, sys, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = os.path.join(ROOT, "crates/tau/tests/fixtures/mcp-servers/node_modules/@modelcontextprotocol")


def first_existing(*paths):
    return next((p for p in paths if os.path.exists(p)), None)


TAU = first_existing(os.path.join(ROOT, "target/dist/tau"))
MOCK = first_existing(os.path.join(ROOT, "target/dist/tau-mock-llm"), os.path.join(ROOT, "target/debug/tau-mock-llm"))
TEST_SERVER = first_existing(os.path.join(ROOT, "target/dist/tau-mcp-test-server"),
                             os.path.join(ROOT, "target/release/tau-mcp-test-server"),
                             os.path.join(ROOT, "target/debug/tau-mcp-test-server"))


def servers():
    """name -> (command, args, echo arguments, the echo's expected text)"""
    found = {}
    if TEST_SERVER:
        found["rust"] = (TEST_SERVER, ["--tools", "echo,add"], {"text": "ping"}, "ping")
    script = os.path.join(MODULES, "server-everything/dist/index.js")
    if os.path.exists(script):
        found["everything"] = ("node", [script, "stdio"], {"message": "ping"}, "Echo: ping")
    return found


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    urllib.request.urlopen(req).read()


class Lines:
    """Reads a child's stdout line by line with a deadline, timestamping each line."""

    def __init__(self, proc):
        self.proc, self.buf = proc, b""

    def next(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no line in time")
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise EOFError("the process closed its stdout")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return time.monotonic(), line


# --- the server alone -------------------------------------------------------------------

def direct(command, args, echo_args, calls, gap=0.0):
    """(seconds from spawn to the `initialize` answer, [seconds of each tools/call echo]),
    with `gap` seconds idle before each call."""
    start = time.monotonic()
    proc = subprocess.Popen([command] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, bufsize=0)
    lines = Lines(proc)

    def request(id_, method, params):
        proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + "\n").encode())
        deadline = time.monotonic() + 30
        while True:
            at, line = lines.next(deadline)
            msg = json.loads(line)
            if msg.get("id") == id_:
                return at, msg

    at, _ = request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "bench", "version": "0"}})
    started = at - start
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    times = []
    for i in range(calls):
        if gap:
            time.sleep(gap)
        sent = time.monotonic()
        at, msg = request(i + 1, "tools/call", {"name": "echo", "arguments": echo_args})
        assert "result" in msg, msg
        times.append(at - sent)
    proc.stdin.close()
    proc.wait()
    return started, times


# --- an agent ---------------------------------------------------------------------------

def agent_run(cmd, env, cwd, url, tool, echo_args, calls, expect):
    """One run: the prompt, `calls` sequential calls of `tool`, then a text. Returns (seconds
    from spawn to the first call's end, [start->end seconds of each call], [seconds from each
    call's end to the next one's start])."""
    replies = [{"content": [{"type": "toolCall", "id": "c%d" % i, "name": tool, "arguments": echo_args}]}
               for i in range(calls)]
    replies.append({"content": [{"type": "text", "text": "done"}]})
    post(url + "/_mock/reset", {})
    post(url + "/_mock/replies", replies)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd, bufsize=0)
    proc.stdin.write(b'{"id":"p","type":"prompt","message":"go"}\n')
    lines = Lines(proc)
    first, began, spans, gaps, ended = None, {}, [], [], None
    deadline = time.monotonic() + 120
    try:
        while True:
            at, line = lines.next(deadline)
            if b'"tool_execution_' not in line and b'"agent_end"' not in line:
                continue
            msg = json.loads(line)
            kind = msg.get("type")
            if kind == "tool_execution_start":
                began[msg["toolCallId"]] = at
                if ended is not None:
                    gaps.append(at - ended)
            elif kind == "tool_execution_end":
                text = "".join(b.get("text", "") for b in msg["result"].get("content", []))
                if msg.get("isError") or expect not in text:
                    raise SystemExit("%s: %s failed: %s" % (cmd[0], tool, json.dumps(msg)[:400]))
                if first is None:
                    first = at - start
                spans.append(at - began[msg["toolCallId"]])
                ended = at
            elif kind == "agent_end":
                break
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if len(spans) != calls:
        raise SystemExit("%s: %d of %d calls ended" % (cmd[0], len(spans), calls))
    return first, spans, gaps


def warm_pi(cmd, env, cwd, cache, server):
    """Runs pi until the adapter has written its metadata cache with `server`'s tools: its
    direct tools are made from that cache at start, so a first session has none."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            try:
                with open(cache) as f:
                    if '"%s"' % server in f.read():
                        time.sleep(0.5)
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit("pi-mcp-adapter wrote no metadata cache for %s" % server)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ms(seconds):
    return seconds * 1000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10, help="start-up runs per agent and server")
    parser.add_argument("--calls", type=int, default=200, help="sequential calls in the per-call run")
    parser.add_argument("--servers", default="rust,everything")
    parser.add_argument("--pi", default="/tmp/pi-ref")
    parser.add_argument("--adapter", default="/tmp/pi-mcp-adapter")
    parser.add_argument("--tau", default=TAU, help="the tau binary (default: the dist build)")
    args = parser.parse_args()
    tau = os.path.abspath(args.tau) if args.tau else None
    if not (tau and MOCK):
        raise SystemExit("build first: cargo build --profile dist -p tau -p tau-mock-llm")
    available = servers()
    wanted = [s for s in args.servers.split(",") if s in available]
    if not wanted:
        raise SystemExit("no server: build tau-mcp-test-server or npm ci in crates/tau/tests/fixtures/mcp-servers")
    pi = os.path.join(args.pi, "node_modules/.bin/pi")
    adapter = os.path.join(args.adapter, "node_modules/pi-mcp-adapter/index.ts")
    have_pi = os.path.exists(pi) and os.path.exists(adapter)
    if not have_pi:
        print("pi 0.79 or pi-mcp-adapter not found: tau only", file=sys.stderr)

    mock = subprocess.Popen([MOCK, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    url = json.loads(mock.stdout.readline())["url"]
    work = tempfile.mkdtemp(prefix="mcp-bench-")
    models = {"providers": {"mock": {"baseUrl": url + "/v1", "api": "openai-completions", "apiKey": "k",
                                     "models": [{"id": "mock-1", "contextWindow": 1000000, "maxTokens": 100000}]}}}
    rows = []
    try:
        for name in wanted:
            command, server_args, echo_args, expect = available[name]
            entry = {"command": command, "args": server_args}
            dirs = {d: os.path.join(work, name, d) for d in ("tau", "pi", "cwd")}
            for d in dirs.values():
                os.makedirs(d)
            for d in ("tau", "pi"):
                with open(os.path.join(dirs[d], "models.json"), "w") as f:
                    json.dump(models, f)
            config = os.path.join(work, name, "servers.json")
            with open(config, "w") as f:
                json.dump({"mcpServers": {name: entry}}, f)
            with open(os.path.join(dirs["pi"], "mcp.json"), "w") as f:
                json.dump({"mcpServers": {name: dict(entry, lifecycle="eager", directTools=True)}}, f)
            env = dict(os.environ, TAU_AGENT_DIR=dirs["tau"], PI_CODING_AGENT_DIR=dirs["pi"],
                       PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1")
            targets = [("tau", [tau, "--mode", "rpc", "--no-session", "--mcp-config", config])]
            if have_pi:
                targets.append(("pi 0.79 + pi-mcp-adapter",
                                [pi, "--mode", "rpc", "--no-session", "--model", "mock/mock-1", "-e", adapter]))
                warm_pi(targets[1][1], env, dirs["cwd"], os.path.join(dirs["pi"], "mcp-cache.json"), name)
            tool = name + "_echo"
            # Start-up: the agents and the server alone, interleaved run by run.
            starts = {label: [] for label, _ in targets}
            alone_starts = []
            for _ in range(args.runs):
                alone_starts.append(direct(command, server_args, echo_args, 0)[0])
                for label, cmd in targets:
                    starts[label].append(agent_run(cmd, env, dirs["cwd"], url, tool, echo_args, 1, expect)[0])
            # Per call: each agent, then the server alone with that agent's idle time between
            # calls.
            alone_start = statistics.median(alone_starts)
            for label, cmd in targets:
                _, spans, gaps = agent_run(cmd, env, dirs["cwd"], url, tool, echo_args, args.calls, expect)
                gap = statistics.median(gaps)
                alone_call = statistics.median(direct(command, server_args, echo_args, args.calls, gap)[1])
                start = statistics.median(starts[label])
                call = statistics.median(spans)
                p90 = sorted(spans)[int(len(spans) * 0.9)]
                rows.append((name, label, start, start - alone_start, call, alone_call, call - alone_call,
                             p90 - alone_call, gap))
            back_to_back = statistics.median(direct(command, server_args, echo_args, args.calls)[1])
            rows.append((name, "server alone", alone_start, 0.0, back_to_back, back_to_back, 0.0, 0.0, 0.0))
    finally:
        mock.kill()

    print("%-11s %-26s %10s %12s %9s %12s %12s %13s %9s" % (
        "server", "agent", "start ms", "- server ms", "call ms", "server ms", "overhead ms", "p90 overh. ms",
        "idle ms"))
    for name, label, start, start_over, call, alone, over, p90, gap in rows:
        print("%-11s %-26s %10.1f %12.1f %9.3f %12.3f %12.3f %13.3f %9.1f" % (
            name, label, ms(start), ms(start_over), ms(call), ms(alone), ms(over), ms(p90), ms(gap)))
    for name in wanted:
        by = {r[1]: r for r in rows if r[0] == name}
        if "tau" in by and "pi 0.79 + pi-mcp-adapter" in by:
            t, p = by["tau"], by["pi 0.79 + pi-mcp-adapter"]
            # tau starts the server while it starts itself: what it adds can be nothing.
            beyond = ("%.1fx" % (p[3] / t[3]) if t[3] > 0.001
                      else "tau %.1f ms, nothing measurable" % ms(t[3]))
            print("%s: pi/tau start %.1fx (beyond the server's own start: %s); per-call overhead "
                  "tau %.3f ms, pi %.3f ms (pi/tau %.1fx)"
                  % (name, p[2] / t[2], beyond, ms(t[6]), ms(p[6]), p[6] / max(t[6], 1e-6)))


if __name__ == "__main__":
    main()
