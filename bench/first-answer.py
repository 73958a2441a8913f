#!/usr/bin/env python3
"""Milliseconds from spawning an RPC-mode agent to its answer to one command, the median of
--runs (after --warmup), printed alone; the process's exit after that is not timed (an agent
shutting its extensions down is not part of loading them).

    python3 bench/first-answer.py [--runs 10] [--warmup 2] -- tau --mode rpc --no-session -e x.ts

The command sent is `get_state` with id "1"; the answer is the first line that carries that id.
Used by bench/extension-load.sh, for tau and pi alike.
"""
import argparse, json, os, statistics, subprocess, sys, time


def once(argv):
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    proc.stdin.write(b'{"id":"1","type":"get_state"}\n')
    proc.stdin.flush()
    answered = None
    for line in proc.stdout:
        try:
            frame = json.loads(line)
        except ValueError:
            continue
        if isinstance(frame, dict) and frame.get("id") == "1":
            answered = (time.perf_counter() - started) * 1000
            break
    proc.stdin.close()
    proc.stdout.close()
    proc.wait()
    if answered is None or frame.get("success") is not True:
        raise SystemExit(f"no successful answer from {argv[0]}")
    return answered


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("argv", nargs="+")
    args = parser.parse_args()
    for _ in range(args.warmup):
        once(args.argv)
    print("%.1f" % statistics.median(once(args.argv) for _ in range(args.runs)))


if __name__ == "__main__":
    main()
