#!/usr/bin/env python3
"""The interactive session on a pseudo-terminal, tau beside pi 0.79 in the same run.

Three figures per agent, medians of --runs interleaved rounds:
  start ms    launch to an editable prompt (the footer naming the model is on screen);
  reply CPU   user+system CPU seconds of the whole process (children included) for a start,
              one reply of --deltas text deltas drawn on screen, and the exit;
  screen MB   what the agent wrote to the terminal for all that, which the terminal has to
              take in (a program that writes faster than it does waits).

Both run against tau-mock-llm (started here, rules mode off, replies scripted over its control
API) with the same models.json.

  python3 bench/tui.py [--runs 7] [--deltas 10000] [--code] [--pace MS] [--pi /tmp/pi-ref/node_modules/.bin/pi]
                       [--before OTHER_TAU_BINARY]

--code makes the reply one Rust code block (ten deltas a line), drawn highlighted.
--pace MS has the mock wait MS milliseconds between two deltas (chunkDelayMs), as a model does;
reply s is the time from Enter until the reply's last word is on screen: with --pace it shows
what waits between a delta's arrival and its frame, without it how fast a burst gets through.

Needs `cargo build --profile dist -p tau -p tau-mock-llm` (done here) and, for the pi column,
bash bench/reference/install-pi.sh.
"""

import argparse
import json
import os
import pty
import re
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANSI = re.compile(rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")


def start_mock(target):
    mock = subprocess.Popen([os.path.join(target, "tau-mock-llm")], stdout=subprocess.PIPE, text=True)
    line = mock.stdout.readline()
    url = json.loads(line)["url"]
    return mock, url


def push_reply(url, deltas, code=False, pace=0):
    if code:
        # A Rust code block, ten deltas to a line: the highlighter's case.
        chunks = ["```rust\n"] + [("let v%d = %d; // n\n" if i % 10 == 9 else "v%d + %d ") % (i, i)
                                   for i in range(deltas - 2)] + ["\n```\nTHE-END."]
    else:
        chunks = ["word%d " % i for i in range(deltas - 1)] + ["THE-END."]
    reply = {"content": [{"type": "text", "chunks": chunks}]}
    if pace:
        reply["chunkDelayMs"] = pace
    body = json.dumps(reply).encode()
    req = urllib.request.Request(url + "/_mock/replies", data=body, method="POST",
                                 headers={"content-type": "application/json"})
    urllib.request.urlopen(req).read()


class Session:
    """One agent in a pseudo-terminal of 120x40."""

    def __init__(self, argv, env, cwd):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.chdir(cwd)
            os.execvpe(argv[0], argv, env)
        import fcntl, struct, termios
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.plain = b""
        self.carry = b""
        self.written = 0

    def take(self, data):
        """Adds what the agent wrote to the text seen, escape sequences left out as they come (a
        sequence cut at the end of a read waits for its rest): stripping all that was kept at
        every read made the reader, not the agent, the slow side for an agent writing often."""
        data = self.carry + data
        self.carry = b""
        cut = data.rfind(b"\x1b")
        if cut != -1 and not ANSI.match(data, cut) and len(data) - cut < 4096:
            data, self.carry = data[:cut], data[cut:]
        # Keep the tail only: the marker is recent.
        self.plain = (self.plain + ANSI.sub(b"", data))[-400000:]

    def wait_for(self, marker, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker in self.plain:
                return True
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if r:
                try:
                    data = os.read(self.fd, 1 << 16)
                except OSError:
                    return False
                self.take(data)
                self.written += len(data)
                # Answer the queries a terminal answers: the cursor position, the colours
                # (OSC 10/11, a dark background) and the device attributes (DA1).
                if b"\x1b[6n" in data:
                    os.write(self.fd, b"\x1b[1;1R")
                answer = b""
                if b"\x1b]10;?" in data:
                    answer += b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\"
                if b"\x1b]11;?" in data:
                    answer += b"\x1b]11;rgb:0000/0000/0000\x1b\\"
                if b"\x1b[c" in data:
                    answer += b"\x1b[?62;22c"
                if answer:
                    os.write(self.fd, answer)
        return False

    def send(self, data):
        os.write(self.fd, data)

    def finish(self):
        """Quits (Ctrl+C twice, then Ctrl+D), returns CPU seconds of the process tree."""
        for key in (b"\x03", b"\x03", b"\x04"):
            self.send(key)
            time.sleep(0.15)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid, status, usage = os.wait4(self.pid, os.WNOHANG)
            if pid:
                return usage.ru_utime + usage.ru_stime
            try:
                self.written += len(os.read(self.fd, 1 << 16))
            except OSError:
                pass
            time.sleep(0.02)
        os.kill(self.pid, 9)
        _, _, usage = os.wait4(self.pid, 0)
        return usage.ru_utime + usage.ru_stime


def run_once(argv, env, cwd, url, deltas, marker, code=False, pace=0):
    # The children's CPU (pi's Node) counts: measured from a fork that waits for them.
    started = time.monotonic()
    s = Session(argv, env, cwd)
    if not s.wait_for(marker):
        raise SystemExit("%s never showed %r:\n%s" % (argv[0], marker, s.plain[-2000:]))
    start_ms = (time.monotonic() - started) * 1000
    push_reply(url, deltas, code, pace)
    time.sleep(0.3)
    s.send(b"go")
    time.sleep(0.1)
    s.send(b"\r")
    sent = time.monotonic()
    if not s.wait_for(b"THE-END.", timeout=180):
        raise SystemExit("%s never finished the reply" % argv[0])
    reply_s = time.monotonic() - sent
    time.sleep(0.3)
    cpu = s.finish()
    return start_ms, cpu, reply_s, s.written / 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--deltas", type=int, default=10000)
    parser.add_argument("--code", action="store_true", help="the reply is one code block")
    parser.add_argument("--pace", type=int, default=0, help="milliseconds between two deltas")
    parser.add_argument("--pi", default="/tmp/pi-ref/node_modules/.bin/pi")
    parser.add_argument("--before", help="another tau binary, run beside this tree's (an A/B in one run)")
    args = parser.parse_args()
    subprocess.run(["cargo", "build", "--profile", "dist", "--quiet", "-p", "tau", "-p", "tau-mock-llm"],
                   cwd=ROOT, check=True)
    target = os.path.join(ROOT, "target", "dist")
    mock, url = start_mock(target)
    work = tempfile.mkdtemp()
    try:
        agents = {}
        models = {"providers": {"mock": {"baseUrl": url + "/v1", "api": "openai-completions", "apiKey": "k",
                                         "models": [{"id": "mock-1", "contextWindow": 100000, "maxTokens": 4096}]}}}
        base_env = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm-256color", "LANG": "C.UTF-8"}
        for name in ("tau", "tau before", "pi"):
            if name == "tau before" and not args.before:
                continue
            home = os.path.join(work, name + "-home")
            agent = os.path.join(work, name + "-agent")
            os.makedirs(home)
            os.makedirs(agent)
            with open(os.path.join(agent, "models.json"), "w") as f:
                json.dump(models, f)
            with open(os.path.join(agent, "settings.json"), "w") as f:
                json.dump({"retry": {"enabled": False}, "defaultProvider": "mock", "defaultModel": "mock-1",
                           "quietStartup": True}, f)
            env = dict(base_env, HOME=home)
            if name.startswith("tau"):
                env["TAU_AGENT_DIR"] = agent
                binary = args.before if name == "tau before" else os.path.join(target, "tau")
                argv = [binary, "--no-session"]
            else:
                if not os.access(args.pi, os.X_OK):
                    continue
                env.update(PI_CODING_AGENT_DIR=agent, PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1")
                argv = [args.pi, "--no-session"]
            agents[name] = (argv, env)
        cwd = os.path.join(work, "project")
        os.makedirs(cwd)
        results = {name: [] for name in agents}
        for _ in range(args.runs):
            for name, (argv, env) in agents.items():
                results[name].append(run_once(argv, env, cwd, url, args.deltas, b"mock-1", args.code,
                                              args.pace))
        paced = " | reply s (Enter to the last delta on screen)"
        print("| agent | start ms (launch to editable prompt) | CPU s (start, %d-delta reply, exit) "
              "| screen MB%s |" % (args.deltas, paced))
        print("|---|---:|---:|---:|---:|")
        for name, rows in results.items():
            reply = " | %.2f" % statistics.median(r[2] for r in rows)
            print("| %s | %.1f | %.3f | %.2f%s |" % (name, statistics.median(r[0] for r in rows),
                                                     statistics.median(r[1] for r in rows),
                                                     statistics.median(r[3] for r in rows), reply))
        if "pi" in results and "tau" in results:
            t, p = results["tau"], results["pi"]
            print("\ntau/pi: start %.3f, CPU %.3f" % (
                statistics.median(r[0] for r in t) / statistics.median(r[0] for r in p),
                statistics.median(r[1] for r in t) / statistics.median(r[1] for r in p)))
    finally:
        mock.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
