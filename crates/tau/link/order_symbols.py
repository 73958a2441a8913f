"""Called by `ordered-cc` for the link of the optimised `tau` binary: turns the start-up list
(demangled names without hashes, crates/tau/link/startup-order.txt) into the exact symbol names
of the objects being linked, then runs `cc` with that list in place of the original.

Why names without hashes: a Rust symbol carries hashes of its crate's dependency graph, so a
new dependency anywhere below `tau` renames every function above it, and a list of exact names
went stale within a day. The demangled name without hashes changes only when the function
itself is renamed or moved.
"""
import os
import re
import subprocess
import sys
import tempfile

ORDERING = "-Wl,--symbol-ordering-file="
HASHES = re.compile(r"\[[0-9a-f]{16}\]|::h[0-9a-f]{16}$")


def key(demangled):
    """The demangled name without crate disambiguators or legacy hashes."""
    return HASHES.sub("", demangled)


def symbols(path):
    """(mangled, demangled) of every defined symbol of an object or archive."""
    plain = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True)
    nice = subprocess.run(["nm", "--defined-only", "-C", path], capture_output=True, text=True)
    for raw, readable in zip(plain.stdout.splitlines(), nice.stdout.splitlines()):
        raw_parts = raw.split(maxsplit=2)
        nice_parts = readable.split(maxsplit=2)
        if len(raw_parts) == 3 and len(nice_parts) == 3 and raw_parts[1] in "tTwW":
            yield raw_parts[2], nice_parts[2]


def main(args):
    cc = os.environ.get("TAU_LINK_CC", "cc")
    try:
        return link_ordered(cc, args)
    except (OSError, StopIteration, subprocess.SubprocessError) as error:
        # The ordering only saves memory: never let it fail the build.
        print(f"ordered-cc: linking without the start-up order ({error})", file=sys.stderr)
        return subprocess.run([cc] + args).returncode


def link_ordered(cc, args):
    listed = next(a[len(ORDERING):] for a in args if a.startswith(ORDERING))
    with open(listed) as f:
        wanted = {line.rstrip("\n"): i for i, line in enumerate(f) if line.strip()}
    found = []
    for arg in args:
        if arg.endswith((".o", ".rlib", ".a")) and os.path.exists(arg):
            for mangled, demangled in symbols(arg):
                rank = wanted.get(key(demangled))
                if rank is not None:
                    found.append((rank, mangled))
    found.sort()
    with tempfile.NamedTemporaryFile("w", suffix=".order", delete=False) as out:
        out.write("".join(name + "\n" for _, name in found))
    args = [ORDERING + out.name if a.startswith(ORDERING) else a for a in args]
    try:
        return subprocess.run([cc] + args).returncode
    finally:
        os.unlink(out.name)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
