#!/usr/bin/env bash
# Peak resident memory and wall time of `flycode validate` on a generated JSON Lines transcript
# (default 100 MB), to show that memory does not grow with the file. Usage:
#   bench/validate-memory.sh [MEGABYTES]
set -euo pipefail
cd "$(dirname "$0")/.."
megabytes="${1:-100}"
cargo build --release --quiet
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 - "$work/big.jsonl" "$megabytes" <<'PY'
import json, sys
path, megabytes = sys.argv[1], int(sys.argv[2])
body = "    let value = compute(input, &options)?; // a line of source code\n" * 60
with open(path, "w") as out:
    turn = written = 0
    while written < megabytes * 1024 * 1024:
        turn += 1
        call = f'```flycode-call\n{{"id":"call-{turn}","tool":"fs.read","args":{{"path":"/root/work/app/src/f{turn}.rs"}}}}\n```'
        result = f"```flycode-result\n[id] call-{turn}\n[command] /fs.read /root/work/app/src/f{turn}.rs\n[ok] true\n[data]\n{body}\n```"
        for role, content in (("assistant", call), ("user", result), ("assistant", "The function computes a value.")):
            line = json.dumps({"role": role, "content": content}) + "\n"
            written += len(line)
            out.write(line)
PY
python3 - target/release/flycode "$work/big.jsonl" <<'PY'
import os, resource, subprocess, sys, time
size = os.path.getsize(sys.argv[2]) / 1e6
start = time.monotonic()
result = subprocess.run([sys.argv[1], "validate", sys.argv[2]], stdout=subprocess.PIPE, text=True)
elapsed = time.monotonic() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(result.stdout.strip().splitlines()[-1])
print(f"{size:.0f} MB in {elapsed:.2f} s ({size / elapsed:.0f} MB/s), peak RSS {peak:.1f} MiB, exit {result.returncode}")
PY
