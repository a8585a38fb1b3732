#!/usr/bin/env bash
# The browser companion's latency (issue 38): from a chat page's reply finishing (its streaming
# mark gone) to flycode's result in the page's message box, for a small call, on each served
# site's markup: Debian's chromium headless with the unpacked extension and a release
# `flycode watch --browser` (tests/browser/run.mjs, which prints one "# SITE: ... ms" line per
# site; the page is polled every 50 ms, so a figure may be up to 50 ms late). Target: under 300 ms.
#
#   bench/browser-latency.sh      (needs chromium, openssl, npm; not part of CI)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
(cd tests/browser && [ -d node_modules/puppeteer-core ] || npm ci --silent --no-audit --no-fund)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%F); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$(chromium --version 2>/dev/null | head -1)"
(cd tests/browser && FLYCODE="$PWD/../../target/release/flycode" WORK="$work" node run.mjs) | grep -E '^# .*reply finished|^FAILED' || true
