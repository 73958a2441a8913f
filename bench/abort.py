#!/usr/bin/env python3
"""Abort latency (issue 5: a run must end within 100 ms of `abort`). For each moment, a run
is brought there against tau-mock-llm, `abort` is written, and the time until `agent_end` is
read back is measured. Prints median and worst of --runs runs per moment, in milliseconds.

    python3 bench/abort.py [--runs 20]

Needs release builds: cargo build --release -p tau -p tau-mock-llm
"""
import argparse, json, os, subprocess, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAU = os.path.join(ROOT, "target/release/tau")
MOCK = os.path.join(ROOT, "target/release/tau-mock-llm")


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
}


def marker_of(record):
    if record.get("type") == "message_update":
        return record["assistantMessageEvent"]["type"]
    return record.get("type")


def one(proc, url, reply, setup, marker):
    post(url + "/_mock/replies", reply)
    for command in setup:
        proc.stdin.write((json.dumps(command) + "\n").encode())
    proc.stdin.write(b'{"id":"p","type":"prompt","message":"go"}\n')
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
        if record.get("type") == "agent_end":
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
    env = dict(os.environ, TAU_AGENT_DIR=work)
    proc = subprocess.Popen([TAU, "--mode", "rpc", "--no-session"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=work)
    try:
        print("%-26s %10s %10s" % ("abort", "median ms", "worst ms"))
        for name, (reply, setup, marker) in MOMENTS.items():
            times = sorted(one(proc, url, reply, setup, marker) for _ in range(args.runs))
            print("%-26s %10.1f %10.1f" % (name, times[len(times) // 2], times[-1]))
            post(url + "/_mock/reset", {})
    finally:
        proc.kill()
        mock.kill()


if __name__ == "__main__":
    main()
