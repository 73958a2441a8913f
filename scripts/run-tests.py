#!/usr/bin/env python3
"""Builds the workspace's test binaries and runs each one as soon as it is linked.

`cargo test` first builds every test binary and then runs them one after another. On a
2-core machine that leaves a core idle twice: at the end of the build, when only the last
links run, and while the long black-box binary (tests/rpc) waits on the processes it
starts. Here cargo builds (`cargo test --no-run`, whose JSON messages name each executable
as it is written) while the binaries already built run: the black-box binary in a lane of
its own, the others one after another in a second lane. Each binary
runs from its package's folder, as cargo runs it, once the binaries it may start (its
package's and those of the workspace packages it depends on) are built. Output is printed
per binary when it ends, so the lanes never interleave.

    python3 scripts/run-tests.py [--ready FILE] [--threads N] [--after CMD] -- CARGO ARGS...

--ready FILE waits for FILE before the first binary starts (the test command's `npm ci`
writes it: the black-box tests need the Node packages); a FILE.failed beside it stops the
run. --after CMD runs one more shell command in the second lane once the build is done.
The exit status is 0 only if the build, every binary and CMD succeeded. There are no doc
tests to run (every library sets `doctest = false`): `cargo test --doc` resolves features
on its own, and would rebuild, beside running tests, the binaries they start.
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time

LONG_LANE = {"rpc"}  # the test targets that get a lane of their own


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ready")
    parser.add_argument("--threads", default=os.environ.get("TAU_TEST_THREADS", "4"))
    parser.add_argument("--after", action="append", default=[])
    parser.add_argument("cargo", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    cargo = [a for a in args.cargo if a != "--"]

    # Doc tests would not run here (see above): a library that enables them is an error.
    metadata = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1"],
            stdout=subprocess.PIPE,
            check=True,
            text=True,
        ).stdout
    )
    with_doctests = [
        package["name"]
        for package in metadata["packages"]
        for target in package["targets"]
        if target.get("doctest") and "lib" in target["kind"]
    ]
    if with_doctests:
        print(
            "doc tests are not run by this script; set `doctest = false` in: "
            + ", ".join(with_doctests),
            file=sys.stderr,
        )
        return 1

    # A test binary may start the binaries of its package and of the workspace packages it
    # depends on (`CARGO_BIN_EXE_*`, or tau's black-box tests starting tau-mcp's test server).
    # cargo reports a test's executable without waiting for those, so each one waits until
    # they are reported too (or the build is over).
    packages = {package["name"]: package for package in metadata["packages"]}
    bins_of = {
        name: {t["name"] for t in package["targets"] if "bin" in t["kind"]}
        for name, package in packages.items()
    }

    def bins_needed(name):
        needed, todo, seen = set(), [name], set()
        while todo:
            current = todo.pop()
            if current in seen or current not in packages:
                continue
            seen.add(current)
            needed |= bins_of[current]
            todo.extend(d["name"] for d in packages[current]["dependencies"])
        return needed

    built = threading.Condition()
    bins_built = set()
    build_over = [False]

    def wait_for_bins(needed):
        with built:
            built.wait_for(lambda: build_over[0] or needed <= bins_built)

    lock = threading.Lock()
    failures = []

    def report(name, started, proc_out, status):
        with lock:
            sys.stdout.write(proc_out)
            sys.stdout.write(
                "== %s: %s in %.1f s\n"
                % (name, "ok" if status == 0 else "FAILED (exit %d)" % status, time.time() - started)
            )
            sys.stdout.flush()
            if status != 0:
                failures.append(name)

    def run(name, argv, cwd, needed=frozenset()):
        wait_for_bins(needed)
        started = time.time()
        proc = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        report(name, started, proc.stdout, proc.returncode)

    def wait_ready():
        if not args.ready:
            return True
        while not os.path.exists(args.ready):
            if os.path.exists(args.ready + ".failed"):
                return False
            time.sleep(0.1)
        return True

    lanes = {"long": queue.Queue(), "short": queue.Queue()}

    def lane(q):
        ready = None
        while True:
            job = q.get()
            if job is None:
                return
            if ready is None:
                ready = wait_ready()
            if not ready:
                with lock:
                    if "npm ci" not in failures:
                        failures.append("npm ci")
                continue
            run(*job)

    threads = [threading.Thread(target=lane, args=(q,)) for q in lanes.values()]
    for t in threads:
        t.start()

    build = subprocess.Popen(
        cargo + ["--no-run", "--message-format=json-render-diagnostics"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert build.stdout is not None
    for line in build.stdout:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        target = message["target"]["name"]
        if not message.get("profile", {}).get("test"):
            if "bin" in message["target"]["kind"]:
                with built:
                    bins_built.add(target)
                    built.notify_all()
            continue
        folder = os.path.dirname(message["manifest_path"])
        package = message["package_id"]
        owner = next((n for n, p in packages.items() if p["id"] == package), None)
        name = "%s %s" % (os.path.basename(folder), target)
        job = (name, [message["executable"], "--test-threads", str(args.threads)], folder, frozenset(bins_needed(owner)))
        lanes["long" if target in LONG_LANE else "short"].put(job)
    status = build.wait()
    with built:
        build_over[0] = True
        built.notify_all()
    if status != 0:
        failures.append("the build")
    else:
        for command in args.after:
            lanes["short"].put((command, ["bash", "-c", command], None))
    for q in lanes.values():
        q.put(None)
    for t in threads:
        t.join()
    if failures:
        print("failed: " + ", ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
