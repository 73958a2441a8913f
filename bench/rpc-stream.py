#!/usr/bin/env python3
"""End-to-end streaming benchmark (issue 5): a reply of N deltas of 4 characters from
tau-mock-llm, through `tau --mode rpc`, with this script draining stdout as a client would.
Reports wall time, the agent's CPU time (user+sys) and peak RSS, and the bytes written, for
tau (full pi 0.79 shape), tau (lean pi 1.x shape), both again with an extension that watches
every `message_update` (bench/fixtures/watch-updates.py; the goal is within 2x of tau alone,
compared on "stream s", the time from the first `message_update` to `agent_end`, since "wall s"
also holds the extension's start-up)
and, when installed, pi 0.79 itself in the same run.

    python3 bench/rpc-stream.py [--deltas 10000] [--pi /tmp/pi-ref] [--pi152 /tmp/pi-152] [--runs 5] [--only lean]
                                [--pace 2] [--syscalls] [--floor]

--pace MS has the mock wait MS milliseconds between two deltas (chunkDelayMs), as a model
sends them: each delta then wakes the agent on its own, which is what users meet (issue 44);
"cpu us/delta" is the CPU per delta. --floor runs bench/floor.c beside: a C program making only
the three calls per delta (epoll_wait, recv, write), the least any agent pays per delta here. --syscalls runs each tau target once more under
`strace -c -f` and prints its futex, epoll_wait and write calls per delta (thread hand-offs).

pi 1.5.2 (lean `message_update`s by default) is the reference for tau's lean shape; install it
with bash bench/reference/install-pi15.sh /tmp/pi-152 (it runs on Node 20 through a launcher).

Each figure is the median of --runs runs (pi runs once: it takes seconds, not milliseconds).

Needs the shipped (dist) builds: cargo build --profile dist -p tau -p tau-mock-llm
"""
import argparse, json, os, subprocess, sys, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# TAU_BIN and MOCK_BIN point at other builds (an A/B comparison of two binaries).
TAU = os.environ.get("TAU_BIN", os.path.join(ROOT, "target/dist/tau"))
MOCK = os.environ.get("MOCK_BIN", os.path.join(ROOT, "target/dist/tau-mock-llm"))


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    urllib.request.urlopen(req).read()


def push(url, deltas, pace):
    chunks = ["%04d" % (i % 10000) for i in range(deltas)]
    reply = {"content": [{"type": "text", "chunks": chunks}]}
    if pace:
        reply["chunkDelayMs"] = pace
    post(url + "/_mock/replies", reply)


def run(cmd, env, url, deltas, pace=0, wrap=None):
    """One reply through one agent. The agent's CPU comes from wait4's rusage, which Linux keeps in
    nanoseconds (GNU time prints it to 10 ms: 5 us per delta of 2,000); its peak RSS from GNU time,
    since a direct child of this script starts with a copy of the script's own (exec keeps it)."""
    push(url, deltas, pace)
    wrap = wrap or ["/usr/bin/time", "-f", "%M", "-o"]
    with tempfile.NamedTemporaryFile("r") as report:
        proc = subprocess.Popen(wrap + [report.name] + cmd,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=env, bufsize=0)
        start = time.monotonic()
        proc.stdin.write(b'{"id":"p","type":"prompt","message":"stream please"}\n')
        proc.stdin.flush()
        total, updates, tail = 0, 0, b""
        first_update = None
        while True:
            chunk = proc.stdout.read(1 << 20)
            if not chunk:
                raise SystemExit("%s ended before agent_end" % cmd[0])
            total += len(chunk)
            data = tail + chunk
            pattern = b'\n{"type":"message_update"'
            updates += data.count(pattern) - tail.count(pattern)
            if first_update is None and updates:
                first_update = time.monotonic()
            if b'\n{"type":"agent_end"' in data:
                break
            tail = data[-64:]
        end = time.monotonic()
        wall = end - start
        stream = end - (first_update or start)
        proc.stdin.close()
        proc.stdout.read()
        _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0
        if wrap[0] != "/usr/bin/time":
            return syscall_counts(report.read())
        rss_kb = int(report.read().split()[-1])
    return {"wall": wall, "stream": stream, "cpu": usage.ru_utime + usage.ru_stime,
            "rss_mb": rss_kb / 1024, "bytes": total, "updates": updates}


# The calls that write records out, counted together as "write": tau writes from its runtime
# worker with pwritev2 (RWF_NOWAIT), and from its writer thread with write.
WRITES = ("write", "writev", "pwritev2")


def syscall_counts(report):
    """Calls per syscall name from `strace -c`'s table (the write family as "write")."""
    counts = {}
    for line in report.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0].replace(".", "").isdigit() and parts[-1].isidentifier():
            name = "write" if parts[-1] in WRITES else parts[-1]
            counts[name] = counts.get(name, 0) + int(parts[3])
    return counts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--deltas", type=int, default=10000)
    parser.add_argument("--pi", default="/tmp/pi-ref")
    parser.add_argument("--pi152", default="/tmp/pi-152")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", help="run only the targets whose name contains this")
    parser.add_argument("--pace", type=int, default=0, help="milliseconds between two deltas")
    parser.add_argument("--syscalls", action="store_true", help="count syscalls per delta (strace)")
    parser.add_argument("--floor", action="store_true",
                        help="also run bench/floor.c (built with cc): the kernel's part of a delta")
    args = parser.parse_args()
    mock = subprocess.Popen([MOCK, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    url = json.loads(mock.stdout.readline())["url"]
    work = tempfile.mkdtemp()
    models = {"providers": {"mock": {"baseUrl": url + "/v1", "api": "openai-completions", "apiKey": "k",
                                     "models": [{"id": "mock-1", "contextWindow": 1000000, "maxTokens": 100000}]}}}
    for d in ("tau", "pi"):
        os.makedirs(os.path.join(work, d))
        with open(os.path.join(work, d, "models.json"), "w") as f:
            json.dump(models, f)
    env = dict(os.environ, TAU_AGENT_DIR=os.path.join(work, "tau"), PI_CODING_AGENT_DIR=os.path.join(work, "pi"),
               PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1")
    watcher = os.path.join(ROOT, "bench/fixtures/watch-updates.py")
    targets = [("tau (full)", [TAU, "--mode", "rpc", "--no-session"]),
               ("tau (lean)", [TAU, "--mode", "rpc", "--no-session", "--message-updates", "lean"]),
               ("tau (full, ext)", [TAU, "--mode", "rpc", "--no-session", "-e", watcher]),
               ("tau (lean, ext)", [TAU, "--mode", "rpc", "--no-session", "--message-updates", "lean",
                                    "-e", watcher])]
    if args.floor:
        floor = os.path.join(work, "floor")
        subprocess.run(["cc", "-O2", "-o", floor, os.path.join(ROOT, "bench", "floor.c")], check=True)
        targets.insert(0, ("floor (C)", [floor, url.rsplit(":", 1)[1].split("/")[0]]))
    pi = os.path.join(args.pi, "node_modules/.bin/pi")
    if os.path.exists(pi):
        targets.append(("pi 0.79", [pi, "--mode", "rpc", "--no-session", "--model", "mock/mock-1"]))
    pi152 = os.path.join(args.pi152, "node_modules/.bin/pi")
    if os.path.exists(pi152):
        targets.append(("pi 1.5.2", [pi152, "--mode", "rpc", "--no-session", "--model", "mock/mock-1"]))
    if args.only:
        targets = [t for t in targets if args.only in t[0]]
    results = {}
    print("%-15s %9s %9s %9s %12s %9s %12s %8s" % ("", "wall s", "stream s", "cpu s", "cpu us/delta", "rss MB",
                                                  "stdout MB", "updates"))
    try:
        for name, cmd in targets:
            once = name.startswith("pi ")
            runs = [run(cmd, env, url, args.deltas, args.pace) for _ in range(1 if once else args.runs)]
            r = {k: sorted(x[k] for x in runs)[len(runs) // 2] for k in runs[0]}
            results[name] = r
            print("%-15s %9.3f %9.3f %9.4f %12.1f %9.1f %12.1f %8d" % (
                name, r["wall"], r["stream"], r["cpu"], r["cpu"] / args.deltas * 1e6, r["rss_mb"],
                r["bytes"] / 1e6, r["updates"]))
        if args.syscalls:
            for name, cmd in targets:
                if name.startswith("pi "):
                    continue
                counts = run(cmd, env, url, args.deltas, args.pace, ["strace", "-c", "-f", "-o"])
                print("%-15s per delta: futex %.2f  epoll_wait %.2f  write %.2f  recvfrom %.2f" % (
                    name, *(counts.get(c, 0) / args.deltas for c in ("futex", "epoll_wait", "write", "recvfrom"))))
    finally:
        mock.kill()
    if "pi 1.5.2" in results and "tau (lean)" in results:
        ref, r = results["pi 1.5.2"], results["tau (lean)"]
        print("tau (lean) / pi 1.5.2: %.3f of the CPU, %.3f of the wall time, %.3f of the memory"
              % (r["cpu"] / ref["cpu"], r["wall"] / ref["wall"], r["rss_mb"] / ref["rss_mb"]))
    for shape in ("full", "lean"):
        bare, ext = results.get("tau (%s)" % shape), results.get("tau (%s, ext)" % shape)
        if bare and ext:
            print("tau (%s) with an extension watching message_update: %.2fx the streaming time "
                  "(first message_update to agent_end), %.2fx the wall time (which includes "
                  "starting the extension)" % (shape, ext["stream"] / bare["stream"], ext["wall"] / bare["wall"]))
    if "pi 0.79" in results:
        pi_r = results["pi 0.79"]
        for name in ("tau (full)", "tau (lean)"):
            r = results[name]
            print("%s / pi: %.3f of the CPU, %.3f of the wall time, %.3f of the memory"
                  % (name, r["cpu"] / pi_r["cpu"], r["wall"] / pi_r["wall"], r["rss_mb"] / pi_r["rss_mb"]))


if __name__ == "__main__":
    main()
