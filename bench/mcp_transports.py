"""The measuring half of bench/mcp_transports.sh: flycode mcp over stdio beside flycode mcp --http.

    python mcp_transports.py FLYCODE ROUNDS CALLS

The same client (the official Python SDK) makes the same calls through both transports, in both
protocol eras: CALLS trivial calls one after another (a 5-byte fs_read: the per-call cost of
the transport, the client's share included), and 64 such calls in flight at once on one client
(the time until the last answer). The servers take turns, ROUNDS rounds; each figure is the
median over the rounds (per call: over every call of every round). Prints a Markdown table.
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
    try:
        for _ in range(rounds):
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


anyio.run(main)
