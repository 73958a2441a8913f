#!/usr/bin/env python3
"""The CI guard on a reply paced as a real model sends it (issue 44): the mock waits a few
milliseconds between two deltas, so each delta wakes tau on its own, and what each delta
costs is counted in system calls under `strace -f -c`: the futex calls (a wake-up of another
thread, and that thread's going back to sleep), epoll_wait, write and recvfrom. On a loaded
machine these counts, unlike CPU time, stay what the code makes them: a delta that crosses
one more thread between the socket and stdout shows as two more futex calls per delta.

Budgets per delta are in bench/budgets.json under "paced-lean" and "paced-full".

    python3 bench/paced-guard.py                 # check (CI), exit 1 on any excess
    python3 bench/paced-guard.py --write         # measure and write the budgets (+0.3 each)

Needs strace (installed with apt-get when missing) and the debug build CI tests:
cargo build -p tau -p tau-mock-llm.
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


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true")
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
        for shape in ("lean", "full"):
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
