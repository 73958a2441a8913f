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
up the symbols of each link).

    python3 scripts/startup-order.py            # builds the dist profile, needs valgrind
"""
import bisect
import os
import re
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out_path = os.path.join(root, "crates", "tau", "link", "startup-order.txt")
tau = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target")), "dist", "tau")

subprocess.run(["cargo", "build", "--profile", "dist", "--quiet", "-p", "tau"], cwd=root, check=True)

with tempfile.TemporaryDirectory() as work:
    os.mkdir(os.path.join(work, "agent"))
    log = os.path.join(work, "lackey.log")
    env = dict(os.environ, TAU_AGENT_DIR=os.path.join(work, "agent"))
    # Lackey prints every executed instruction's address ("I  <hex>,<len>"), in every thread.
    subprocess.run(
        ["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-file={log}", tau,
         "--mode", "rpc", "--no-session"],
        input=b'{"id":"1","type":"get_state"}\n', env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, check=True)
    executed = set()
    with open(log) as lines:
        for line in lines:
            if line.startswith("I "):
                executed.add(int(line[3:].split(",", 1)[0], 16))

# Listed by demangled name without hashes (crates/tau/link/order_symbols.py says why).
HASHES = re.compile(r"\[[0-9a-f]{16}\]|::h[0-9a-f]{16}$")
symbols = []
nm = subprocess.run(["nm", "-S", "--defined-only", "-C", tau], capture_output=True, text=True,
                    check=True)
for line in nm.stdout.splitlines():
    parts = line.split(maxsplit=3)
    if len(parts) == 4 and parts[2] in "tTwW":
        symbols.append((int(parts[0], 16), int(parts[1], 16), HASHES.sub("", parts[3])))
symbols.sort()
starts = [s[0] for s in symbols]
entry = int(subprocess.run(["readelf", "-h", tau], capture_output=True, text=True, check=True)
            .stdout.split("Entry point address:")[1].split()[0], 16)
# Valgrind loads a position-independent executable at a fixed base; find it from the entry point.
base = next((b for b in (0x108000, 0x0, 0x4000000, 0x400000) if b + entry in executed), None)
if base is None:
    sys.exit("could not find where valgrind loaded tau")

ordered = {}
for address in sorted(executed):
    at = address - base
    i = bisect.bisect_right(starts, at) - 1
    if i >= 0 and symbols[i][0] <= at < symbols[i][0] + max(symbols[i][1], 1):
        ordered.setdefault(symbols[i][2], None)
with open(out_path, "w") as out:
    out.write("".join(name + "\n" for name in ordered))
size = sum(s[1] for s in symbols if s[2] in ordered)
print(f"{len(ordered)} functions ({size // 1024} KiB) written to {os.path.relpath(out_path, root)}")
