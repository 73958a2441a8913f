#!/usr/bin/env python3
"""Instruction counts (valgrind callgrind) of tau's scripted runs, for one or more tau binaries
in the same run: start-up to `get_state` with a configured provider, a reply of --deltas
deltas in the full and the lean `message_update` shape, a lean reply of --paced deltas sent
--pace milliseconds apart as a model sends them (each delta wakes tau on its own; reported per
delta beyond the start-up, in thousands), and `switch_session` + `get_messages`
of a 5,000-entry session (median of --runs: thread timing moves it by up to ±20 %). Counts do
not move with the machine's load, so two builds can be compared on a busy machine.

    python3 bench/instructions.py [--deltas 5000] [--paced 300] [--pace 10] [--runs 4] [BINARY ...]
    # default target/dist/tau
Needs valgrind and the dist build of tau-mock-llm (cargo build --profile dist -p tau-mock-llm).
"""
import argparse, importlib.util, json, os, re, statistics, subprocess, tempfile, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def count(tau, args, stdin, env, cwd=None):
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", tau] + args,
                         input=stdin, env=env, capture_output=True, cwd=cwd)
    found = re.search(rb"Collected : (\d+)", out.stderr)
    if not found:
        raise SystemExit("valgrind gave no count for %s" % tau)
    return int(found.group(1)) / 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--deltas", type=int, default=5000)
    parser.add_argument("--paced", type=int, default=300)
    parser.add_argument("--pace", type=int, default=10, help="milliseconds (valgrind is slow: 10 keeps up)")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("binaries", nargs="*", default=[os.path.join(TARGET, "dist", "tau")])
    args = parser.parse_args()
    mock = subprocess.Popen([os.path.join(TARGET, "dist", "tau-mock-llm"), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        url = json.loads(mock.stdout.readline())["url"]
        work = tempfile.mkdtemp()
        os.makedirs(work + "/agent")
        os.makedirs(work + "/cwd")
        with open(work + "/agent/models.json", "w") as f:
            json.dump({"providers": {"mock": {"baseUrl": url + "/v1", "api": "openai-completions",
                       "apiKey": "k", "models": [{"id": "mock-1", "contextWindow": 1000000,
                                                  "maxTokens": 100000}]}}}, f)
        env = dict(os.environ, TAU_AGENT_DIR=work + "/agent")
        spec = importlib.util.spec_from_file_location("session_open", os.path.join(ROOT, "bench", "session-open.py"))
        session_open = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(session_open)
        session = work + "/s.jsonl"
        session_open.generate(session, 5000, work + "/cwd", 1)
        switch = (json.dumps({"id": "s", "type": "switch_session", "sessionPath": session}) + "\n"
                  + '{"id":"m","type":"get_messages"}\n').encode()
        prompt = b'{"id":"p","type":"prompt","message":"stream please"}\n'
        reply = json.dumps({"content": [{"type": "text", "chunks": ["%04d" % (i % 10000) for i in range(args.deltas)]}]}).encode()

        paced_reply = json.dumps({"content": [{"type": "text", "chunks": ["%04d" % i for i in range(args.paced)]}],
                                  "chunkDelayMs": args.pace}).encode()

        def stream(tau, extra, reply=reply):
            urllib.request.urlopen(urllib.request.Request(url + "/_mock/replies", data=reply,
                                   headers={"content-type": "application/json"})).read()
            return count(tau, ["--mode", "rpc", "--no-session"] + extra, prompt, env)

        print("%-40s %10s %12s %12s %14s %16s" % ("binary (M instructions)", "start-up", "full stream", "lean stream",
                                                  "switch 5,000", "paced K/delta"))
        for tau in map(os.path.abspath, args.binaries):
            startup = count(tau, ["--mode", "rpc", "--no-session"], b'{"id":"1","type":"get_state"}\n', env)
            full = stream(tau, [])
            lean = stream(tau, ["--message-updates", "lean"])
            switches = [count(tau, ["--mode", "rpc", "--no-session"], switch, env, cwd=work + "/cwd")
                        for _ in range(args.runs)]
            paced = statistics.median(stream(tau, ["--message-updates", "lean"], paced_reply) for _ in range(args.runs))
            # Per delta beyond the start-up it shares with the `get_state` run.
            print("%-40s %10.2f %12.1f %12.1f %14.1f %16.1f" % (tau[-40:], startup, full, lean, statistics.median(switches),
                                                           (paced - startup) * 1000 / args.paced))
    finally:
        mock.kill()


if __name__ == "__main__":
    main()
