#!/usr/bin/env python3
"""The CI guard on a reply paced as a real model sends it (issue 44): the mock waits a few
milliseconds between two deltas, so each delta wakes tau on its own, and what each delta
costs is counted in system calls under `strace -f -c`: the futex calls (a wake-up of another
thread, and that thread's going back to sleep), epoll_wait, write and recvfrom. On a loaded
machine these counts, unlike CPU time, stay what the code makes them: a delta that crosses
one more thread between the socket and stdout shows as two more futex calls per delta.

With --instructions it counts instead the instructions tau's own code runs per paced delta
(valgrind callgrind, the dist build, beyond the start-up a `get_state` run costs), which no
system call count sees: more work per delta on the one thread. The mock paces its deltas
10 ms apart there, which a run under valgrind keeps up with.

Budgets per delta are in bench/budgets.json under "paced-lean", "paced-full" and
"paced-instructions".

    python3 bench/paced-guard.py                 # check (CI), exit 1 on any excess
    python3 bench/paced-guard.py --write         # measure and write the budgets (+0.3 each)
    python3 bench/paced-guard.py --instructions [--write]   # the same for instructions (+25 %)

Needs strace (installed with apt-get when missing) and the debug build CI tests:
cargo build -p tau -p tau-mock-llm; with --instructions, valgrind and the dist build of tau.
"""
import argparse, importlib.util, json, os, shutil, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUDGETS = os.path.join(ROOT, "bench", "budgets.json")
CALLS = ("futex", "epoll_wait", "write", "recvfrom")
DELTAS = 300
PACE_MS = 2
# Room over the measured figure: the few calls of start-up and exit spread over the deltas
# vary by a few hundredths; a thread hand-off more per delta adds 2.
HEADROOM = 0.3
# Under valgrind the threads run one at a time, in an order that moves the count by a few
# per cent between runs; a new copy or parse of each delta adds far more.
INSTRUCTION_HEADROOM = 1.25
INSTRUCTION_DELTAS = 300
INSTRUCTION_PACE_MS = 10


def load_stream_bench():
    """bench/rpc-stream.py, whose paced run under strace this guard repeats."""
    spec = importlib.util.spec_from_file_location("rpc_stream", os.path.join(ROOT, "bench", "rpc-stream.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(stream_bench, tau, url, env, shape):
    found = stream_bench.run([tau, "--mode", "rpc", "--no-session", "--message-updates", shape],
                             env, url, DELTAS, PACE_MS, ["strace", "-f", "-c", "-o"])
    return {call: round(found.get(call, 0) / DELTAS, 2) for call in CALLS}


def load_instruction_bench():
    """bench/instructions.py, whose callgrind count this guard uses."""
    spec = importlib.util.spec_from_file_location("instructions", os.path.join(ROOT, "bench", "instructions.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def guard_instructions(args, url, env, budgets):
    """Thousands of instructions per paced lean delta beyond the start-up; the failures."""
    if not shutil.which("valgrind"):
        subprocess.run(["apt-get", "install", "-y", "valgrind"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    if not shutil.which("valgrind"):
        raise SystemExit("paced-guard: valgrind is needed (apt-get install valgrind)")
    count = load_instruction_bench().count
    stream_bench = load_stream_bench()
    tau = os.path.join(args.target_dir, "dist", "tau")
    startup = count(tau, ["--mode", "rpc", "--no-session"], b'{"id":"1","type":"get_state"}\n', env)
    stream_bench.push(url, INSTRUCTION_DELTAS, INSTRUCTION_PACE_MS)
    paced = count(tau, ["--mode", "rpc", "--no-session", "--message-updates", "lean"],
                  b'{"id":"p","type":"prompt","message":"stream please"}\n', env)
    per_delta = round((paced - startup) * 1000 / INSTRUCTION_DELTAS, 1)
    if args.write:
        budgets["paced-instructions"] = {"leanKPerDelta": round(per_delta * INSTRUCTION_HEADROOM, 1)}
    limit = budgets.get("paced-instructions", {}).get("leanKPerDelta")
    print("paced-instructions  %.1f K instructions per lean delta (budget %s)" % (per_delta, limit))
    if limit is None:
        return ["paced-instructions: no budget in bench/budgets.json (run with --write)"]
    if per_delta > limit:
        return ["paced-instructions: %.1f K instructions per paced delta, over the budget of %.1f "
                "(see `python3 bench/instructions.py`)" % (per_delta, limit)]
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--target-dir",
                        default=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    args = parser.parse_args()
    if not shutil.which("strace"):
        subprocess.run(["apt-get", "install", "-y", "strace"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    if not shutil.which("strace"):
        raise SystemExit("paced-guard: strace is needed (apt-get install strace)")
    tau = os.path.join(args.target_dir, "debug", "tau")
    mock_bin = os.path.join(args.target_dir, "debug", "tau-mock-llm")
    mock = subprocess.Popen([mock_bin, "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    work = tempfile.mkdtemp()
    try:
        url = json.loads(mock.stdout.readline())["url"]
        models = {"providers": {"mock": {
            "baseUrl": url + "/v1", "api": "openai-completions", "apiKey": "k",
            "models": [{"id": "mock-1", "contextWindow": 1000000, "maxTokens": 100000}]}}}
        with open(os.path.join(work, "models.json"), "w") as f:
            json.dump(models, f)
        env = dict(os.environ, TAU_AGENT_DIR=work)
        stream_bench = load_stream_bench()
        with open(BUDGETS) as f:
            budgets = json.load(f)
        failures = []
        for shape in () if args.instructions else ("lean", "full"):
            name = "paced-" + shape
            measured = measure(stream_bench, tau, url, env, shape)
            if args.write:
                budgets[name] = {call + "PerDelta": round(measured[call] + HEADROOM, 2)
                                 for call in CALLS}
            budget = budgets.get(name, {})
            cells = []
            for call in CALLS:
                limit = budget.get(call + "PerDelta")
                over = limit is not None and measured[call] > limit
                cells.append("%s %.2f/%s%s" % (call, measured[call],
                                               limit if limit is not None else "-",
                                               " OVER" if over else ""))
                if over:
                    failures.append("%s: %.2f %s calls per delta, over the budget of %.2f "
                                    "(a delta crosses more threads than it did: see "
                                    "`python3 bench/rpc-stream.py --pace 2 --syscalls`)"
                                    % (name, measured[call], call, limit))
            if not budget and not args.write:
                failures.append("%s: no budget in bench/budgets.json (run with --write)" % name)
            print("%-11s %s" % (name, "   ".join(cells)))
        if args.instructions:
            failures += guard_instructions(args, url, env, budgets)
        if args.write:
            with open(BUDGETS, "w") as f:
                json.dump(budgets, f, indent=2, sort_keys=True)
                f.write("\n")
            print("budgets written to %s" % BUDGETS)
            return
        for failure in failures:
            print("paced-guard: " + failure, file=sys.stderr)
        if failures:
            sys.exit(1)
    finally:
        mock.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
