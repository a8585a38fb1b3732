"""The measuring half of bench/mcp_compare.sh: python mcp_compare.py FLYCODE SCRATCH RUNS ROUNDS."""

import json
import os
import statistics
import subprocess
import sys
import time

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

flycode, scratch, runs, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
npm = os.path.join(scratch, "npm", "node_modules")


def corpus(root):
    """1000 small files three levels deep, a 1 MB file, a 20 MB file, a 5-byte file."""
    os.makedirs(root, exist_ok=True)
    for a in range(10):
        for b in range(10):
            folder = os.path.join(root, "tree", f"d{a}", f"e{b}")
            os.makedirs(folder, exist_ok=True)
            for c in range(10):
                with open(os.path.join(folder, f"f{c}.txt"), "w") as f:
                    f.write(f"line one\nline two {a}{b}{c}\n" + ("needle\n" if (a, b, c) == (7, 7, 7) else ""))
    line = "x" * 1023 + "\n"
    with open(os.path.join(root, "one_mb.txt"), "w") as f:
        f.write(line * 1024)
    with open(os.path.join(root, "big.txt"), "w") as f:
        for i in range(20 * 1024):
            f.write(f"{i:08d} " + "y" * 1014 + "\n")
    with open(os.path.join(root, "tiny.txt"), "w") as f:
        f.write("tiny\n")


one_mb = ("z" * 1023 + "\n") * 1024


# Desktop Commander's defaults refuse writes over 50 lines (the 1 MB write has 1024) and cap
# reads at 1000 lines; its usage reporting is turned off so that it does not wait on the network.
DESKTOP_COMMANDER_CONFIG = [("fileWriteLineLimit", 100000), ("fileReadLineLimit", 100000), ("telemetryEnabled", False)]


def operations(root):
    """Per server: the MCP call for each operation (None: the server has no such tool)."""
    p = lambda name: os.path.join(root, name)  # noqa: E731
    tree = p("tree")
    return {
        "flycode": {
            "list depth 1": ("fs_ls", {"path": tree, "depth": 1}),
            "list depth 3": ("fs_ls", {"path": tree, "depth": 3}),
            "read 1 MB": ("fs_read", {"path": p("one_mb.txt")}),
            "head 200 lines of 20 MB": ("fs_read", {"path": p("big.txt"), "lines": "1-200"}),
            "search": ("fs_search", {"path": tree, "query": "needle"}),
            "write 1 MB": ("fs_write", {"path": p("out_mb.txt"), "mode": "overwrite", "content": one_mb}),
            "small write": lambda i: ("fs_write", {"path": p(f"small/s{i}.txt"), "mode": "overwrite", "content": "s" * 100}),
            "trivial (read 5 B)": ("fs_read", {"path": p("tiny.txt")}),
        },
        "server-filesystem": {
            "list depth 1": ("list_directory", {"path": tree}),
            "list depth 3": ("directory_tree", {"path": tree}),
            "read 1 MB": ("read_text_file", {"path": p("one_mb.txt")}),
            "head 200 lines of 20 MB": ("read_text_file", {"path": p("big.txt"), "head": 200}),
            "search": None,
            "write 1 MB": ("write_file", {"path": p("out_mb.txt"), "content": one_mb}),
            "small write": lambda i: ("write_file", {"path": p(f"small/s{i}.txt"), "content": "s" * 100}),
            "trivial (read 5 B)": ("read_text_file", {"path": p("tiny.txt")}),
        },
        "desktop-commander": {
            "list depth 1": ("list_directory", {"path": tree, "depth": 1}),
            "list depth 3": ("list_directory", {"path": tree, "depth": 3}),
            "read 1 MB": ("read_file", {"path": p("one_mb.txt"), "offset": 0, "length": 2000}),
            "head 200 lines of 20 MB": ("read_file", {"path": p("big.txt"), "offset": 0, "length": 200}),
            "search": ("start_search", {"path": tree, "pattern": "needle", "searchType": "content"}),
            "write 1 MB": ("write_file", {"path": p("out_mb.txt"), "content": one_mb, "mode": "rewrite"}),
            "small write": lambda i: ("write_file", {"path": p(f"small/s{i}.txt"), "content": "s" * 100, "mode": "rewrite"}),
            "trivial (read 5 B)": ("read_file", {"path": p("tiny.txt")}),
        },
    }


def children_rss():
    """Peak resident memory (VmHWM, KiB) of this process's children: the server."""
    peak = 0
    me = str(os.getpid())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if status.get("PPid", "").strip() == me:
            peak = max(peak, int(status.get("VmHWM", "0 kB").split()[0]))
    return peak


async def measure(name, params, root):
    ops = operations(root)[name]
    figures = {}
    async with Client(params, mode="legacy") as client:
        if name == "desktop-commander":
            for key, value in DESKTOP_COMMANDER_CONFIG:
                await client.call_tool("set_config_value", {"key": key, "value": value})
        os.makedirs(os.path.join(root, "small"), exist_ok=True)
        # The floor every call pays: a ping's round trip (the client, the pipes, the server's
        # JSON-RPC layer, no tool), so a tool's own cost is its figure minus this one.
        pings = []
        for _ in range(runs):
            started = time.perf_counter()
            await client.send_ping()
            pings.append((time.perf_counter() - started) * 1000)
        figures["ping (no tool: the floor)"] = (pings, None)
        for op, spec in ops.items():
            if spec is None:
                figures[op] = None
                continue
            count = 100 if op == "small write" else runs
            times = []
            error = None
            for i in range(count):
                tool, args = spec(i) if callable(spec) else spec
                started = time.perf_counter()
                result = await client.call_tool(tool, args)
                times.append((time.perf_counter() - started) * 1000)
                if result.is_error:
                    error = " ".join(getattr(b, "text", "") for b in result.content)[:120]
            figures[op] = (times, error)
        figures["peak RSS"] = children_rss()
    return figures


class RawClient:
    """JSON-RPC over the server's pipes with no SDK: one line out, read lines until the answer.
    What it measures is the server's own time plus the pipes, nearly without client overhead."""

    def __init__(self, params):
        self.process = subprocess.Popen(
            [params.command, *params.args], env=params.env, cwd=params.cwd,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method, params):
        """The answer and the round trip in ms: from writing the encoded request to reading the
        answer's line (encoding the request and decoding lines are outside the clock)."""
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode() + b"\n"
        started = time.perf_counter()
        self.process.stdin.write(line)
        self.process.stdin.flush()
        while True:
            line = self.process.stdout.readline()
            ended = time.perf_counter()
            if not line:
                raise RuntimeError("the server closed its output")
            message = json.loads(line)
            if message.get("id") == self.next_id and "method" not in message:
                return message, (ended - started) * 1000

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # desktop-commander stays after its input closes
            self.process.terminate()
            self.process.wait()


def measure_raw(name, params, root):
    ops = operations(root)[name]
    client = RawClient(params)
    try:
        if name == "desktop-commander":
            for key, value in DESKTOP_COMMANDER_CONFIG:
                client.request("tools/call", {"name": "set_config_value", "arguments": {"key": key, "value": value}})
        pings = [client.request("ping", {})[1] for _ in range(runs)]
        figures = {"ping (no tool: the floor)": pings}
        for op, spec in ops.items():
            if spec is None:
                figures[op] = None
                continue
            times = []
            for i in range(100 if op == "small write" else runs):
                tool, args = spec(i) if callable(spec) else spec
                answer, ms = client.request("tools/call", {"name": tool, "arguments": args})
                times.append(ms)
                if "error" in answer or answer.get("result", {}).get("isError"):
                    raise RuntimeError(f"{name} / {op} failed: {json.dumps(answer)[:300]}")
            figures[op] = times
        return figures
    finally:
        client.close()


def server_params(name, root, home):
    env_base = {k: os.environ[k] for k in ("PATH",) if k in os.environ}
    env = dict(env_base, HOME=home, FLYCODE_STATE_DIR=os.path.join(home, "state"), XDG_CONFIG_HOME=os.path.join(home, "config"))
    if name == "flycode":
        with open(os.path.join(home, "flycode.toml"), "w") as f:
            f.write("output_cap = 2097152\n")
        return StdioServerParameters(command=flycode, args=["mcp", "--root", root], env=env, cwd=home)
    if name == "server-filesystem":
        return StdioServerParameters(command="node", args=[os.path.join(npm, "@modelcontextprotocol/server-filesystem/dist/index.js"), root], env=env, cwd=home)
    return StdioServerParameters(command="node", args=[os.path.join(npm, "@wonderwhy-er/desktop-commander/dist/index.js")], env=env, cwd=home)


def pooled(rounds):
    """One server's rounds as one: every op's samples together, the highest peak memory."""
    merged = {}
    for figures in rounds:
        for op, figure in figures.items():
            if op == "peak RSS":
                merged[op] = max(merged.get(op, 0), figure)
            elif figure is None:
                merged[op] = None
            elif isinstance(figure, tuple):
                times, error = figure
                known = merged.get(op) or ([], None)
                merged[op] = (known[0] + times, known[1] or error)
            else:
                merged[op] = merged.get(op, []) + figure
    return merged


async def main():
    names = ["flycode", "server-filesystem", "desktop-commander"]
    sdk_rounds = {name: [] for name in names}
    raw_rounds = {name: [] for name in names}
    places = {}
    for name in names:
        root = os.path.join(scratch, "root-" + name)
        corpus(root)
        home = os.path.join(scratch, "home-" + name)
        os.makedirs(home, exist_ok=True)
        places[name] = (root, server_params(name, root, home))
    # Files a model reads have usually been still for a while; flycode's stale-read guard
    # remembers the hash of a file only once it has been unchanged for 3 s (a file written just
    # before is hashed on every read, so its figures would be those of a file being edited while
    # it is read). The other servers are unaffected by the wait.
    time.sleep(4)
    # The servers take turns, round after round, so that a busy spell of a shared machine does
    # not fall on one server's figures alone; each figure is the median of all rounds' calls.
    for _ in range(rounds):
        for name in names:
            root, params = places[name]
            sdk_rounds[name].append(await measure(name, params, root))
            raw_rounds[name].append(measure_raw(name, params, root))
    results = {name: pooled(sdk_rounds[name]) for name in names}
    raw = {name: pooled(raw_rounds[name]) for name in names}
    ops = [op for op in results["flycode"] if op != "peak RSS"]
    print(f"\nmedian ms per call, {rounds} rounds of {runs} calls (100 for small write); client: python mcp SDK, stdio\n")
    print("| operation | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    notes = []
    for op in ops:
        cells = []
        for name in names:
            figure = results[name][op]
            if figure is None:
                cells.append("n/a")
            else:
                times, error = figure
                cells.append(f"{statistics.median(times):.2f}" + (" (error)" if error else ""))
                if error:
                    notes.append(f"{name} / {op}: {error}")
        print(f"| {op} | " + " | ".join(cells) + " |")
    print("| peak RSS (MiB) | " + " | ".join(f"{results[n]['peak RSS'] / 1024:.1f}" for n in names) + " |")
    for note in notes:
        print("note:", note)
    print("\nthe same operations from a raw JSON-RPC client (no SDK: the server's own time plus the pipes), median ms\n")
    print("| operation | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    median = {n: {op: None if raw[n][op] is None else statistics.median(raw[n][op]) for op in ops} for n in names}
    for op in ops:
        print(f"| {op} | " + " | ".join("n/a" if median[n][op] is None else f"{median[n][op]:.3f}" for n in names) + " |")
    floor = "ping (no tool: the floor)"
    print("| trivial call minus ping (the tool's own cost) | " + " | ".join(f"{median[n]['trivial (read 5 B)'] - median[n][floor]:.3f}" for n in names) + " |")


anyio.run(main)
