"""The measuring half of bench/mcp_transports.sh: flycode mcp over stdio beside flycode mcp --http.

    python mcp_transports.py FLYCODE ROUNDS CALLS

The same client (the official Python SDK) makes the same calls through both transports, in both
protocol eras: CALLS trivial calls one after another (a 5-byte fs_read: the per-call cost of
the transport, the client's share included), and 64 such calls in flight at once on one client
(the time until the last answer). Then a bare client (no SDK: the encoded request written, the
answer read, on one kept-alive connection or the pipes) makes the same trivial calls, which shows
the server's and the transport's own share. The servers take turns, ROUNDS rounds; each figure is
the median over the rounds (per call: over every call of every round). Prints Markdown tables.
"""

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

flycode, rounds, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
IN_FLIGHT = 64


def start_http(root, env):
    """`flycode mcp --http` on a free loopback port: the process, its URL and its secret."""
    server = subprocess.Popen(
        [flycode, "mcp", "--http", "127.0.0.1:0", "--root", root],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    url = secret = None
    while url is None or secret is None:
        line = server.stderr.readline()
        if not line:
            raise SystemExit("flycode mcp --http did not start")
        if url is None and " at http://" in line:
            url = re.search(r"at (http://\S+?);", line).group(1)
        if "Bearer " in line:
            secret = re.search(r"Bearer ([0-9a-f]+)", line).group(1)
    return server, url, secret


async def one_round(transport, mode, tiny):
    """Per-call times (ms) of CALLS calls in a row, and the time (ms) of 64 calls in flight."""
    async with Client(transport(), mode=mode) as client:
        await client.call_tool("fs_read", {"path": tiny})  # warm
        per_call = []
        for _ in range(calls):
            started = time.perf_counter()
            result = await client.call_tool("fs_read", {"path": tiny})
            per_call.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result
        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(IN_FLIGHT):
                group.start_soon(client.call_tool, "fs_read", {"path": tiny})
        in_flight = (time.perf_counter() - started) * 1000
    return per_call, in_flight


def bare_http(url, secret, tiny, era):
    """Per-call times (ms) of CALLS trivial calls over one kept-alive HTTP connection."""
    import json
    import socket
    host, port = url[len("http://"):].split("/")[0].split(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pending = b""

    def exchange(body, headers=""):
        nonlocal pending
        payload = json.dumps(body).encode()
        sock.sendall(
            (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {secret}\r\n"
             f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
             f"{headers}Content-Length: {len(payload)}\r\n\r\n").encode() + payload)
        while b"\r\n\r\n" not in pending:
            pending += sock.recv(65536)
        head, pending = pending.split(b"\r\n\r\n", 1)
        head = head.decode()
        if "chunked" in head.lower():
            out = b""
            while True:
                while b"\r\n" not in pending:
                    pending += sock.recv(65536)
                size, rest = pending.split(b"\r\n", 1)
                size = int(size, 16)
                while len(rest) < size + 2:
                    rest += sock.recv(65536)
                out, pending = out + rest[:size], rest[size + 2:]
                if size == 0:
                    return head, out
        length = int(re.search(r"content-length: (\d+)", head, re.I).group(1))
        while len(pending) < length:
            pending += sock.recv(65536)
        out, pending = pending[:length], pending[length:]
        return head, out

    call = {"name": "fs_read", "arguments": {"path": tiny}}
    if era == "2025-11-25":
        head, _ = exchange({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": era, "capabilities": {}, "clientInfo": {"name": "bare", "version": "1"}}})
        session = re.search(r"mcp-session-id: (\S+)", head, re.I).group(1)
        headers = f"Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: {era}\r\n"
        exchange({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    else:
        headers = f"MCP-Protocol-Version: {era}\r\nMcp-Method: tools/call\r\nMcp-Name: fs_read\r\n"
        call["_meta"] = {"io.modelcontextprotocol/protocolVersion": era,
                         "io.modelcontextprotocol/clientInfo": {"name": "bare", "version": "1"},
                         "io.modelcontextprotocol/clientCapabilities": {}}
    times = []
    for n in range(calls):
        started = time.perf_counter()
        _, out = exchange({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call", "params": call}, headers)
        times.append((time.perf_counter() - started) * 1000)
        assert b"tiny" in out, out
    sock.close()
    return times


def bare_stdio(root, env, tiny):
    """Per-call times (ms) of CALLS trivial calls over a stdio server's pipes (2025-11-25)."""
    import json
    server = subprocess.Popen([flycode, "mcp", "--root", root], env=env, cwd=root,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def exchange(message, answered=True):
        server.stdin.write(json.dumps(message).encode() + b"\n")
        server.stdin.flush()
        return server.stdout.readline() if answered else b""

    exchange({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bare", "version": "1"}}})
    exchange({"jsonrpc": "2.0", "method": "notifications/initialized"}, answered=False)
    times = []
    for n in range(calls):
        started = time.perf_counter()
        out = exchange({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
                        "params": {"name": "fs_read", "arguments": {"path": tiny}}})
        times.append((time.perf_counter() - started) * 1000)
        assert b"tiny" in out, out
    server.stdin.close()
    server.wait()
    return times


async def main():
    scratch = tempfile.mkdtemp(prefix="flycode-mcp-transports-")
    root = os.path.join(scratch, "root")
    os.makedirs(root)
    tiny = os.path.join(root, "tiny.txt")
    with open(tiny, "w") as f:
        f.write("tiny\n")
    env = dict(os.environ, FLYCODE_STATE_DIR=os.path.join(scratch, "state"), XDG_CONFIG_HOME=os.path.join(scratch, "config"))
    server, url, secret = start_http(root, env)
    stdio = lambda: StdioServerParameters(command=flycode, args=["mcp", "--root", root], env=env, cwd=root)  # noqa: E731
    http = lambda: streamable_http_client(url, http_client=create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"}))  # noqa: E731
    results = {}
    bare = {}
    try:
        for _ in range(rounds):
            bare.setdefault(("2025-11-25", "stdio"), []).extend(bare_stdio(root, env, tiny))
            for era in ("2025-11-25", "2026-07-28"):
                bare.setdefault((era, "http"), []).extend(bare_http(url, secret, tiny, era))
            for era, mode in (("2025-11-25", "legacy"), ("2026-07-28", "2026-07-28")):
                for name, transport in (("stdio", stdio), ("http", http)):
                    per_call, in_flight = await one_round(transport, mode, tiny)
                    kept = results.setdefault((era, name), ([], []))
                    kept[0].extend(per_call)
                    kept[1].append(in_flight)
    finally:
        server.terminate()
        server.wait()
    print(f"| protocol era | transport | per call, ms (median of {rounds * calls}) | {IN_FLIGHT} calls in flight, ms (median of {rounds}) | per call in flight, ms |")
    print("| --- | --- | --- | --- | --- |")
    for (era, name), (per_call, in_flight) in results.items():
        flight = statistics.median(in_flight)
        print(f"| {era} | {name} | {statistics.median(per_call):.3f} | {flight:.1f} | {flight / IN_FLIGHT:.3f} |")
    print()
    print(f"| bare client | protocol era | transport | per call, ms (median of {rounds * calls}) |")
    print("| --- | --- | --- | --- |")
    for (era, name), times in bare.items():
        print(f"| bare | {era} | {name} | {statistics.median(times):.3f} |")


anyio.run(main)
