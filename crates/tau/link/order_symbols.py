"""Called by `ordered-cc` for the link of the optimised `tau` binary: turns the start-up list
(crates/tau/link/startup-order.txt) into the exact symbol names of the objects being linked,
then runs `cc` with that list in place of the original.

Each line of the list is a demangled name without hashes, alone when the binary the list was
made from had one function of that name, or followed by `<TAB>size<TAB>hash` of the instance
that ran when it had several (the instances of a generic function that the legacy mangling
names alike: `RawTable<T,A>::reserve_rehash` has ~150, one or two of which run at start-up).

Why names without hashes: a Rust symbol carries hashes of its crate's dependency graph, so a
new dependency anywhere below `tau` renames every function above it, and a list of exact names
went stale within a day. The demangled name without hashes changes only when the function
itself is renamed or moved. An instance is found by its hash while that still holds, else by
its size (the same code of the same types), else every instance of the name is placed, which
costs memory but never loses a function (decisions T89, T130).

    python3 order_symbols.py <cc arguments>          # as the linker driver
    python3 order_symbols.py --report BINARY [LIST]  # how the list matches a built binary
"""
import os
import re
import subprocess
import sys
import tempfile

ORDERING = "-Wl,--symbol-ordering-file="
HASHES = re.compile(r"\[[0-9a-f]{16}\]|::h[0-9a-f]{16}$")
LEGACY_HASH = re.compile(r"17h([0-9a-f]{16})E$")
LIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "startup-order.txt")


def key(demangled):
    """The demangled name without crate disambiguators or legacy hashes."""
    return HASHES.sub("", demangled)


def instance_hash(mangled):
    """The legacy mangling's hash of one instance, or "" (v0 names carry their types)."""
    found = LEGACY_HASH.search(mangled)
    return found.group(1) if found else ""


def symbols(path):
    """(mangled, demangled, size, address) of every defined function of an object, archive
    or binary."""
    plain = subprocess.run(["nm", "-S", "--defined-only", path], capture_output=True, text=True)
    nice = subprocess.run(["nm", "-S", "-C", "--defined-only", path], capture_output=True,
                          text=True)
    for raw, readable in zip(plain.stdout.splitlines(), nice.stdout.splitlines()):
        raw_fields, nice_fields = fields(raw), fields(readable)
        if raw_fields and nice_fields and raw_fields[2] in "tTwW":
            yield raw_fields[3], nice_fields[3], raw_fields[1], raw_fields[0]


def fields(line):
    """(address, size, type, name) of a line of `nm -S`, whose size column is missing for
    size 0."""
    parts = line.split(maxsplit=3)
    if len(parts) == 4 and len(parts[2]) == 1:
        return int(parts[0], 16), int(parts[1], 16), parts[2], parts[3]
    parts = line.split(maxsplit=2)
    if len(parts) == 3 and len(parts[1]) == 1:
        return int(parts[0], 16), 0, parts[1], parts[2]
    return None


def read_list(path):
    """[(name, size or None, hash)] in the order of the list."""
    entries = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if not parts[0]:
                continue
            if len(parts) >= 3:
                entries.append((parts[0], int(parts[1]), parts[2]))
            else:
                entries.append((parts[0], None, ""))
    return entries


def place(entries, functions):
    """The mangled names to place, in order, and how each entry was matched.

    `functions` are (mangled, demangled, size, address) of the link. Counts: "instance"
    (found by hash), "size", "name" (the list names one function and so does the link),
    "all" (every instance of the name: the one that ran was not recognised), "missing"."""
    by_name = {}
    for mangled, demangled, size, _ in functions:
        by_name.setdefault(key(demangled), []).append((mangled, size, instance_hash(mangled)))
    counts = dict.fromkeys(("instance", "size", "name", "all", "missing"), 0)
    placed, seen = [], set()
    for name, size, wanted in entries:
        candidates = by_name.get(name)
        if not candidates:
            counts["missing"] += 1
            continue
        if size is None:
            chosen, how = candidates, "name" if len(candidates) == 1 else "all"
        else:
            chosen, how = [c for c in candidates if wanted and c[2] == wanted], "instance"
            if not chosen:
                chosen, how = [c for c in candidates if c[1] == size], "size"
            if not chosen:
                chosen, how = candidates, "all"
        counts[how] += 1
        for mangled, _, _ in chosen:
            if mangled not in seen:
                seen.add(mangled)
                placed.append(mangled)
    return placed, counts


def main(args):
    if args[:1] == ["--report"]:
        return report(args[1], args[2] if len(args) > 2 else LIST)
    cc = os.environ.get("TAU_LINK_CC", "cc")
    try:
        return link_ordered(cc, args)
    except (OSError, StopIteration, ValueError, subprocess.SubprocessError) as error:
        # The ordering only saves memory: never let it fail the build.
        print(f"ordered-cc: linking without the start-up order ({error})", file=sys.stderr)
        return subprocess.run([cc] + args).returncode


def link_ordered(cc, args):
    listed = next(a[len(ORDERING):] for a in args if a.startswith(ORDERING))
    functions = []
    for arg in args:
        if arg.endswith((".o", ".rlib", ".a")) and os.path.exists(arg):
            functions.extend(symbols(arg))
    placed, _ = place(read_list(listed), functions)
    with tempfile.NamedTemporaryFile("w", suffix=".order", delete=False) as out:
        out.write("".join(name + "\n" for name in placed))
    args = [ORDERING + out.name if a.startswith(ORDERING) else a for a in args]
    try:
        return subprocess.run([cc] + args).returncode
    finally:
        os.unlink(out.name)


def report(binary, listed):
    """Prints how the list matches `binary` (bench/startup.sh, bench/idle-rss.py); exit 1
    when under nine in ten of its entries are found as the instance that ran."""
    entries = read_list(listed)
    functions = list(symbols(binary))
    placed, counts = place(entries, functions)
    sizes = {mangled: size for mangled, _, size, _ in functions}
    exact = counts["instance"] + counts["size"] + counts["name"]
    print("start-up order: %d of %d listed functions found as the instance that ran "
          "(%d by hash, %d by size), %d as every instance of their name, %d missing; "
          "%d KiB placed" % (exact, len(entries), counts["instance"], counts["size"],
                             counts["all"], counts["missing"],
                             sum(sizes.get(m, 0) for m in placed) // 1024))
    return 0 if exact * 10 >= len(entries) * 9 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
