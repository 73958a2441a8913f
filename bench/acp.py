#!/usr/bin/env python3
"""ACP benchmark (issue 24): `tau --mode acp` beside the third-party adapter pi-acp (npm
`pi-acp`, which spawns `pi --mode rpc` and translates its events to ACP), on the same flows, in
the same run, against tau-mock-llm.

    python3 bench/acp.py [--runs 7] [--deltas 10000] [--pace MS] [--pi /tmp/pi-ref]
                         [--pi-acp /tmp/pi-acp-bench] [--pi-acp-old /tmp/pi-acp-old]
                         [--only tau] [--no-build] [--tau-also /path/to/other/tau]

Targets (each one a separate process tree, started fresh for every run):

  tau acp                    target/dist/tau --mode acp
  pi-acp <latest> + tau      pi-acp, whose `pi` is tau (a shim named `pi` first on its PATH)
  pi-acp <old> + tau         pi-acp 0.0.24 (the release before 0.0.34 on npm), over tau
  pi-acp <old> + pi 0.79     the same adapter over pi 0.79 itself
  tau acp [NAME]             with --tau-also: another tau binary (an earlier build, say) in the
                             same interleaved rounds, so before/after figures share one run

pi-acp 0.0.34 needs RPC commands and events pi 0.79 does not have
(`get_available_thinking_levels`, `agent_settled`), so with pi 0.79 behind it the latest
adapter cannot open a session (the bench checks that once and says so); 0.0.24 works over it. Install the adapters
(network needed once):

    mkdir -p /tmp/pi-acp-bench && cd /tmp/pi-acp-bench && npm init -y && npm install pi-acp@latest
    mkdir -p /tmp/pi-acp-old && cd /tmp/pi-acp-old && npm init -y && npm install pi-acp@0.0.24

and pi 0.79 with bench/reference/install-pi.sh (into /tmp/pi-ref).

One run of a target, measured from this script (a Python client writing JSON-RPC lines; it
decodes the reply's notifications in bulk rather than line by line, which would make it slower
than tau and the measure of itself):

  spawn -> `initialize` answered                                       "initialize ms"
  spawn -> `session/new` (cwd, no MCP servers) answered                  "session/new ms"
     (pi-acp starts its `pi` here: the second start-up), then the session's
     `available_commands_update` awaited (an editor shows it before the user types; not timed
     on its own)
  spawn -> first `agent_message_chunk` of the reply                      "spawn → first chunk ms"
     (the issue's "from spawn to first message chunk": start-up, `initialize`,
     `session/new`, the commands awaited, the prompt and its first chunk, end to end; a
     target that never sent its commands would have the 5 s wait for them in it)
  `session/prompt` sent -> first `agent_message_chunk` of the reply      "first chunk ms"
  `session/prompt` sent -> its answer (`end_turn`), every delta received  "end_turn ms"
  stdin closed -> every process of the tree has exited

"the mock alone" is the floor under the two reply columns: the same reply requested from
tau-mock-llm by this script (time to its first bytes and to the end of its body).

CPU: "reply CPU ms" is user+sys of every process of the tree between the prompt being sent and
its answer (read from /proc/<pid>/stat of the live processes, 10 ms ticks); "total CPU ms" is
the whole tree's user+sys from spawn to exit (os.wait4 rusage; this script makes itself a child
subreaper, so pi-acp's `pi` child, which the adapter does not wait for, is reaped and counted
here too). The reply is --deltas text deltas of 4 characters.

Rounds are interleaved (round i of every target back to back) so the load of a shared machine
falls on all alike; the tables give medians and, per pair, the other's figure over tau's.

Settings that keep the run offline and the flows equal: each target has its own agent
directory (models.json pointing at the mock, settings.json with the mock model as default and
`quietStartup: true`, so pi-acp does not print its start-up banner as a message chunk), HOME is
a temp folder (pi-acp writes ~/.pi/pi-acp/session-map.json), and a no-op `npm` is first on the
PATH. On every `session/new` pi-acp runs `pi --version` and `npm view <pi package> version`
(with an 800 ms limit) to offer an update; the shim makes the npm half fail at once, which
favours the adapter, while `pi --version` runs as it would for a user (with pi 0.79 behind, a
second Node start of pi). *_API_KEY variables are removed from the environment, so the mock's
model is the only one. Session files are written, as an editor's sessions are.
"""
import argparse, ctypes, json, os, re, select, shutil, signal, statistics, subprocess, sys, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
TAU = os.path.join(TARGET, "dist/tau")
MOCK = os.path.join(TARGET, "dist/tau-mock-llm")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PR_SET_CHILD_SUBREAPER = 36


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    urllib.request.urlopen(req).read()


def children_of(pid):
    out = []
    try:
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                out.extend(int(c) for c in f.read().split())
    except OSError:
        pass
    return out


def tree(pid):
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo.extend(children_of(p))
    return pids


def tree_cpu_ticks(pid):
    """user+sys ticks of the live processes under pid (and pid itself)."""
    total = 0
    for p in tree(pid):
        try:
            with open("/proc/%d/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total


REPLY_TEXT = re.compile(rb'"text":"([0-9]+)"')


class Conn:
    """JSON-RPC lines over a child's stdin/stdout."""

    def __init__(self, proc):
        self.proc = proc
        self.fd = proc.stdout.fileno()
        self.buf = b""
        self.next_id = 0

    def send(self, method, params):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()
        return self.next_id

    def read(self, deadline):
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line, self.buf = self.buf[:nl], self.buf[nl + 1:]
                if line.strip():
                    return json.loads(line)
                continue
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise TimeoutError("no answer in time")
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise EOFError("the agent closed its stdout")
            self.buf += chunk

    def answer(self, rid, deadline, on_other=None):
        while True:
            msg = self.read(deadline)
            if msg.get("id") == rid and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError("%s" % msg["error"])
                return msg["result"]
            if "method" in msg and "id" in msg:
                # A request from the agent (none expected in these flows): refuse it.
                self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {
                    "code": -32601, "message": "not offered"}}).encode() + b"\n")
                self.proc.stdin.flush()
            elif on_other:
                on_other(msg)

    def reply(self, rid, deadline):
        """Reads a reply's notifications in bulk, without decoding each line: a client that parses
        10,000 lines one by one in Python would be slower than tau writes them. Counts the
        characters of the reply's text chunks (all digits) and notes when the first one ("0000")
        arrived; decodes only the line that answers `rid`."""
        state = {"first": None, "chars": 0}
        pattern = b'"id":%d' % rid
        data, self.buf = self.buf, b""
        while True:
            end = data.rfind(b"\n") + 1
            block, data = data[:end], data[end:]
            if block:
                if state["first"] is None and b'"text":"0000' in block:
                    state["first"] = time.monotonic()
                at = block.find(pattern)
                while at >= 0:
                    start = block.rfind(b"\n", 0, at) + 1
                    stop = block.index(b"\n", at)
                    msg = json.loads(block[start:stop])
                    if msg.get("id") == rid and "method" not in msg:
                        state["chars"] += sum(len(t) for t in REPLY_TEXT.findall(block, 0, start))
                        self.buf = block[stop + 1:] + data
                        if "error" in msg:
                            raise RuntimeError("%s" % msg["error"])
                        return msg["result"], state
                    at = block.find(pattern, stop)
                state["chars"] += sum(len(t) for t in REPLY_TEXT.findall(block))
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise TimeoutError("no answer in time")
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise EOFError("the agent closed its stdout")
            data += chunk


def reap_tree(main_pid, others, timeout=10.0):
    """Waits for main_pid, then for every orphan of its tree (we are their subreaper)."""
    deadline = time.monotonic() + timeout
    ru_user = ru_sys = 0.0
    _, _, ru = os.wait4(main_pid, 0)
    ru_user += ru.ru_utime
    ru_sys += ru.ru_stime
    while True:
        orphans = [p for p in children_of(os.getpid()) if p not in others]
        if not orphans:
            break
        if time.monotonic() > deadline:
            for p in orphans:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        for p in orphans:
            try:
                pid, _, ru = os.wait4(p, os.WNOHANG)
            except ChildProcessError:
                continue
            if pid:
                ru_user += ru.ru_utime
                ru_sys += ru.ru_stime
        time.sleep(0.005)
    return ru_user + ru_sys


def scripted_reply(deltas, pace):
    """The mock's reply: `deltas` text chunks of 4 digits, `pace` ms apart (0: at once)."""
    reply = {"content": [{"type": "text", "chunks": ["%04d" % (i % 10000) for i in range(deltas)]}]}
    if pace:
        reply["chunkDelayMs"] = pace
    return reply


def run_once(cmd, env, cwd, url, deltas, mock_pid, pace=0):
    post(url + "/_mock/replies", scripted_reply(deltas, pace))
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd, bufsize=0)
    conn = Conn(proc)
    try:
        rid = conn.send("initialize", {"protocolVersion": 1, "clientCapabilities": {
            "fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}})
        conn.answer(rid, t0 + 60)
        init = time.monotonic() - t0
        rid = conn.send("session/new", {"cwd": cwd, "mcpServers": []})
        session = conn.answer(rid, time.monotonic() + 60)["sessionId"]
        new = time.monotonic() - t0
        # Wait for the session's commands, as an editor shows them before the user types.
        deadline = time.monotonic() + 5
        try:
            while True:
                msg = conn.read(deadline)
                upd = msg.get("params", {}).get("update", {})
                if upd.get("sessionUpdate") == "available_commands_update":
                    break
        except TimeoutError:
            pass
        cpu0 = tree_cpu_ticks(proc.pid)
        t1 = time.monotonic()
        rid = conn.send("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "stream please"}]})
        result, state = conn.reply(rid, t1 + 300)
        t2 = time.monotonic()
        cpu1 = tree_cpu_ticks(proc.pid)
        if result.get("stopReason") != "end_turn" or state["chars"] != 4 * deltas:
            raise RuntimeError("reply incomplete: %s, %d of %d characters" % (result, state["chars"], 4 * deltas))
    except BaseException:
        for p in tree(proc.pid):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        reap_tree(proc.pid, {mock_pid})
        proc.returncode = -9
        raise
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass
    # Drain stdout until the agent exits.
    while True:
        r = select.select([conn.fd], [], [], 10)[0]
        if not r or not os.read(conn.fd, 1 << 20):
            break
    total_cpu = reap_tree(proc.pid, {mock_pid})
    proc.returncode = 0  # reaped above
    return {"init": init * 1000, "new": new * 1000, "spawn_first": (state["first"] - t0) * 1000,
            "first": (state["first"] - t1) * 1000, "reply": (t2 - t1) * 1000,
            "reply_cpu": (cpu1 - cpu0) * 1000 / CLK_TCK, "total_cpu": total_cpu * 1000}


def mock_floor(url, deltas, pace=0):
    """The mock alone: one streamed request for the same reply, read to its end by this script."""
    import http.client
    post(url + "/_mock/replies", scripted_reply(deltas, pace))
    host, port = url[len("http://"):].split(":")
    conn = http.client.HTTPConnection(host, int(port))
    t0 = time.monotonic()
    conn.request("POST", "/v1/chat/completions", headers={"content-type": "application/json"},
                 body=json.dumps({"model": "mock-1", "stream": True, "messages": [{"role": "user", "content": "x"}]}))
    response = conn.getresponse()
    response.read1(1 << 16)
    t1 = time.monotonic()
    response.read()
    t2 = time.monotonic()
    conn.close()
    return {"first": (t1 - t0) * 1000, "reply": (t2 - t0) * 1000}


def pkg_version(prefix):
    try:
        with open(os.path.join(prefix, "node_modules/pi-acp/package.json")) as f:
            return json.load(f)["version"]
    except OSError:
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--deltas", type=int, default=10000)
    parser.add_argument("--pace", type=int, default=0,
                        help="milliseconds between two deltas, as a model sends them (the reply's CPU "
                             "is then mostly what each delta's own wake-up costs: issue 44)")
    parser.add_argument("--pi", default="/tmp/pi-ref")
    parser.add_argument("--pi-acp", default="/tmp/pi-acp-bench")
    parser.add_argument("--pi-acp-old", default="/tmp/pi-acp-old")
    parser.add_argument("--only", help="run only the targets whose name contains this")
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--tau-also", metavar="PATH", help="another tau binary to run beside target/dist/tau")
    args = parser.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--profile", "dist", "--quiet", "-p", "tau", "-p", "tau-mock-llm"],
                       cwd=ROOT, check=True)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    work = tempfile.mkdtemp(prefix="tau-acp-bench-")
    mock = subprocess.Popen([MOCK, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    url = json.loads(mock.stdout.readline())["url"]
    models = {"providers": {"mock": {"baseUrl": url + "/v1", "api": "openai-completions", "apiKey": "k",
                                     "models": [{"id": "mock-1", "contextWindow": 1000000, "maxTokens": 100000}]}}}
    settings = {"defaultProvider": "mock", "defaultModel": "mock-1", "quietStartup": True}
    repo = os.path.join(work, "repo")
    os.makedirs(repo)
    subprocess.run(["git", "init", "-q", repo], check=True)
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()

    def target(name, cmd, pi_binary):
        agent = os.path.join(work, "agent-%d" % len(targets))
        home = os.path.join(work, "home-%d" % len(targets))
        shims = os.path.join(work, "bin-%d" % len(targets))
        for d in (agent, home, shims):
            os.makedirs(d)
        for fname, body in (("models.json", models), ("settings.json", settings)):
            with open(os.path.join(agent, fname), "w") as f:
                json.dump(body, f)
        with open(os.path.join(shims, "npm"), "w") as f:
            f.write("#!/bin/sh\nexit 1\n")
        if pi_binary:
            with open(os.path.join(shims, "pi"), "w") as f:
                f.write('#!/bin/sh\nexec "%s" "$@"\n' % pi_binary)
        for s in os.listdir(shims):
            os.chmod(os.path.join(shims, s), 0o755)
        env = dict(os.environ, HOME=home, TAU_AGENT_DIR=agent, PI_CODING_AGENT_DIR=agent, PI_OFFLINE="1",
                   PI_SKIP_VERSION_CHECK="1", PATH=shims + os.pathsep + os.environ["PATH"])
        for k in [k for k in env if k.endswith("_API_KEY")]:
            del env[k]
        targets.append((name, cmd, env))

    targets = []
    pi = os.path.join(args.pi, "node_modules/.bin/pi")
    have_pi = os.path.exists(pi)
    target("tau acp", [TAU, "--mode", "acp"], None)
    if args.tau_also:
        target("tau acp [%s]" % os.path.basename(args.tau_also), [args.tau_also, "--mode", "acp"], None)
    new_v, old_v = pkg_version(args.pi_acp), pkg_version(args.pi_acp_old)
    new_js = os.path.join(args.pi_acp, "node_modules/pi-acp/dist/index.js")
    old_js = os.path.join(args.pi_acp_old, "node_modules/pi-acp/dist/index.js")
    if new_v:
        target("pi-acp %s + tau" % new_v, ["node", new_js], TAU)
    if old_v:
        target("pi-acp %s + tau" % old_v, ["node", old_js], TAU)
        if have_pi:
            target("pi-acp %s + pi 0.79" % old_v, ["node", old_js], pi)
    notes = []
    if new_v and have_pi and (not args.only or "pi 0.79" in args.only):
        # Does the latest adapter work over pi 0.79? (It asks for RPC pi 0.79 lacks.)
        target("pi-acp %s + pi 0.79" % new_v, ["node", new_js], pi)
        name, cmd, env = targets.pop()
        try:
            run_once(cmd, env, repo, url, 10, mock.pid)
            targets.append((name, cmd, env))
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            post(url + "/_mock/reset", {})
            notes.append("%s: cannot run the flow (%s)" % (name, str(e)[:160]))
    if args.only:
        targets = [t for t in targets if args.only in t[0]]

    print("node %s, pi-acp %s (latest) and %s, pi %s; %d runs of each, interleaved, %d deltas"
          % (node, new_v, old_v, "0.79" if have_pi else "absent", args.runs, args.deltas), file=sys.stderr)
    for n in notes:
        print("note: " + n, file=sys.stderr)
    results = {name: [] for name, _, _ in targets}
    floor = []
    try:
        for i in range(args.runs + 1):  # round 0 warms the page cache, not counted
            if i:
                floor.append(mock_floor(url, args.deltas, args.pace))
            for name, cmd, env in targets:
                r = run_once(cmd, env, repo, url, args.deltas, mock.pid, args.pace)
                if i:
                    results[name].append(r)
                print("round %d %-26s init %7.1f  new %7.1f  spawn-first %7.1f  first %7.1f  reply %8.1f  "
                      "reply cpu %7.0f  total cpu %7.0f"
                      % (i, name, r["init"], r["new"], r["spawn_first"], r["first"], r["reply"], r["reply_cpu"],
                         r["total_cpu"]),
                      file=sys.stderr)
    finally:
        mock.kill()
        mock.wait()
        shutil.rmtree(work, ignore_errors=True)

    keys = [("init", "initialize ms"), ("new", "session/new ms"), ("spawn_first", "spawn → first chunk ms"),
            ("first", "first chunk ms"),
            ("reply", "end_turn ms"), ("reply_cpu", "reply CPU ms"), ("total_cpu", "total CPU ms")]
    med = {n: {k: statistics.median(r[k] for r in rs) for k, _ in keys} for n, rs in results.items()}
    print("| target | " + " | ".join(h for _, h in keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for n in med:
        print("| %s | " % n + " | ".join("%.1f" % med[n][k] if med[n][k] < 100 else "%.0f" % med[n][k]
                                          for k, _ in keys) + " |")
    print("| (the mock alone: first bytes, whole body) | | | | %.1f | %.1f | | |"
          % tuple(statistics.median(f[k] for f in floor) for k in ("first", "reply")))
    if "tau acp" in med and len(med) > 1:
        print()
        print("| tau acp vs | " + " | ".join(h.replace(" ms", "") for _, h in keys) + " |")
        print("|---|" + "---:|" * len(keys))
        for n in med:
            if n == "tau acp":
                continue
            print("| %s | " % n + " | ".join(
                "%.1fx less" % (med[n][k] / med["tau acp"][k]) if med["tau acp"][k] > 0 else "-" for k, _ in keys) + " |")
    for n in notes:
        print("\n" + n)


if __name__ == "__main__":
    main()
