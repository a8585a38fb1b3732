"""An independent MCP client for flycode's end-to-end tests: the official Python SDK (`mcp`).

    python client.py SCENARIO MODE FLYCODE ROOT [EXTRA-ARGS...]
    python client.py SCENARIO MODE http://127.0.0.1:PORT/mcp ROOT

starts `FLYCODE mcp --root ROOT EXTRA-ARGS...` over stdio, or connects to a running
`flycode mcp --http` at the URL (streamable HTTP, with the secret FLYCODE_MCP_SECRET holds as its
bearer token), plays SCENARIO and prints what it saw as one JSON object on standard output; the
Rust tests (tests/suite/mcp.rs, tests/suite/mcp_http.rs) judge it. MODE is
`legacy` (the initialize handshake: the server asks with elicitation/create and roots/list
requests) or `auto` (2026-07-28 when the server offers it: it asks through input_required
results). The server inherits FLYCODE_STATE_DIR and XDG_CONFIG_HOME, so the tests choose where
its audit log goes and that no user configuration is read.
"""

import json
import os
import sys

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def server(flycode, root, extra):
    env = {
        key: os.environ[key]
        for key in ("FLYCODE_STATE_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "HOME", "PATH")
        if key in os.environ
    }
    return StdioServerParameters(
        command=flycode, args=["mcp", "--root", root, *extra], env=env, cwd=root
    )


def transport(target, root, extra):
    """The stdio server to start, or the HTTP server to connect to with the secret."""
    if target.startswith("http://"):
        secret = os.environ.get("FLYCODE_MCP_SECRET")
        headers = {"Authorization": f"Bearer {secret}"} if secret else None
        return streamable_http_client(target, http_client=create_mcp_http_client(headers=headers))
    return server(target, root, extra)


def outcome(result):
    """A tool result as plain data."""
    text = "\n".join(block.text for block in result.content if getattr(block, "text", None) is not None)
    return {
        "isError": bool(result.is_error),
        "text": text,
        "structured": result.structured_content,
    }


async def call(client, name, arguments, **options):
    return outcome(await client.call_tool(name, arguments, **options))


def running(pid):
    """Whether process `pid` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def pid_from(path):
    """The pid a program wrote to `path`, waited for."""
    with anyio.fail_after(60):
        while not (os.path.exists(path) and open(path).read().strip()):
            await anyio.sleep(0.05)
    return int(open(path).read().strip())


async def gone(pid, seconds=20):
    """Whether `pid` stops running within `seconds`."""
    with anyio.move_on_after(seconds):
        while running(pid):
            await anyio.sleep(0.02)
    return not running(pid)


MODERN = "2026-07-28"


def post_and_drop(url, headers, body, wait_for_message):
    """POSTs `body` on a socket of its own, reads its event stream up to the first event id
    (or the first message, if `wait_for_message`), and closes the socket: a certain drop,
    where an HTTP library may read the rest before it lets go. The last id and the messages."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    payload = json.dumps(body).encode()
    lines = [f"POST {parts.path} HTTP/1.1", f"Host: {parts.netloc}", f"Content-Length: {len(payload)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    sock = socket.create_connection((parts.hostname, parts.port), timeout=60)
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
    received, last_id, messages = b"", None, []
    try:
        # 2026-07-28's stateless streams carry no event ids: the first message is enough.
        while not (messages if wait_for_message else last_id):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
            # Whole lines only: the last may still be arriving.
            for line in received.decode(errors="replace").split("\n")[:-1]:
                line = line.strip()
                if line.startswith("data:") and line[5:].strip().startswith("{"):
                    message = json.loads(line[5:])
                    if message not in messages:
                        messages.append(message)
                if line.startswith("id:") and (messages or not wait_for_message):
                    last_id = line[3:].strip()
    finally:
        sock.close()
    return last_id, messages


async def resume(url, mode, root):
    """A call's stream dropped after its first event, and picked up again with Last-Event-ID
    (before 2026-07-28; from then on the drop cancels the call): raw HTTP, as the SDK's own
    reconnection does it, so the drop is certain."""
    import httpx2

    secret = os.environ["FLYCODE_MCP_SECRET"]
    headers = {
        "Authorization": f"Bearer {secret}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    # Long enough, from 2026-07-28 on, for the server to notice the closed stream while the
    # program still runs (it notices when it next writes to it: the next progress).
    seconds = 3 if mode == "legacy" else 60
    arguments = {"command": "sh", "args": ["-c", f"sleep {seconds}; echo resumed-ok"]}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "process_run", "arguments": arguments}}
    async with httpx2.AsyncClient(timeout=60) as http:
        if mode == "legacy":
            version = "2025-06-18"
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": version, "capabilities": {},
                               "clientInfo": {"name": "resumer", "version": "1"}}}
            answer = await http.post(url, headers=headers, json=init)
            headers["Mcp-Session-Id"] = answer.headers["mcp-session-id"]
            headers["MCP-Protocol-Version"] = version
            await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        else:
            headers["MCP-Protocol-Version"] = MODERN
            headers["Mcp-Method"] = "tools/call"
            headers["Mcp-Name"] = "process_run"
            # 2026-07-28's stream opens with the call's first message: its progress.
            call["params"]["_meta"] = {
                "progressToken": "resume",
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientInfo": {"name": "resumer", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        last_id, first_events = post_and_drop(url, headers, call, wait_for_message=mode != "legacy")
        # The connection is closed here, mid-stream, the call still running. From 2026-07-28 on
        # that close is the call's cancellation: nothing is resumed.
        if mode != "legacy":
            return {"lastEventId": last_id, "firstEvents": first_events}
        resumed = []
        get_headers = {k: v for k, v in headers.items() if k not in ("Content-Type", "Mcp-Method", "Mcp-Name")}
        get_headers["Accept"] = "text/event-stream"
        get_headers["Last-Event-ID"] = last_id
        async with http.stream("GET", url, headers=get_headers) as response:
            status = response.status_code
            async for line in response.aiter_lines():
                if line.startswith("data:") and line[5:].strip():
                    message = json.loads(line[5:])
                    resumed.append(message)
                    if message.get("id") == 7:
                        break
        return {"lastEventId": last_id, "status": status, "firstEvents": first_events, "resumed": resumed}


async def every_tool(client, root):
    """Lists the tools and calls each at least once, plus an outside path and a bad argument."""
    listed = await client.list_tools()
    tools = [
        {
            "name": tool.name,
            "title": tool.title,
            "description": tool.description,
            "inputSchema": tool.input_schema,
            "annotations": tool.annotations.model_dump(by_alias=True, exclude_none=True)
            if tool.annotations
            else None,
        }
        for tool in listed.tools
    ]
    p = lambda name: os.path.join(root, name)  # noqa: E731
    calls = [
        ("fs_write", {"path": p("a.txt"), "mode": "overwrite", "content": "one\ntwo\nthree\n"}),
        ("fs_read", {"path": p("a.txt"), "head": 7}),
        ("fs_ls", {"path": root, "depth": 2}),
        ("fs_mkdir", {"path": p("sub/deeper"), "parents": True}),
        ("fs_search", {"path": root, "query": "two"}),
        ("fs_write_batch", {"files": [{"path": p("b.txt"), "content": "bee\n"}, {"path": p("sub/c.txt"), "content": "sea\n"}]}),
        ("fs_diff", {"leftPath": p("a.txt"), "rightContent": "one\nTWO\nthree\n"}),
        ("fs_edit", {"path": p("a.txt"), "edits": [{"oldText": "two", "newText": "deux"}]}),
        ("fs_read_many", {"paths": [p("a.txt"), p("b.txt")]}),
        ("fs_mv", {"fromPath": p("b.txt"), "toPath": p("b2.txt")}),
        ("fs_chmod", {"path": p("b2.txt"), "mode": "600"}),
        ("fs_rm", {"path": p("b2.txt")}),
        ("process_run", {"command": "echo", "args": ["hello", "from", "mcp"]}),
        ("shell_exec", {"command": "echo $((6 * 7))"}),
        ("memory_query", {"query": "two"}),
        ("hint_load", {"name": "mcp-hint"}),
        ("hint_resource", {"path": "HINT.md"}),
        ("hint_unload", {"name": "mcp-hint"}),
        ("shell_exec", {"command": "cat", "background": True}),
        ("job_list", {}),
        ("job_input", {"jobId": "job-1", "input": "ping\n", "waitMs": 5000}),
        ("job_log", {"jobId": "job-1"}),
        ("job_kill", {"jobId": "job-1"}),
    ]
    results = []
    for name, arguments in calls:
        results.append({"tool": name, **(await call(client, name, arguments))})
    outside = await call(client, "fs_read", {"path": "/etc/hostname"})
    bad = await call(client, "fs_read", {"path": p("a.txt"), "head": "seven"})
    unknown = await call(client, "fs_nope", {})
    return {"tools": tools, "calls": results, "outside": outside, "bad": bad, "unknown": unknown}


async def main():
    scenario, mode, flycode, root, *extra = sys.argv[1:]
    report = {"scenario": scenario, "mode": mode}
    questions = []

    async def elicit(context, params):
        questions.append(params.message)
        # The decision marker is looked for before the diff: a diff can quote an earlier call's content.
        asked = params.message.split("\n\nIt would change:\n")[0]
        action = "accept" if "please-accept" in asked else "decline"
        return types.ElicitResult(action=action, content={} if action == "accept" else None)

    elsewhere = os.path.join(os.path.dirname(root), "elsewhere")

    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri="file://" + os.path.join(root, "inner"))])

    async def disjoint_roots(context):
        return types.ListRootsResult(roots=[types.Root(uri="file://" + elsewhere)])

    options = {"mode": mode}
    if scenario in ("elicit", "elicit-write"):
        options["elicitation_callback"] = elicit
    if scenario == "roots":
        options["list_roots_callback"] = roots
    if scenario == "roots-disjoint":
        os.makedirs(elsewhere, exist_ok=True)
        options["list_roots_callback"] = disjoint_roots
    if scenario == "elicit-write":
        # Writes run at once under `ask`; this policy asks before them, so the form shows one.
        with open(os.path.join(root, "flycode.toml"), "w") as f:
            f.write('[tools]\n"fs.write" = "ask"\n')
        with open(os.path.join(root, "doc.txt"), "w") as f:
            f.write("one\ntwo\nthree\n")

    if scenario == "resume":
        report.update(await resume(flycode, mode, root))
        print(json.dumps(report))
        return

    job_pid = None
    async with Client(transport(flycode, root, extra), **options) as client:
        report["protocolVersion"] = client.protocol_version
        if scenario == "read-only":
            with open(os.path.join(root, "kept.txt"), "w") as f:
                f.write("kept\n")
            report["read"] = await call(client, "fs_read", {"path": os.path.join(root, "kept.txt")})
            report["write"] = await call(client, "fs_write", {"path": os.path.join(root, "kept.txt"), "mode": "overwrite", "content": "changed\n"})
            report["run"] = await call(client, "process_run", {"command": "touch", "args": [os.path.join(root, "ran")]})
            report["ran"] = os.path.exists(os.path.join(root, "ran"))
            with open(os.path.join(root, "kept.txt")) as f:
                report["content"] = f.read()
        elif scenario == "parallel":
            results = {}

            async def one_session(name):
                async with Client(transport(flycode, root, extra), mode=mode) as other:
                    path = os.path.join(root, f"{name}.txt")
                    results[name] = {
                        "write": await call(other, "fs_write", {"path": path, "mode": "overwrite", "content": f"{name}\n"}),
                        "run": await call(other, "process_run", {"command": "sh", "args": ["-c", f"sleep 1; cat {path}"]}),
                    }

            async with anyio.create_task_group() as group:
                for name in ("left", "right"):
                    group.start_soon(one_session, name)
            report["sessions"] = results
            pid_file = os.path.join(root, "job.pid")
            report["started"] = await call(client, "shell_exec", {"command": f"sleep 300 & echo $! > {pid_file}; wait", "background": True})
            job_pid = await pid_from(pid_file)
            async with Client(transport(flycode, root, extra), mode=mode) as other:
                report["othersJobs"] = await call(other, "job_list", {})
            report["ownJobs"] = await call(client, "job_list", {})
        elif scenario == "tools":
            report.update(await every_tool(client, root))
        elif scenario == "elicit" or scenario == "no-elicitation":
            report["accepted"] = await call(client, "process_run", {"command": "echo", "args": ["please-accept"]})
            report["declined"] = await call(client, "process_run", {"command": "echo", "args": ["please-decline"]})
            report["questions"] = questions
        elif scenario == "elicit-write":
            path = os.path.join(root, "doc.txt")
            report["accepted"] = await call(client, "fs_write", {"path": path, "mode": "overwrite", "content": "one\n2\nthree\nfour please-accept\n"})
            report["declined"] = await call(client, "fs_write", {"path": path, "mode": "overwrite", "content": "gone please-decline\n"})
            report["questions"] = questions
            with open(path) as f:
                report["content"] = f.read()
        elif scenario == "roots-disjoint":
            with open(os.path.join(root, "in.txt"), "w") as f:
                f.write("inside flycode's root\n")
            report["read"] = await call(client, "fs_read", {"path": os.path.join(root, "in.txt")})
            report["list"] = await call(client, "fs_ls", {"path": root})
        elif scenario == "roots":
            os.makedirs(os.path.join(root, "inner"), exist_ok=True)
            with open(os.path.join(root, "inner", "in.txt"), "w") as f:
                f.write("inside\n")
            with open(os.path.join(root, "out.txt"), "w") as f:
                f.write("outside\n")
            report["inside"] = await call(client, "fs_read", {"path": os.path.join(root, "inner", "in.txt")})
            report["outside"] = await call(client, "fs_read", {"path": os.path.join(root, "out.txt")})
        elif scenario == "cancel":
            pid_file = os.path.join(root, "child.pid")
            progress = []

            async def on_progress(done, total, message):
                progress.append(message)

            async def long_run():
                await client.call_tool(
                    "process_run",
                    {"command": "sh", "args": ["-c", f"sleep 300 & echo $! > {pid_file}; wait"]},
                    progress_callback=on_progress,
                )

            async with anyio.create_task_group() as group:
                group.start_soon(long_run)
                child = await pid_from(pid_file)
                # Long enough for a progress notification or two.
                await anyio.sleep(2.5)
                group.cancel_scope.cancel()
            report["childPid"] = child
            report["progress"] = progress
            # Killed by the cancellation itself, while the session goes on: closing the session
            # would cancel every call anyway, so that must not be what is seen here.
            report["goneWhileConnected"] = await gone(child)
            # The server is still serving after the cancellation.
            report["after"] = await call(client, "fs_ls", {"path": root})
        else:
            raise SystemExit(f"unknown scenario {scenario}")
    if job_pid is not None:
        # The client has closed its session (an HTTP DELETE); its job ends with it, where
        # there was a session.
        report["jobPid"] = job_pid
        report["jobGoneAfterSession"] = await gone(job_pid)
    print(json.dumps(report))


anyio.run(main)
