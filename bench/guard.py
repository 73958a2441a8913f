#!/usr/bin/env python3
"""The CI guard on tau's footprint: scripted runs of the tau binary whose work is counted in a
way a noisy machine cannot disturb, each checked against a budget in bench/budgets.json.

With TAU_ALLOC_STATS=<file>, tau counts every heap allocation and writes, as it exits, the
number of allocations, the bytes they asked for, and the most bytes live at once ("peak").
The same scripted run allocates the same way whatever else the machine is doing (up to a few
allocations of thread timing), so a budget can fail CI without flaking. Scenarios:

  startup        start, answer get_state, exit
  stream-full    a 10,000-delta reply in pi's full message_update shape
  stream-lean    the same reply in the lean shape (--message-updates lean)
  stream-ext     the full reply with an extension subscribed to message_update
  switch-5000    switch_session to a 5,000-entry session, get_state, get_messages
  open-100000    the same with a 100,000-entry session (its peak is the memory budget)

    python3 bench/guard.py                  # check every budget (CI), exit 1 on any excess
    python3 bench/guard.py --only stream    # the scenarios whose name contains "stream"
    python3 bench/guard.py --write          # measure and write new budgets (see below)

Budgets are the counts of the debug build CI tests (target/debug; --target-dir to change),
measured on purpose with headroom (--headroom, default 1.15: 15 % over the figure; runs
vary by under 3 %). To move a
budget on purpose, say because a feature needs the memory, run `--write`, look at the diff of
bench/budgets.json, and give the reason in the commit message; a budget that goes down locks
in an improvement. Never raise one just to make CI pass without knowing why the count grew.
"""
import argparse, importlib.util, json, os, subprocess, sys, tempfile, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUDGETS = os.path.join(ROOT, "bench", "budgets.json")
DELTAS = 10_000
COUNTS = ("allocations", "bytes", "peakBytes")


def load_session_generator():
    spec = importlib.util.spec_from_file_location("session_open", os.path.join(ROOT, "bench", "session-open.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate


class Runner:
    def __init__(self, target_dir):
        self.tau = os.path.join(target_dir, "debug", "tau")
        self.mock_bin = os.path.join(target_dir, "debug", "tau-mock-llm")
        for binary in (self.tau, self.mock_bin):
            if not os.path.exists(binary):
                raise SystemExit("guard: %s not found (cargo build -p tau -p tau-mock-llm)" % binary)
        self.work = tempfile.mkdtemp(prefix="tau-guard-")
        self.agent = os.path.join(self.work, "agent")
        self.cwd = os.path.join(self.work, "project")
        os.makedirs(self.agent)
        os.makedirs(self.cwd)
        self.mock = subprocess.Popen([self.mock_bin, "--port", "0"], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.url = json.loads(self.mock.stdout.readline())["url"]
        models = {"providers": {"mock": {"baseUrl": self.url + "/v1", "api": "openai-completions",
                                         "apiKey": "k", "models": [{"id": "mock-1", "contextWindow": 1000000,
                                                                    "maxTokens": 100000}]}}}
        with open(os.path.join(self.agent, "models.json"), "w") as f:
            json.dump(models, f)
        self.sessions = {}

    def close(self):
        self.mock.kill()
        subprocess.run(["rm", "-rf", self.work])

    def counted(self, args, lines, until=None):
        """Runs tau with `args`, writes `lines`, reads stdout to the end; its counts."""
        stats = os.path.join(self.work, "stats.json")
        env = {"PATH": os.environ.get("PATH", ""), "HOME": self.work, "TAU_AGENT_DIR": self.agent,
               "TAU_ALLOC_STATS": stats}
        proc = subprocess.Popen([self.tau, "--mode", "rpc", "--no-session"] + args, cwd=self.cwd, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # One command at a time, each after the previous answer, so every run does the same work.
        for line in lines:
            proc.stdin.write((json.dumps(line) + "\n").encode())
            proc.stdin.flush()
            wanted = until if line.get("type") == "prompt" else '"id":"%s"' % line["id"]
            while True:
                out = proc.stdout.readline()
                if not out:
                    raise SystemExit("guard: tau ended early: %s" % proc.stderr.read().decode())
                if wanted.encode() in out and (line.get("type") == "prompt" or b'"type":"response"' in out):
                    break
        proc.stdin.close()
        proc.stdout.read()
        proc.wait()
        with open(stats) as f:
            return json.load(f)

    def script(self, deltas):
        chunks = ["%04d" % (i % 10000) for i in range(deltas)]
        body = json.dumps({"content": [{"type": "text", "chunks": chunks}]}).encode()
        req = urllib.request.Request(self.url + "/_mock/replies", data=body,
                                     headers={"content-type": "application/json"})
        urllib.request.urlopen(req).read()

    def session(self, entries):
        if entries not in self.sessions:
            path = os.path.join(self.work, "s%d.jsonl" % entries)
            load_session_generator()(path, entries, self.cwd, seed=entries)
            self.sessions[entries] = path
        return self.sessions[entries]

    def stream(self, extra):
        self.script(DELTAS)
        return self.counted(extra, [{"id": "p", "type": "prompt", "message": "stream please"}],
                            until='{"type":"agent_settled"')


def scenarios(r):
    watcher = os.path.join(ROOT, "bench", "fixtures", "watch-updates.py")
    return {
        "startup": lambda: r.counted([], [{"id": "s", "type": "get_state"}]),
        "stream-full": lambda: r.stream([]),
        "stream-lean": lambda: r.stream(["--message-updates", "lean"]),
        "stream-ext": lambda: r.stream(["-e", watcher]),
        # A get_messages right after the switch may be served from the file while the typed
        # parse goes on (decision T53), or from the parse if it won the race: get_state first
        # waits for the whole session, as the next prompt would, so every run counts the same.
        "switch-5000": lambda: r.counted([], [
            {"id": "w", "type": "switch_session", "sessionPath": r.session(5000)},
            {"id": "s", "type": "get_state"},
            {"id": "m", "type": "get_messages"}]),
        "open-100000": lambda: r.counted([], [
            {"id": "w", "type": "switch_session", "sessionPath": r.session(100000)},
            {"id": "s", "type": "get_state"},
            {"id": "m", "type": "get_messages"}]),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="the scenarios whose name contains this")
    parser.add_argument("--write", action="store_true", help="write measured counts x headroom as budgets")
    parser.add_argument("--headroom", type=float, default=1.15)
    parser.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    args = parser.parse_args()
    budgets = {}
    if os.path.exists(BUDGETS):
        with open(BUDGETS) as f:
            budgets = json.load(f)
    runner = Runner(args.target_dir)
    failures = []
    try:
        for name, run in scenarios(runner).items():
            if args.only and args.only not in name:
                continue
            counts = run()
            # A stream's peak holds however many records wait for the writer thread at the
            # worst moment, which a loaded machine raises by up to a tenth: the least of three
            # runs is what the code needs, not what the machine's load added.
            if name.startswith("stream"):
                for _ in range(2):
                    again = run()
                    counts = {k: min(counts[k], again[k]) for k in COUNTS}
            if args.write:
                budgets[name] = {k: int(counts[k] * args.headroom) for k in COUNTS}
            budget = budgets.get(name)
            cells = []
            for key in COUNTS:
                limit = budget.get(key) if budget else None
                over = limit is not None and counts[key] > limit
                cells.append("%s %d/%s%s" % (key, counts[key], limit if limit is not None else "-", " OVER" if over else ""))
                if over:
                    failures.append("%s: %s is %d, over its budget of %d (%.0f%%)"
                                    % (name, key, counts[key], limit, 100.0 * counts[key] / limit))
            if budget is None and not args.write:
                failures.append("%s: no budget in bench/budgets.json (run with --write)" % name)
            print("%-12s %s" % (name, "   ".join(cells)))
    finally:
        runner.close()
    if args.write:
        with open(BUDGETS, "w") as f:
            json.dump(budgets, f, indent=2, sort_keys=True)
            f.write("\n")
        print("budgets written to %s" % BUDGETS)
        return
    for failure in failures:
        print("guard: " + failure, file=sys.stderr)
    if failures:
        print("guard: a count grew past its budget. If the growth is intended, see "
              "`python3 bench/guard.py --help` for how to move a budget on purpose.", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
