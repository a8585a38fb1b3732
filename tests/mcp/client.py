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

    async with Client(transport(flycode, root, extra), **options) as client:
        report["protocolVersion"] = client.protocol_version
        if scenario == "tools":
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
                with anyio.fail_after(60):
                    while not (os.path.exists(pid_file) and open(pid_file).read().strip()):
                        await anyio.sleep(0.05)
                    # Long enough for a progress notification or two.
                    await anyio.sleep(2.5)
                group.cancel_scope.cancel()
            child = int(open(pid_file).read().strip())
            report["childPid"] = child
            report["progress"] = progress

            def running(pid):
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        return f.read().rsplit(")", 1)[1].split()[0] != "Z"
                except OSError:
                    return False

            # Killed by the cancellation itself, while the session goes on: closing the session
            # would cancel every call anyway, so that must not be what is seen here.
            with anyio.move_on_after(20):
                while running(child):
                    await anyio.sleep(0.02)
            report["goneWhileConnected"] = not running(child)
            # The server is still serving after the cancellation.
            report["after"] = await call(client, "fs_ls", {"path": root})
        else:
            raise SystemExit(f"unknown scenario {scenario}")
    print(json.dumps(report))


anyio.run(main)
