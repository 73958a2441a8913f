#!/usr/bin/env python3
"""Session-open benchmark: how long `switch_session` to a large session file takes, plus the
`get_messages` that a client sends right after it, for tau and pi 0.79 in the same run.

    python3 bench/session-open.py [--sizes 5000,100000] [--runs 10] [--pi-runs 3]
                                  [--tau target/dist/tau] [--pi /tmp/pi-ref] [--only pi]

For each size it generates two session files (pi's JSONL v3: header, model_change,
thinking_level_change, then user/assistant messages of about 1 KB each with usage, and now
and then an assistant tool call followed by its tool result, as one valid parentId chain).
Each target is started once per size (not measured), switches to the first copy once to warm
up, then switches back and forth between the two copies. Rounds are interleaved: round i of
tau, of pi and of the pipe floor run back to back, so the noise of a shared machine falls on
all of them alike. Every measured round is

    write {"type":"switch_session","sessionPath":…}  ->  its response
    write {"type":"get_messages"}                   ->  its response (read to the last byte)

and the table shows the medians of --runs rounds (pi: --pi-runs) for the switch alone and for
switch + get_messages, the size of the get_messages response, and the process's peak RSS
(VmHWM) after its rounds. The header cwd is the benchmark's temp directory, which exists, as
pi requires.

Needs the shipped (dist) build of tau: cargo build --profile dist -p tau (the path defaults to the
target/dist/tau of this repository; $CARGO_TARGET_DIR is honoured).
"""
import argparse, json, os, random, shutil, statistics, subprocess, sys, tempfile, time, uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))

WORDS = ("the session file keeps every message of the conversation as one line so that a crash "
         "never loses more than the line being written and a client can resume where it left off "
         "while tools read write edit and run commands in the working directory of the project "
         "function struct impl return value error result option string vector map iterator").split()


def iso(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + ".%03dZ" % (ms % 1000)


def prose(rng, chars):
    out, n = [], 0
    while n < chars:
        w = rng.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)


def generate(path, entries, cwd, seed):
    """Writes a session file of `entries` entries (header not counted)."""
    rng = random.Random(seed)
    ms = 1795329312000
    sid = str(uuid.UUID(int=rng.getrandbits(128)))
    ids = set()

    def new_id():
        while True:
            i = "%08x" % rng.getrandbits(32)
            if i not in ids:
                ids.add(i)
                return i

    usage_total = {"input": 0}
    with open(path, "w") as f:
        def put(obj):
            f.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")

        put({"type": "session", "version": 3, "id": sid, "timestamp": iso(ms), "cwd": cwd})
        parent = None
        state = "user"
        call = 0
        for n in range(entries):
            ms += 1000
            eid = new_id()
            base = {"id": eid, "parentId": parent, "timestamp": iso(ms)}
            if n == 0:
                put({"type": "model_change", **base, "provider": "mock", "modelId": "mock-1"})
            elif n == 1:
                put({"type": "thinking_level_change", **base, "thinkingLevel": "off"})
            elif state == "user":
                put({"type": "message", **base, "message": {
                    "role": "user", "content": [{"type": "text", "text": prose(rng, 1000)}],
                    "timestamp": ms}})
                state = "assistant"
            elif state in ("assistant", "after_tool"):
                usage_total["input"] += 250
                usage = {"input": usage_total["input"], "output": 260, "cacheRead": 0,
                         "cacheWrite": 0, "totalTokens": usage_total["input"] + 260,
                         "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                                  "total": 0}}
                content = [{"type": "text", "text": prose(rng, 1000)}]
                stop = "stop"
                tool = state == "assistant" and rng.random() < 0.15 and n + 2 < entries
                if tool:
                    call += 1
                    content = [{"type": "text", "text": prose(rng, 200)},
                               {"type": "toolCall", "id": "call_%06d" % call, "name": "read",
                                "arguments": {"path": "src/module_%d.rs" % call}}]
                    stop = "toolUse"
                put({"type": "message", **base, "message": {
                    "role": "assistant", "content": content, "api": "openai-completions",
                    "provider": "mock", "model": "mock-1", "usage": usage, "stopReason": stop,
                    "timestamp": ms, "responseId": "chatcmpl-%d" % n}})
                state = "tool" if tool else "user"
            else:  # tool result
                put({"type": "message", **base, "message": {
                    "role": "toolResult", "toolCallId": "call_%06d" % call, "toolName": "read",
                    "content": [{"type": "text", "text": prose(rng, 1000)}], "isError": False,
                    "timestamp": ms}})
                state = "after_tool"
            parent = eid
    return sid


class Proc:
    def __init__(self, cmd, env, cwd):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=cwd,
                                     bufsize=0)
        self.n = 0
        self.fd = self.proc.stdout.fileno()
        self.rest = b""  # bytes read past the end of the last record

    def send(self, obj):
        self.n += 1
        rid = "b%d" % self.n
        obj = dict(obj, id=rid)
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()
        return rid

    def readline(self):
        """One record as (its first 300 bytes, its length). Large reads straight from the
        pipe, and the record's chunks are never joined: growing one buffer to a
        multi-megabyte record costs this client more than the agent takes to write it, and
        that would hide the agent's own time (pi and tau are read the same way)."""
        head, length, chunk = b"", 0, self.rest
        while True:
            at = chunk.find(b"\n")
            if at >= 0:
                if len(head) < 300:
                    head += chunk[:300]
                self.rest = chunk[at + 1:]
                return head[:300], length + at + 1
            if len(head) < 300:
                head += chunk[:300]
            length += len(chunk)
            chunk = os.read(self.fd, 1 << 22)
            if not chunk:
                self.rest = b""
                return b"", 0

    def wait(self, rid):
        """Reads records until the response with this id; returns (line length, success)."""
        prefix = ('{"id":"%s",' % rid).encode()
        while True:
            head, length = self.readline()
            if not length:
                raise SystemExit("process ended while waiting for %s" % rid)
            if head.startswith(prefix):
                text = head.decode(errors="replace")
                if '"success":true' not in text:
                    raise SystemExit("request %s failed: %s" % (rid, text))
                return length

    def request(self, obj):
        return self.wait(self.send(obj))

    def peak_rss_mb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Target:
    """One agent process switching back and forth between its two copies of a session."""

    def __init__(self, name, cmd, env, cwd, files, runs):
        self.name, self.files, self.runs, self.cmd = name, files, runs, cmd
        self.switch, self.total, self.bytes = [], [], 0
        self.p = Proc(cmd, env, cwd)
        self.p.request({"type": "get_state"})  # started and reading
        self.p.request({"type": "switch_session", "sessionPath": files[0]})  # warm-up
        self.p.request({"type": "get_messages"})

    def round(self, i):
        p = self.p
        t0 = time.monotonic()
        p.request({"type": "switch_session", "sessionPath": self.files[(i + 1) % 2]})
        t1 = time.monotonic()
        self.bytes = p.request({"type": "get_messages"})
        t2 = time.monotonic()
        self.switch.append(t1 - t0)
        self.total.append(t2 - t0)
        # Untimed: let the process finish whatever the switch left in the background
        # (tau parses the typed session on another thread) so each round starts idle.
        p.request({"type": "get_state"})

    def result(self):
        rss = self.p.peak_rss_mb()
        self.p.close()
        return {"switch": statistics.median(self.switch), "total": statistics.median(self.total),
                "bytes": self.bytes, "rss": rss, "runs": len(self.total)}


SENDER = """
import fcntl, os, sys
fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ: the pipe size tau asks for
data = open(sys.argv[1], "rb").read()
sys.stdin.buffer.readline()
view = memoryview(data)
while view:
    view = view[os.write(1, view):]
"""


def floor_round(work, size):
    """The transport alone: a process that already holds a record as large as the
    `get_messages` answer in memory writes it into the pipe in one call when asked, and it
    is read the way `Proc` reads. No agent can answer faster than this."""
    path = os.path.join(work, "floor-%d.jsonl" % size)
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(b"x" * (size - 1) + b"\n")
    p = Proc([sys.executable, "-c", SENDER, path], os.environ, work)
    time.sleep(0.1)
    t0 = time.monotonic()
    p.proc.stdin.write(b"go\n")
    p.proc.stdin.flush()
    p.readline()
    elapsed = time.monotonic() - t0
    p.close()
    return elapsed


def measure_interleaved(targets, work, runs):
    """Round i of every target (and of the pipe floor) runs back to back, so a shared
    machine's slow and fast moments fall on all of them alike and the ratios hold."""
    floors = []
    for i in range(runs):
        for t in targets:
            if i < t.runs:
                t.round(i)
                time.sleep(0.05)
        if targets and targets[0].bytes:
            floors.append(floor_round(work, targets[0].bytes))
    return {t.name: t.result() for t in targets}, statistics.median(floors) if floors else None


def cold_start(cmd, env, cwd, path):
    """Seconds from starting the process with `--session path` to the last byte of the
    answer to a `get_messages` written at once (the client does not wait for anything)."""
    t0 = time.monotonic()
    p = Proc(cmd + ["--session", path], env, cwd)
    p.request({"type": "get_messages"})
    elapsed = time.monotonic() - t0
    p.close()
    return elapsed


def by_bytes(rows, size, target):
    return next(r["bytes"] for s, _, name, r in rows if s == size and name == target)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="5000,100000")
    parser.add_argument("--runs", type=int, default=10, help="rounds per size for tau")
    parser.add_argument("--pi-runs", type=int, default=3, help="rounds per size for pi")
    parser.add_argument("--tau", default=os.path.join(TARGET, "dist/tau"))
    parser.add_argument("--pi", default="/tmp/pi-ref")
    parser.add_argument("--only", help="run only the targets whose name contains this")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--startup", action="store_true",
                        help="also measure a cold start: the process started with --session "
                             "<file> and asked for get_messages at once")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="session-open-")
    cwd = os.path.join(work, "project")
    os.makedirs(cwd)
    models = {"providers": {"mock": {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions",
                                     "apiKey": "k", "models": [{"id": "mock-1", "contextWindow": 1000000,
                                                                "maxTokens": 100000}]}}}
    for d in ("tau", "pi", "sessions-tau", "sessions-pi"):
        os.makedirs(os.path.join(work, d))
    for d in ("tau", "pi"):
        with open(os.path.join(work, d, "models.json"), "w") as f:
            json.dump(models, f)
    env = dict(os.environ, TAU_AGENT_DIR=os.path.join(work, "tau"),
               PI_CODING_AGENT_DIR=os.path.join(work, "pi"), PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1")

    targets = []
    if os.path.exists(args.tau):
        targets.append(("tau", [args.tau, "--mode", "rpc", "--session-dir", os.path.join(work, "sessions-tau")],
                        args.runs))
    else:
        print("tau not found at %s (cargo build --profile dist -p tau); skipped" % args.tau, file=sys.stderr)
    pi = os.path.join(args.pi, "node_modules/.bin/pi")
    if os.path.exists(pi):
        targets.append(("pi 0.79", [pi, "--mode", "rpc", "--session-dir", os.path.join(work, "sessions-pi")],
                        args.pi_runs))
    else:
        print("pi not found under %s (bash bench/reference/install-pi.sh); skipped" % args.pi, file=sys.stderr)
    if args.only:
        targets = [t for t in targets if args.only in t[0]]

    rows = []
    floors = {}
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            files = []
            for k in range(2):
                path = os.path.join(work, "s%d-%s.jsonl" % (size, "ab"[k]))
                generate(path, size, cwd, seed=size * 2 + k)
                files.append(path)
            mb = os.path.getsize(files[0]) / 1e6
            started = []
            for name, cmd, runs in targets:
                # Each target gets its own copies: tau locks the files it has open.
                own = []
                for path in files:
                    copy = path.replace(".jsonl", "-%s.jsonl" % name.split()[0])
                    shutil.copyfile(path, copy)
                    own.append(copy)
                started.append(Target(name, cmd, env, cwd, own, runs))
            results, floor = measure_interleaved(started, work, max(t.runs for t in started))
            if floor is not None:
                floors[size] = (started[0].name, floor)
            if args.startup:
                for t in started:
                    t.startup = []
                for i in range(max(t.runs for t in started)):
                    for t in started:
                        if i < t.runs:
                            t.startup.append(cold_start(t.cmd, env, cwd, t.files[i % 2]))
                for t in started:
                    results[t.name]["startup"] = statistics.median(t.startup)
            for name, r in results.items():
                rows.append((size, mb, name, r))
                print("%7d entries %6.1f MB  %-8s switch %9.1f ms  +get_messages %9.1f ms  "
                      "response %6.1f MB  peak RSS %7.1f MB  (median of %d)"
                      % (size, mb, name, r["switch"] * 1e3, r["total"] * 1e3, r["bytes"] / 1e6,
                         r["rss"], r["runs"]), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("files kept in", work)

    print()
    print("| entries | file MB | target | switch ms | switch + get_messages ms | get_messages MB | peak RSS MB |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    for size, mb, name, r in rows:
        print("| %d | %.1f | %s | %.1f | %.1f | %.1f | %.1f |" % (
            size, mb, name, r["switch"] * 1e3, r["total"] * 1e3, r["bytes"] / 1e6, r["rss"]))
    for size, _, name, r in rows:
        if "startup" in r:
            print("%d entries, %s: started with --session, get_messages answered after %.1f ms"
                  % (size, name, r["startup"] * 1e3))
    for size, (name, floor) in sorted(floors.items()):
        print("%d entries: moving a %.1f MB record through a pipe into this client alone takes "
              "%.1f ms (a sender holding it in memory, same reader, rounds interleaved)"
              % (size, by_bytes(rows, size, name) / 1e6, floor * 1e3))
    by = {(size, name): r for size, _, name, r in rows}
    for size in sorted({s for s, _, _, _ in rows}):
        t, p = by.get((size, "tau")), by.get((size, "pi 0.79"))
        if t and p:
            print("%d entries: tau/pi time %.3f (switch %.3f), peak RSS %.3f"
                  % (size, t["total"] / p["total"], t["switch"] / p["switch"], t["rss"] / p["rss"]))


if __name__ == "__main__":
    main()
