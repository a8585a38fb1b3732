#!/usr/bin/env bash
# flycode mcp against the two MCP servers people use for files today, driven by the same client
# (the official Python MCP SDK, from target/tmp/mcp-venv as the tests make it) on the same operations:
# list depth 1 and 3, read 1 MB, the first 200 lines of a 20 MB file, a content search, write
# 1 MB, 100 small writes, a trivial call (read a 5-byte file). Prints the median latency of each
# operation per server (ms, client round trip) and each server's peak resident memory; then the
# same operations from a raw JSON-RPC client (no SDK), which shows the server's own time: with the
# SDK, a 1 MB answer costs the client more than any of the servers spend on it.
#
#   bench/mcp_compare.sh     (env: RUNS calls per operation and round, default 30; ROUNDS, default
#                             3: the servers take turns round after round; SCRATCH folder)
#
# The npm servers (@modelcontextprotocol/server-filesystem, @wonderwhy-er/desktop-commander) are
# installed into a scratch folder, without install scripts (they would download a browser and a
# ripgrep binary). flycode runs with output_cap = 2 MiB so that it, too, returns the whole 1 MB.
# Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch="${SCRATCH:-$(mktemp -d)}"
venv=target/tmp/mcp-venv
if ! "$venv/bin/python" -c "import mcp" 2>/dev/null; then
  mkdir -p target/tmp; python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check mcp==2.3.0
fi
cargo build --release --quiet
if [ ! -x "$scratch/npm/node_modules/.bin/mcp-server-filesystem" ]; then
  mkdir -p "$scratch/npm"
  (cd "$scratch/npm" && npm init -y >/dev/null &&
    PUPPETEER_SKIP_DOWNLOAD=1 npm install --silent --no-audit --no-fund --ignore-scripts \
      @modelcontextprotocol/server-filesystem@2026.8.31 @wonderwhy-er/desktop-commander@0.2.52)
fi
"$venv/bin/python" bench/mcp_compare.py "$PWD/target/release/flycode" "$scratch" "${RUNS:-30}" "${ROUNDS:-3}"
bench/mcp_transports.sh
