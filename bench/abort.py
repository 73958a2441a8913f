#!/usr/bin/env python3
"""Abort latency (issue 5: a run must end within 100 ms of `abort`; issue 16: so must a
`compact`). For each moment, a run (or a compaction) is brought there against tau-mock-llm,
`abort` is written, and the time until `agent_end` (`compaction_end`) is read back is
measured. Prints median and worst of --runs runs per moment, in milliseconds.

    python3 bench/abort.py [--runs 20]

Needs the shipped (dist) builds: cargo build --profile dist -p tau -p tau-mock-llm (in $CARGO_TARGET_DIR
when that is set)
"""
import argparse, json, os, subprocess, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
TAU = os.path.join(TARGET, "dist/tau")
MOCK = os.path.join(TARGET, "dist/tau-mock-llm")


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    urllib.request.urlopen(req).read()


HOST_TOOL = {"name": "ask_host", "description": "Asks the host.",
             "parameters": {"type": "object", "properties": {}}}

# name: (mock reply, extra commands before the prompt, the record that marks the moment)
MOMENTS = {
    "before the first token": ({"delayMs": 5000, "content": [{"type": "text", "text": "late"}]}, [], "message_start"),
    "mid-text": ({"chunkDelayMs": 50, "content": [{"type": "text", "chunks": ["tok "] * 200}]}, [], "text_delta"),
    "mid-tool-call arguments": ({"chunkDelayMs": 50, "chunkSize": 1, "content": [
        {"type": "toolCall", "id": "c", "name": "bash", "arguments": {"command": "echo " + "x" * 300}}]}, [], "toolcall_delta"),
    "during a host tool": ({"content": [{"type": "toolCall", "id": "h", "name": "ask_host", "arguments": {}}]},
                           [{"type": "set_host_tools", "tools": [HOST_TOOL]}], "host_tool_call"),
    "during a long bash": ({"content": [{"type": "toolCall", "id": "b", "name": "bash",
                                         "arguments": {"command": "sleep 30"}}]}, [], "tool_execution_start"),
    # Last: the runs above leave a conversation to compact.
    "during a compaction": ({"delayMs": 5000, "content": [{"type": "text", "text": "late summary"}]},
                            [], "compaction_start"),
}

# Moments started by another command than a prompt: (that command, the record that ends them).
TRIGGERS = {"during a compaction": ({"id": "c", "type": "compact"}, "compaction_end")}
PROMPT = ({"id": "p", "type": "prompt", "message": "go"}, "agent_end")


def marker_of(record):
    if record.get("type") == "message_update":
        return record["assistantMessageEvent"]["type"]
    return record.get("type")


def one(proc, url, name, reply, setup, marker):
    trigger, end = TRIGGERS.get(name, PROMPT)
    post(url + "/_mock/replies", reply)
    for command in setup:
        proc.stdin.write((json.dumps(command) + "\n").encode())
    proc.stdin.write((json.dumps(trigger) + "\n").encode())
    proc.stdin.flush()
    while True:
        record = json.loads(proc.stdout.readline())
        if marker_of(record) == marker:
            break
    time.sleep(0.05)
    start = time.monotonic()
    proc.stdin.write(b'{"id":"a","type":"abort"}\n')
    proc.stdin.flush()
    while True:
        record = json.loads(proc.stdout.readline())
        if record.get("type") == end:
            if end == "compaction_end" and not record.get("aborted"):
                raise SystemExit("the compaction was not aborted: %s" % json.dumps(record))
            return (time.monotonic() - start) * 1000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    mock = subprocess.Popen([MOCK, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    url = json.loads(mock.stdout.readline())["url"]
    work = tempfile.mkdtemp()
    models = {"providers": {"mock": {"baseUrl": url + "/v1", "api": "openai-completions", "apiKey": "k",
                                     "models": [{"id": "mock-1", "contextWindow": 100000, "maxTokens": 4096}]}}}
    with open(os.path.join(work, "models.json"), "w") as f:
        json.dump(models, f)
    with open(os.path.join(work, "settings.json"), "w") as f:
        json.dump({"compaction": {"keepRecentTokens": 1}}, f)
    env = dict(os.environ, TAU_AGENT_DIR=work)
    proc = subprocess.Popen([TAU, "--mode", "rpc", "--no-session"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=work)
    try:
        print("%-26s %10s %10s" % ("abort", "median ms", "worst ms"))
        for name, (reply, setup, marker) in MOMENTS.items():
            times = sorted(one(proc, url, name, reply, setup, marker) for _ in range(args.runs))
            print("%-26s %10.1f %10.1f" % (name, times[len(times) // 2], times[-1]))
            post(url + "/_mock/reset", {})
    finally:
        proc.kill()
        mock.kill()


if __name__ == "__main__":
    main()
