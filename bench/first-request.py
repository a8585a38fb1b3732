#!/usr/bin/env python3
"""First-request sizes of `flycode run`: what a model must read before its first token.

Runs the real binary once per calling mode, tool set and prompt profile against a loopback
server that records the request body and answers "Done.", then prints a Markdown table of the
body's bytes and an estimate of its tokens (bytes / 4, the usual rule of thumb for English text
and JSON; a model's own tokenizer gives other counts, within some 20 %).

Usage: bench/first-request.py [path/to/flycode]   (default: target/debug/flycode)
"""

import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading

DONE = (
    'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Done."},'
    '"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)


class Recorder(http.server.BaseHTTPRequestHandler):
    bodies = []

    def do_POST(self):  # noqa: N802 (the standard library's name)
        length = int(self.headers.get("Content-Length", "0"))
        Recorder.bodies.append(self.rfile.read(length))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(DONE.encode())

    def log_message(self, *args):
        pass


def first_request(binary, server, workdir, mode, tools, profile):
    Recorder.bodies.clear()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FLYCODE_", "OPENAI_", "LLM_", "LIGHT_LLM_"))}
    env.update(HOME=workdir, FLYCODE_STATE_DIR=os.path.join(workdir, "state"), NO_COLOR="1")
    env.pop("XDG_CONFIG_HOME", None)
    command = [
        binary, "run", "--base-url", f"http://127.0.0.1:{server.server_port}/v1",
        "--model", "bench", "--mode", mode, "--tools", tools, "--prompt", profile,
        "--root", workdir, "--yes", "Say done.",
    ]
    subprocess.run(command, env=env, cwd=workdir, check=True, capture_output=True)
    body = Recorder.bodies[0]
    parsed = json.loads(body)
    system = next((m["content"] for m in parsed["messages"] if m["role"] == "system"), "")
    tool_bytes = len(json.dumps(parsed["tools"], separators=(",", ":"))) if "tools" in parsed else 0
    return len(body), len(system.encode()), tool_bytes


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "target/debug/flycode"
    binary = os.path.abspath(binary)
    server = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("| mode | tools | prompt | request bytes | ≈ tokens | system prompt bytes | tools JSON bytes |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    try:
        with tempfile.TemporaryDirectory() as workdir:
            for mode in ("native", "text"):
                for tools in ("seed", "extended"):
                    for profile in ("full", "compact"):
                        total, system, tool_bytes = first_request(
                            binary, server, workdir, mode, tools, profile)
                        shown = tool_bytes if mode == "native" else "—"
                        print(f"| {mode} | {tools} | {profile} | {total} | {total // 4} "
                              f"| {system} | {shown} |")
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
