#!/usr/bin/env bash
# Peak resident memory and wall time of `flycode check` on pathological replies of about 15 MB
# (under the default 16 MiB max_reply_bytes): `[[[[…`, `*a*a…`, `[a](…`, `> > >…`, `>>>>…`,
# `- - - …`, a deep quote continued by lazy lines, 7.5 million one-letter lines, and for
# comparison a prose reply and a 15 MB fs.write call; each but the last ends with a call block. Reports each as a multiple of the reply's
# size (PROTOCOL.md §1: parsing stays within 8x). Usage:
#   bench/parse-memory.sh [MEGABYTES]          (default 15)
# FLYCODE_BIN=path measures that binary instead of building target/release/flycode.
# Needs GNU time (/usr/bin/time, Debian package `time`).
set -euo pipefail
cd "$(dirname "$0")/.."
megabytes="${1:-15}"
if [ -z "${FLYCODE_BIN:-}" ]; then
    cargo build --release --quiet --bin flycode
    FLYCODE_BIN=target/release/flycode
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 - "$work" "$megabytes" <<'PY'
import json, sys
work, size = sys.argv[1], int(sys.argv[2]) * 1000 * 1000
call = '```flycode-call\n{"id":"c1","tool":"fs.read","args":{"path":"/tmp/a"}}\n```\n'
shapes = {
    "brackets": "[" * size,
    "emphasis": "*a" * (size // 2),
    "links": "[a](" * (size // 4),
    "quotes": "> " * (size // 2),
    "quotes-tight": ">" * size,
    "lists": "- " * (size // 2),
    "nest-lazy": "> " * (size // 4) + "\n" + "b\n" * (size // 4),
    "lines": "a\n" * (size // 2),
    "prose": ("The function computes a value from its input and returns it. " * 16 + "\n\n") * (size // 1010),
    "fs.write": "```flycode-call\n" + json.dumps({"id": "c1", "tool": "fs.write", "args": {"path": "/tmp/a", "mode": "overwrite", "content": "let value = compute(input)?;\n" * (size // 30)}}) + "\n```\n",
}
for name, text in shapes.items():
    with open(f"{work}/{name}.md", "w") as out:
        out.write(text if name == "fs.write" else text + "\n\n" + call)
PY
printf '%-10s %10s %9s %12s %8s  %s\n' shape bytes seconds "peak RSS" "x size" verdict
for reply in "$work"/*.md; do
    name="$(basename "$reply" .md)"
    bytes="$(stat -c %s "$reply")"
    /usr/bin/time -f '%e %M' -o "$work/time" "$FLYCODE_BIN" check --json "$reply" > "$work/out" 2> /dev/null || true
    read -r seconds kib < <(tail -n 1 "$work/time")
    code="$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["verdict"], (r.get("error") or {}).get("code") or "")' "$work/out")"
    python3 - "$name" "$bytes" "$seconds" "$kib" "$code" <<'PY'
import sys
name, size, seconds, kib, verdict = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
print(f"{name:<10} {size:>10} {seconds:>9.2f} {kib / 1024:>9.1f} MiB {kib * 1024 / size:>7.1f}x  {verdict}")
PY
done
