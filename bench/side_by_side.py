"""The measuring half of bench/side_by_side.sh (issue 29): flycode mcp against
@modelcontextprotocol/server-filesystem and Desktop Commander, and against ripgrep and coreutils,
on one generated corpus, the servers taking turns call by call.

    python side_by_side.py FLYCODE SCRATCH RUNS

Every server is started once and kept warm; each operation is then called RUNS times on every
server in turn (flycode, server-filesystem, Desktop Commander, flycode, ...), so that a busy spell
of a shared machine falls on all of them alike. A figure is the median of the calls; a ratio is
the median of the per-turn ratios (flycode's call ÷ the peer's call in the same turn). Calls go
over raw JSON-RPC on the servers' pipes (no SDK), so what is timed is the server's own work plus
the pipes. One-shot figures (ripgrep, coreutils, `flycode exec`) time whole processes.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time

flycode, scratch, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
npm = os.path.join(scratch, "npm", "node_modules")
corpus_root = os.path.join(scratch, "corpus")
LITERAL = "needle_marker"


def code_lines(count, seed):
    """Rust-like source, `count` lines of varied length."""
    out = []
    for i in range(count):
        n = (i * 7 + seed) % 13
        if n == 0:
            out.append(f"fn handler_{seed}_{i}(ctx: &Context, input: &[u8]) -> Result<Output, Error> {{\n")
        elif n == 1:
            out.append("}\n")
        elif n == 2:
            out.append("\n")
        else:
            out.append(f"    let value_{i} = compute(&ctx.options, input.get({n}..), beta_{i % 97})?; // step {i}\n")
    return "".join(out)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def corpus():
    """flat/: 10,000 small files; tree/: 465 folders, each with 10 files and a folder of 10 more
    (10,230 entries to depth 3), every third file holding LITERAL once; big.txt: 10 MB of code."""
    done = os.path.join(corpus_root, ".complete")
    if os.path.exists(done):
        return
    shutil.rmtree(corpus_root, ignore_errors=True)
    for i in range(10_000):
        write(os.path.join(corpus_root, "flat", f"file{i:05d}.txt"), f"file {i}\n")
    body = code_lines(40, 1)
    for d in range(465):
        for f in range(20):
            sub = "src/" if f >= 10 else ""
            text = body + (f"    // {LITERAL} {d} {f}\n" if (d * 20 + f) % 3 == 0 else "")
            write(os.path.join(corpus_root, "tree", f"d{d:03d}", f"{sub}m{f:02d}.rs"), text)
    big = code_lines(4000, 3)
    with open(os.path.join(corpus_root, "big.txt"), "w") as f:
        while f.tell() < 10 * 1024 * 1024:
            f.write(big)
    write(os.path.join(corpus_root, "tiny.txt"), "tiny\n")
    write(done, "")


ONE_MB_CODE = code_lines(20_000, 5)[: 1024 * 1024]
EDIT_A, EDIT_B = "let alpha = 1;", "let alpha = 2;"


def operations(name, work):
    """Per server, each operation's call: (tool, arguments) or a function of the turn; None where
    the server has no such tool."""
    p = lambda *parts: os.path.join(corpus_root, *parts)  # noqa: E731
    w = lambda *parts: os.path.join(work, *parts)  # noqa: E731
    edit_text = lambda i: (EDIT_A, EDIT_B) if i % 2 == 0 else (EDIT_B, EDIT_A)  # noqa: E731
    if name == "flycode":
        return {
            "write 1 MB of code": lambda i: ("fs_write", {"path": w(f"big{i % 2}.rs"), "mode": "overwrite", "content": ONE_MB_CODE}),
            "small write": lambda i: ("fs_write", {"path": w("small.txt"), "mode": "overwrite", "content": f"small {i}\n" * 10}),
            "edit": lambda i: ("fs_edit", {"path": w("edit.rs"), "edits": [{"oldText": edit_text(i)[0], "newText": edit_text(i)[1]}]}),
            # Without sizes against the peers' plain listings, then with them (flycode's default)
            # against server-filesystem's listing with sizes: the same output.
            "list flat 10k": ("fs_ls", {"path": p("flat"), "sizes": False}),
            "list flat 10k with sizes": ("fs_ls", {"path": p("flat")}),
            "list depth 1": ("fs_ls", {"path": p("tree"), "sizes": False}),
            "list depth 3": ("fs_ls", {"path": p("tree"), "depth": 3}),
            "read 10 MB": ("fs_read", {"path": p("big.txt")}),
            "first 100 matches": ("fs_search", {"path": p("tree"), "query": LITERAL, "limit": 100}),
        }
    if name == "server-filesystem":
        return {
            "write 1 MB of code": lambda i: ("write_file", {"path": w(f"big{i % 2}.rs"), "content": ONE_MB_CODE}),
            "small write": lambda i: ("write_file", {"path": w("small.txt"), "content": f"small {i}\n" * 10}),
            "edit": lambda i: ("edit_file", {"path": w("edit.rs"), "edits": [{"oldText": edit_text(i)[0], "newText": edit_text(i)[1]}]}),
            "list flat 10k": ("list_directory", {"path": p("flat")}),
            "list flat 10k with sizes": ("list_directory_with_sizes", {"path": p("flat")}),
            "list depth 1": ("list_directory", {"path": p("tree")}),
            "list depth 3": ("directory_tree", {"path": p("tree")}),
            "read 10 MB": ("read_text_file", {"path": p("big.txt")}),
            "first 100 matches": None,  # search_files matches names, not content
        }
    return {
        "write 1 MB of code": lambda i: ("write_file", {"path": w(f"big{i % 2}.rs"), "content": ONE_MB_CODE, "mode": "rewrite"}),
        "small write": lambda i: ("write_file", {"path": w("small.txt"), "content": f"small {i}\n" * 10, "mode": "rewrite"}),
        "edit": lambda i: ("edit_block", {"file_path": w("edit.rs"), "old_string": edit_text(i)[0], "new_string": edit_text(i)[1]}),
        "list flat 10k": ("list_directory", {"path": p("flat"), "depth": 1}),
        "list flat 10k with sizes": None,  # its listing shows no sizes
        "list depth 1": ("list_directory", {"path": p("tree"), "depth": 1}),
        "list depth 3": ("list_directory", {"path": p("tree"), "depth": 3}),
        "read 10 MB": ("read_file", {"path": p("big.txt"), "offset": 0, "length": 10_000_000}),
        "first 100 matches": None,  # its search runs a ripgrep binary its install script fetches
    }


# The writes the peers make without syncing: timed together with an fsync of the file and of its
# folder, what flycode's default durability does (PROTOCOL.md §9, "What is synced").
SYNCED = {"write 1 MB of code", "small write", "edit"}

# Desktop Commander refuses writes over 50 lines and caps reads at 1000 lines by default; its
# usage reporting is turned off so that it does not wait on the network.
DESKTOP_COMMANDER_CONFIG = [("fileWriteLineLimit", 10_000_000), ("fileReadLineLimit", 10_000_000), ("telemetryEnabled", False)]


def fsync_file_and_folder(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Server:
    """One MCP server on raw JSON-RPC: one line out, lines read until the answer."""

    def __init__(self, name, command, env, cwd):
        self.name = name
        self.process = subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
        self.process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.process.stdin.flush()

    def request(self, method, params):
        """The answer and the round trip in ms (encoding the request and decoding the answer
        are outside the clock)."""
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode() + b"\n"
        started = time.perf_counter()
        self.process.stdin.write(line)
        self.process.stdin.flush()
        while True:
            raw = self.process.stdout.readline()
            ended = time.perf_counter()
            if not raw:
                raise RuntimeError(f"{self.name} closed its output")
            message = json.loads(raw)
            if message.get("id") == self.next_id and "method" not in message:
                return message, (ended - started) * 1000

    def call(self, tool, args):
        answer, ms = self.request("tools/call", {"name": tool, "arguments": args})
        if "error" in answer or answer.get("result", {}).get("isError"):
            raise RuntimeError(f"{self.name} {tool} failed: {json.dumps(answer)[:300]}")
        return answer, ms

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # Desktop Commander stays after its input closes
            self.process.terminate()
            self.process.wait()


def start(name, home, work):
    os.makedirs(home, exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": home, "FLYCODE_STATE_DIR": os.path.join(home, "state"), "XDG_CONFIG_HOME": os.path.join(home, "config")}
    if name == "flycode":
        # output_cap at its largest, so that the 10 MB read returns the whole file as the peers do.
        write(os.path.join(home, "config", "flycode", "flycode.toml"), "output_cap = 16777216\n")
        command = [flycode, "mcp", "--root", corpus_root, "--root", work]
    elif name == "server-filesystem":
        command = ["node", os.path.join(npm, "@modelcontextprotocol/server-filesystem/dist/index.js"), corpus_root, work]
    else:
        command = ["node", os.path.join(npm, "@wonderwhy-er/desktop-commander/dist/index.js")]
    server = Server(name, command, env, home)
    if name == "desktop-commander":
        for key, value in DESKTOP_COMMANDER_CONFIG:
            server.call("set_config_value", {"key": key, "value": value})
    return server


def process_ms(command, stdout=subprocess.DEVNULL, env=None):
    started = time.perf_counter()
    subprocess.run(command, stdout=stdout, stderr=subprocess.DEVNULL, env=env, check=False)
    return (time.perf_counter() - started) * 1000


def first_lines_ms(command, count):
    """A process whose output is read until `count` lines, then closed: what `| head -n COUNT`
    does (the process stops on the broken pipe)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    for _ in range(count):
        if not process.stdout.readline():
            break
    process.stdout.close()
    process.wait()
    return (time.perf_counter() - started) * 1000


def exec_env(home):
    write(os.path.join(home, "config", "flycode", "flycode.toml"), "output_cap = 16777216\n")
    return {"PATH": os.environ["PATH"], "HOME": home, "FLYCODE_STATE_DIR": os.path.join(home, "state"), "XDG_CONFIG_HOME": os.path.join(home, "config")}


def one_shots(home):
    """Whole processes, taking turns: flycode exec against coreutils and ripgrep."""
    env = exec_env(home)
    p = lambda *parts: os.path.join(corpus_root, *parts)  # noqa: E731
    fly = lambda slash: [flycode, "exec", "--root", corpus_root, "--slash", slash]  # noqa: E731
    pairs = {
        "read 10 MB: exec ÷ cat": (fly(f"/fs.read {p('big.txt')}"), ["cat", p("big.txt")]),
        "list flat 10k: exec ÷ ls -l": (fly(f"/fs.ls {p('flat')}"), ["ls", "-l", p("flat")]),
        "list flat 10k, sizes=false: exec ÷ ls": (fly(f"/fs.ls {p('flat')} --sizes=false"), ["ls", p("flat")]),
        "list depth 3: exec ÷ find": (fly(f"/fs.ls {p('tree')} --depth 3"), ["find", p("tree"), "-maxdepth", "3"]),
        "trivial call: exec ÷ cat of the same file": (fly(f"/fs.read {p('tiny.txt')}"), ["cat", p("tiny.txt")]),
        "trivial call: exec ÷ true": (fly(f"/fs.read {p('tiny.txt')}"), ["true"]),
    }
    figures = {name: ([], [], []) for name in pairs}
    # The two of a pair take turns going first (flycode on even rounds, the peer on odd ones):
    # a process started right after a heavy one (a listing of 10,000 files) runs up to a
    # millisecond slower, and a fixed order would always hand that to the same side.
    for round_number in range(runs):
        for name, (a, b) in pairs.items():
            if round_number % 2 == 0:
                fa, fb = process_ms(a, env=env), process_ms(b)
            else:
                fb, fa = process_ms(b), process_ms(a, env=env)
            figures[name][0].append(fa)
            figures[name][1].append(fb)
            figures[name][2].append(fa / fb)
    # The first 100 matches of a literal: flycode's limit against ripgrep read to its 100th line
    # (ripgrep has no overall limit; -m/--max-count counts per file). `--sort path` is the order
    # flycode reports in (it makes ripgrep search one file at a time); plain rg is parallel and
    # unordered, so its first 100 are whichever its threads found first.
    search = fly(f"/fs.search {p('tree')} {LITERAL} --limit 100")
    rg_sorted = ["rg", "-n", "--sort", "path", "-F", LITERAL, p("tree")]
    rg_parallel = ["rg", "-n", "-F", LITERAL, p("tree")]
    figures["first 100 matches: exec ÷ rg --sort path, read to its 100th line"] = ([], [], [])
    figures["first 100 matches: exec ÷ rg (parallel), read to its 100th line"] = ([], [], [])
    for _ in range(runs):
        fa = process_ms(search, env=env)
        fs, fp = first_lines_ms(rg_sorted, 100), first_lines_ms(rg_parallel, 100)
        for key, fb in (("first 100 matches: exec ÷ rg --sort path, read to its 100th line", fs), ("first 100 matches: exec ÷ rg (parallel), read to its 100th line", fp)):
            figures[key][0].append(fa)
            figures[key][1].append(fb)
            figures[key][2].append(fa / fb)
    return figures


def idle_watch_cpu(home, seconds=10):
    """The share of one core an idle `flycode watch --inbox` uses: its CPU time (and its
    children's) over `seconds` of nothing arriving, after 2 s to settle."""
    env = exec_env(home)
    inbox = os.path.join(home, "inbox")
    os.makedirs(inbox, exist_ok=True)
    process = subprocess.Popen([flycode, "watch", "--inbox", inbox, "--root", corpus_root], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ticks():
        with open(f"/proc/{process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15])  # utime stime cutime cstime

    try:
        time.sleep(2)
        before = ticks()
        time.sleep(seconds)
        used = ticks() - before
    finally:
        process.terminate()
        process.wait()
    return 100.0 * used / (seconds * os.sysconf("SC_CLK_TCK"))


def warm(servers, work_of):
    """Every operation on every server, the servers taking turns call by call."""
    names = list(servers)
    ops = {name: operations(name, work_of[name]) for name in names}
    results = {}
    for op in ops["flycode"]:
        for name in names:
            w = work_of[name]
            write(os.path.join(w, "edit.rs"), code_lines(200, 9) + f"    {EDIT_A}\n")
        times = {name: [] for name in names}
        for i in range(runs + 1):  # the first turn warms up, uncounted
            for name in names:
                spec = ops[name][op]
                if spec is None:
                    continue
                tool, args = spec(i) if callable(spec) else spec
                _, ms = servers[name].call(tool, args)
                if op in SYNCED and name != "flycode":
                    started = time.perf_counter()
                    fsync_file_and_folder(args.get("path") or args.get("file_path"))
                    ms += (time.perf_counter() - started) * 1000
                if i:
                    times[name].append(ms)
        results[op] = times
    return results


def ratio_row(a, b):
    ratios = [x / y for x, y in zip(a, b)]
    return statistics.median(ratios)


def load():
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    print(f"before: {load()}")
    corpus()
    names = ["flycode", "server-filesystem", "desktop-commander"]
    work_of, servers = {}, {}
    for name in names:
        home = os.path.join(scratch, "home-" + name)
        work_of[name] = os.path.join(scratch, "work-" + name)
        os.makedirs(work_of[name], exist_ok=True)
        servers[name] = start(name, home, work_of[name])
    try:
        # A file read back must have been still for 3 s before flycode's stale-read guard keeps
        # its hash instead of hashing it on every read: a model reads files that rest.
        time.sleep(4)
        results = warm(servers, work_of)
    finally:
        for server in servers.values():
            server.close()
    shots = one_shots(os.path.join(scratch, "home-exec"))
    idle = idle_watch_cpu(os.path.join(scratch, "home-idle"))
    print(f"\nwarm MCP sessions, raw JSON-RPC, {runs} calls per operation and server, taking turns")
    print("(the peers' writes include an fsync of the file and of its folder, as flycode's default does)\n")
    print("| operation | flycode ms | server-filesystem ms | Desktop Commander ms | flycode ÷ server-filesystem | flycode ÷ Desktop Commander |")
    print("| --- | --- | --- | --- | --- | --- |")
    for op, times in results.items():
        fly = times["flycode"]
        cells = [f"{statistics.median(fly):.2f}"]
        for name in names[1:]:
            cells.append(f"{statistics.median(times[name]):.2f}" if times[name] else "n/a")
        for name in names[1:]:
            cells.append(f"{ratio_row(fly, times[name]):.2f}" if times[name] else "n/a")
        print(f"| {op} | " + " | ".join(cells) + " |")
    rg = statistics.median(shots["first 100 matches: exec ÷ rg --sort path, read to its 100th line"][1])
    warm_search = statistics.median(results["first 100 matches"]["flycode"])
    print(f"\nfirst 100 matches, warm flycode mcp {warm_search:.2f} ms ÷ rg --sort path (a process) {rg:.2f} ms = {warm_search / rg:.2f}")
    print(f"\nwhole processes, {runs} runs each, taking turns\n")
    print("| comparison | flycode ms | other ms | ratio (median of ratios) |")
    print("| --- | --- | --- | --- |")
    for name, (a, b, ratios) in shots.items():
        print(f"| {name} | {statistics.median(a):.2f} | {statistics.median(b):.2f} | {statistics.median(ratios):.2f} |")
    print(f"\nidle `flycode watch --inbox`: {idle:.2f}% of one core over 10 s (target: under 1%)")
    print(f"after: {load()}")


main()
