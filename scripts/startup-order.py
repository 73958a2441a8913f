#!/usr/bin/env python3
"""Writes crates/tau/link/startup-order.txt: the functions tau runs from exec to answering
`get_state`, which the linker places first in `.text` (crates/tau/build.rs).

Why: the kernel maps a file's pages into a process 64 KiB at a time around each fault, so the
~1 MB of code a start-up runs, scattered over 14 MB of text, made ~5 MB resident. Placed
together it is ~1.2 MB (docs/decisions.md T89). Symbol names carry hashes that change with
the compiler and dependency versions; names that no longer exist are ignored by the linker,
and `bench/startup.sh` says when too few of them are found, so the list is refreshed with this
script rather than left to decay. Names are written demangled and without hashes, which a new
dependency does not change (the workspace's linker driver, crates/tau/link/ordered-cc, looks
up the symbols of each link). A name that several instances of a generic function share is
followed by the size and hash of the instance that ran, so that only it is placed: placing
every instance put 3.3 MB in the ordered range for the 1.35 MB that runs (decision T130).

    python3 scripts/startup-order.py            # builds the dist profile, needs valgrind
    python3 scripts/startup-order.py BINARY     # traces a dist binary built already
"""
import bisect
import os
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out_path = os.path.join(root, "crates", "tau", "link", "startup-order.txt")
if len(sys.argv) > 1:
    tau = os.path.abspath(sys.argv[1])
else:
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    tau = os.path.join(target, "dist", "tau")
    subprocess.run(["cargo", "build", "--profile", "dist", "--quiet", "-p", "tau"], cwd=root,
                   check=True)

# Which functions run at exit, and on which thread, depends on when the runtime's threads are
# scheduled: the list is the union of several runs (one missed function costs a 64 KiB block).
RUNS = 10
executed = set()
with tempfile.TemporaryDirectory() as work:
    os.mkdir(os.path.join(work, "agent"))
    log = os.path.join(work, "lackey.log")
    env = dict(os.environ, TAU_AGENT_DIR=os.path.join(work, "agent"))
    for _ in range(RUNS):
        # Lackey prints every executed instruction's address ("I  <hex>,<len>"), in every thread.
        subprocess.run(
            ["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-file={log}", tau,
             "--mode", "rpc", "--no-session"],
            input=b'{"id":"1","type":"get_state"}\n', env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, check=True)
        with open(log) as lines:
            for line in lines:
                if line.startswith("I "):
                    executed.add(int(line[3:].split(",", 1)[0], 16))

# Listed by demangled name without hashes (crates/tau/link/order_symbols.py says why), with
# the size and legacy hash of the instance when several functions have that name.
sys.path.insert(0, os.path.join(root, "crates", "tau", "link"))
from order_symbols import instance_hash, key, symbols as functions  # noqa: E402

symbols = [(address, size, key(demangled), instance_hash(mangled))
           for mangled, demangled, size, address in functions(tau)]
symbols.sort()
starts = [s[0] for s in symbols]
instances = {}
for s in symbols:
    instances[s[2]] = instances.get(s[2], 0) + 1
entry = int(subprocess.run(["readelf", "-h", tau], capture_output=True, text=True, check=True)
            .stdout.split("Entry point address:")[1].split()[0], 16)
# Valgrind loads a position-independent executable at a fixed base; find it from the entry point.
base = next((b for b in (0x108000, 0x0, 0x4000000, 0x400000) if b + entry in executed), None)
if base is None:
    sys.exit("could not find where valgrind loaded tau")

ran = {}
for address in sorted(executed):
    at = address - base
    i = bisect.bisect_right(starts, at) - 1
    if i >= 0 and symbols[i][0] <= at < symbols[i][0] + max(symbols[i][1], 1):
        _, size, name, hash_ = symbols[i]
        ran.setdefault(name if instances[name] == 1 else f"{name}\t{size}\t{hash_}", size)
with open(out_path, "w") as out:
    out.write("".join(line + "\n" for line in ran))
print(f"{len(ran)} functions ({sum(ran.values()) // 1024} KiB) written to "
      f"{os.path.relpath(out_path, root)}")
