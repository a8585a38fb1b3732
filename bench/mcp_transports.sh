#!/usr/bin/env bash
# flycode mcp over stdio beside flycode mcp --http (streamable HTTP on loopback), driven by the
# same client (the official Python MCP SDK, from target/tmp/mcp-venv as the tests make it) in
# both protocol eras: the per-call cost of a trivial call (a 5-byte fs_read) made one after
# another, and the time 64 such calls in flight at once take. Prints a Markdown table.
#
#   bench/mcp_transports.sh     (env: ROUNDS, default 3; CALLS per round, default 200)
#
# Not part of CI. bench/mcp_compare.sh runs it after its comparison with the other servers.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/tmp/mcp-venv
if ! "$venv/bin/python" -c "import mcp" 2>/dev/null; then
  mkdir -p target/tmp; python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check mcp==2.3.0
fi
cargo build --release --quiet
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$venv/bin/python" bench/mcp_transports.py "$PWD/target/release/flycode" "${ROUNDS:-3}" "${CALLS:-200}"
