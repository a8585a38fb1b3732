#!/usr/bin/env bash
# Writes link/startup.order: the functions of the flycode binary that the common one-shot calls
# run, in the order first met, for LLD to place side by side (build.rs says why). Run it after a
# change that renames much of the start-up path (a new dependency, a moved module); a stale list
# only costs speed, never correctness.
#
#   link/startup_order.sh        (needs valgrind and python3; not part of CI)
#
# The calls: a trivial fs.read, a 10 MB fs.read, fs.ls, fs.search, fs.write (with its undo
# record) and process.run (front, guardian and worker), each once under callgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "link/startup_order.sh needs valgrind (apt-get install valgrind)" >&2; exit 1; }
cargo build --release --quiet
binary="$PWD/target/release/flycode"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
root="$work/root"
mkdir -p "$root/src" "$work/home/config/flycode"
printf 'output_cap = 16777216\n' > "$work/home/config/flycode/flycode.toml"
printf 'hello\n' > "$root/tiny.txt"
for i in $(seq 1 50); do printf 'fn f%d() {\n    println!("%d");\n}\n' "$i" "$i" > "$root/src/f$i.rs"; done
python3 - "$root/big.txt" <<'PY'
import sys
with open(sys.argv[1], "w") as out:
    i = 0
    while out.tell() < 10_000_000:
        out.write(f"    let value_{i} = compute(\"line {i}\", {i} * 3); // a line of code\n")
        i += 1
PY
call() { printf '```flycode-call\n%s\n```\n' "$1"; }
call "{\"id\":\"w\",\"tool\":\"fs.write\",\"args\":{\"path\":\"$root/new.txt\",\"mode\":\"overwrite\",\"content\":\"hello\\n\"}}" > "$work/write.reply"
call '{"id":"p","tool":"process.run","args":{"command":"true"}}' > "$work/run.reply"
export PATH=/usr/bin:/bin HOME="$work/home" FLYCODE_STATE_DIR="$work/home/state" XDG_CONFIG_HOME="$work/home/config"
n=0
profile() {
  n=$((n + 1))
  valgrind --tool=callgrind --trace-children=yes --demangle=no \
    --callgrind-out-file="$work/cg.$n.%p.out" "$binary" exec --root "$root" "$@" >/dev/null 2>&1 || true
}
profile --slash "/fs.read $root/tiny.txt" </dev/null
profile --slash "/fs.read $root/big.txt" </dev/null
profile --slash "/fs.ls $root/src" </dev/null
profile --slash "/fs.search $root/src println" </dev/null
profile <"$work/write.reply"
profile --yes <"$work/run.reply"
{
  echo "# The functions of the flycode binary that the common one-shot calls run, in the order"
  echo "# first met (link/startup_order.sh wrote it on $(date -u +%F); build.rs says why)."
  python3 - "$binary" $(ls "$work"/cg.*.out | sort -t. -k2,2n -k3,3n) <<'PY'
import os
import re
import sys

binary, outputs = os.path.realpath(sys.argv[1]), sys.argv[2:]
order, seen = [], set()
for path in outputs:
    # callgrind compresses names: "(id) name" the first time, "(id)" after.
    objects, functions, current = {}, {}, None

    def name(table, text):
        match = re.match(r"\((\d+)\)(?: (.*))?", text)
        if not match:
            return text
        if match.group(2) is not None:
            table[match.group(1)] = match.group(2)
        return table.get(match.group(1))

    for line in open(path):
        if line.startswith("ob="):
            current = name(objects, line[3:].strip())
        elif line.startswith("cob="):
            name(objects, line[4:].strip())
        elif line.startswith("cfn="):
            name(functions, line[4:].strip())
        elif line.startswith("fn="):
            function = name(functions, line[3:].strip())
            if current == binary and function and function not in seen:
                seen.add(function)
                order.append(function)
print("\n".join(order))
PY
} > link/startup.order
echo "link/startup.order: $(grep -vc '^#' link/startup.order) functions"
