#!/usr/bin/env python3
"""CI's check of tau's idle footprint: peak resident memory of the shipped binary (the `dist`
profile) started in RPC mode, answering one get_state and exiting, the run bench/startup.sh
measures, against `idle-rss` in bench/budgets.json (8 MiB, issue 20's goal); and the same
with a `models.json` that adds a local server's provider, as most users have a model
configured, against `idle-rss-configured` (a start that selects a model reads the built-in
catalog: ~800 models, which a change can copy again without any allocation guard noticing the
pages; docs/decisions.md T135).

The allocation counts of bench/guard.py do not see this figure: most of it is the binary's
own code and data the kernel maps around each page fault, which grows when the start-up code
is no longer placed together at link time (crates/tau/link, decisions T89 and T130) or when
start-up runs more code. The least of several runs is compared, so that a loaded machine
does not fail it; the runs differ by ~0.3 MiB.

    python3 bench/idle-rss.py                  # target/dist/tau (cargo build --profile dist -p tau)
    python3 bench/idle-rss.py --binary PATH --runs 9
"""
import argparse, json, os, shutil, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUDGETS = os.path.join(ROOT, "bench", "budgets.json")
ORDER = os.path.join(ROOT, "crates", "tau", "link", "order_symbols.py")


def peak_rss_kib(tau, work, agent_name="agent"):
    """Peak RSS (KiB) of one run, as GNU time reports it; the shell execs tau, so only tau and
    time's own small child are measured (a Python child would carry Python's peak)."""
    agent, out = os.path.join(work, agent_name), os.path.join(work, "rss")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": work, "TAU_AGENT_DIR": agent}
    with open(os.path.join(work, "get_state.jsonl"), "rb") as stdin:
        answer = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out, "sh", "-c",
                                 'exec "$0" --mode rpc --no-session', tau],
                                stdin=stdin, capture_output=True, env=env, cwd=work)
    if b'"command":"get_state","success":true' not in answer.stdout:
        raise SystemExit("idle-rss: tau did not answer get_state:\n%s" % answer.stderr.decode())
    with open(out) as f:
        return int(f.read().split()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    parser.add_argument("--binary", default=os.path.join(target, "dist", "tau"))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if not os.path.exists(args.binary):
        raise SystemExit("idle-rss: %s not found (cargo build --profile dist -p tau)" % args.binary)
    if not os.access("/usr/bin/time", os.X_OK):
        raise SystemExit("idle-rss: needs GNU time at /usr/bin/time (apt-get install time)")
    with open(BUDGETS) as f:
        budgets = json.load(f)
    budget = budgets["idle-rss"]["peakRssKiB"]
    configured_budget = budgets["idle-rss-configured"]["peakRssKiB"]
    work = tempfile.mkdtemp(prefix="tau-idle-rss-")
    try:
        os.mkdir(os.path.join(work, "agent"))
        with open(os.path.join(work, "get_state.jsonl"), "w") as f:
            f.write('{"id":"1","type":"get_state"}\n')
        runs = [peak_rss_kib(args.binary, work) for _ in range(args.runs)]
        # A provider on a local port nothing listens on: get_state never connects.
        os.mkdir(os.path.join(work, "configured"))
        with open(os.path.join(work, "configured", "models.json"), "w") as f:
            json.dump({"providers": {"local": {
                "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "k",
                "models": [{"id": "local-1"}]}}}, f)
        configured = [peak_rss_kib(args.binary, work, "configured") for _ in range(args.runs)]
    finally:
        shutil.rmtree(work)
    best = min(runs)
    print("idle-rss     peak RSS %d/%d KiB (%.2f MiB; runs: %s)"
          % (best, budget, best / 1024, " ".join(map(str, runs))))
    # How much of the start-up code the link placed together: the usual cause of growth.
    order = subprocess.run([sys.executable, ORDER, "--report", args.binary], capture_output=True,
                           text=True)
    print("idle-rss     " + (order.stdout.strip() or order.stderr.strip()), flush=True)
    print("idle-rss     with a models.json: peak RSS %d/%d KiB (%.2f MiB; runs: %s)"
          % (min(configured), configured_budget, min(configured) / 1024,
             " ".join(map(str, configured))))
    if min(configured) > configured_budget:
        print("idle-rss: with a models.json, peak RSS answering get_state is %d KiB, over its "
              "budget of %d KiB (bench/budgets.json): the start-up that selects a model grew; "
              "see docs/decisions.md T135 (the built-in catalog is borrowed, not copied, unless "
              "models.json changes it)." % (min(configured), configured_budget), file=sys.stderr)
        sys.exit(1)
    if best > budget:
        print("idle-rss: peak RSS of `tau --mode rpc --no-session` answering get_state is %d KiB "
              "(%.2f MiB), over its budget of %d KiB (bench/budgets.json), in the best of %d "
              "runs.\nTo investigate: `bash bench/startup.sh` measures it with the instruction "
              "count; when the start-up order above finds under nine in ten functions, or "
              "start-up runs new code, refresh the list with `python3 scripts/startup-order.py` "
              "and rebuild (docs/decisions.md T89, T130); compare `/proc/<pid>/smaps` of an "
              "idle tau with a build that met the budget to see which mapping grew."
              % (best, best / 1024, budget, args.runs), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
