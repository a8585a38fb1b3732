#!/usr/bin/env bash
# flycode side by side with the peers (issue 29): `flycode mcp` against
# @modelcontextprotocol/server-filesystem and Desktop Commander (@wonderwhy-er/desktop-commander),
# warm sessions taking turns call by call on one generated corpus, and `flycode exec` against
# coreutils and ripgrep as whole processes. Prints medians and medians of ratios.
#
#   bench/side_by_side.sh        (env: RUNS calls per operation and server, default 30;
#                                 SCRATCH folder for the corpus and the npm packages)
#
# Operations: write 1 MB of many-line code, a small write, an edit (the peers' writes are timed
# together with an fsync of the file and its folder, what flycode's default durability does),
# a flat listing of 10,000 files, a listing to depth 1 (465 folders) and to depth 3 (10,230
# entries), a read of 10 MB, the first 100 matches of a literal, a trivial one-shot call.
#
# The npm servers are installed into SCRATCH/npm without install scripts (they would download a
# browser and a ripgrep binary); ripgrep comes from apt (or cargo install) when it is missing.
# The client is Python's standard library alone (raw JSON-RPC), so no virtual environment is
# needed. Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch="${SCRATCH:-$(mktemp -d)}"
if ! command -v rg >/dev/null; then
  if command -v apt-get >/dev/null; then
    apt-get install -y ripgrep >/dev/null 2>&1 || { apt-get update && apt-get install -y ripgrep; }
  else
    cargo install ripgrep
  fi
fi
cargo build --release --quiet
if [ ! -f "$scratch/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" ] ||
  [ ! -f "$scratch/npm/node_modules/@wonderwhy-er/desktop-commander/dist/index.js" ]; then
  mkdir -p "$scratch/npm"
  (cd "$scratch/npm" && npm init -y >/dev/null &&
    PUPPETEER_SKIP_DOWNLOAD=1 npm install --silent --no-audit --no-fund --ignore-scripts \
      @modelcontextprotocol/server-filesystem @wonderwhy-er/desktop-commander)
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%F)"
# The write rows depend on the file system: an ext4 without a journal does not reuse an inode
# freed in the last minute, so every new file (an atomic write's temporary file) scans past the
# ones just deleted (README, "Issue 41, 2026-11-30").
if command -v findmnt >/dev/null; then
  mkdir -p "$scratch"
  read -r fs_source fs_type < <(findmnt -no SOURCE,FSTYPE -T "$scratch") || true
  fs_journal=/sys/fs/ext4/$(basename "${fs_source:-none}")/journal_task
  fs_note=""
  if [ "${fs_type:-}" = ext4 ] && [ -r "$fs_journal" ] && [ "$(cat "$fs_journal")" = "<none>" ]; then
    fs_note=" without a journal"
  fi
  echo "file system of the corpus: ${fs_type:-unknown}$fs_note ($(findmnt -no OPTIONS -T "$scratch" || true))"
fi
echo "node $(node --version); $(rg --version | sed -n 1p);" \
  "server-filesystem $(node -p "require('$scratch/npm/node_modules/@modelcontextprotocol/server-filesystem/package.json').version")," \
  "Desktop Commander $(node -p "require('$scratch/npm/node_modules/@wonderwhy-er/desktop-commander/package.json').version")"
python3 bench/side_by_side.py "$PWD/target/release/flycode" "$scratch" "${RUNS:-30}"
# Undo recording against the same write unrecorded, paired call by call (benches/undo.rs); the
# filter matches none of criterion's own timings, so only the paired figures are measured.
echo
echo "undo recording (benches/undo.rs, paired with the same write unrecorded):"
cargo bench --quiet --bench undo -- --noplot paired-only 2>/dev/null | grep '^undo/paired' || true
# `cargo bench` links its own flycode (the bench profile, whose symbol names differ from the
# release build's, so `link/startup.order` mostly misses) into target/release/flycode; the
# release build is put back for whoever times target/release/flycode next.
cargo build --release --quiet
