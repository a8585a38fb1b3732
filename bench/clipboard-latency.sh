#!/usr/bin/env bash
# Clipboard watcher figures under Xvfb: latency from a copy to the result on the clipboard
# (median and p95 over 100 copies at the default 100 ms interval), idle CPU over IDLE_SECONDS
# (default 60), and resident memory. Needs Xvfb and xclip (installed here if missing).
#   bench/clipboard-latency.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v Xvfb >/dev/null || ! command -v xclip >/dev/null; then
  apt-get update -qq && apt-get install -y -qq xvfb xclip >/dev/null
fi
cargo build --release --quiet
work="$(mktemp -d)"
display=":$((200 + RANDOM % 300))"
Xvfb "$display" -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
trap 'kill $xvfb 2>/dev/null; rm -rf "$work"' EXIT
sleep 1
mkdir -p "$work/root" && echo "hello" > "$work/root/a.txt"
DISPLAY="$display" python3 - "$PWD/target/release/flycode" "$work" "${IDLE_SECONDS:-60}" <<'PY'
import os, statistics, subprocess, sys, time
flycode, work, idle_seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = dict(os.environ, FLYCODE_STATE_DIR=work + "/state")
def copy(text):
    subprocess.run(["xclip", "-selection", "clipboard", "-i"], input=text.encode(), check=True)
def paste():
    return subprocess.run(["xclip", "-selection", "clipboard", "-o"], capture_output=True).stdout.decode(errors="replace")
copy("start")
watch = subprocess.Popen([flycode, "watch", "--yes", "--new-session", "--root", work + "/root"], env=env,
                         stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
time.sleep(1)
latencies = []
for n in range(100):
    reply = '```flycode-call\n{"id":"b%d","tool":"fs.read","args":{"path":"%s/root/a.txt"}}\n```\n' % (n, work)
    start = time.monotonic()
    copy(reply)
    while not paste().startswith("```flycode-result\n[id] b%d\n" % n):
        time.sleep(0.002)
    latencies.append((time.monotonic() - start) * 1000)
latencies.sort()
def ticks():
    fields = open(f"/proc/{watch.pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])
hz = os.sysconf("SC_CLK_TCK")
before, t0 = ticks(), time.monotonic()
time.sleep(idle_seconds)
cpu = (ticks() - before) / hz / (time.monotonic() - t0) * 100
rss = next(int(l.split()[1]) for l in open(f"/proc/{watch.pid}/status") if l.startswith("VmRSS")) / 1024
watch.terminate(); watch.wait()
print(f"latency over 100 copies: median {statistics.median(latencies):.1f} ms, p95 {latencies[94]:.1f} ms (xclip round trips included)")
print(f"idle CPU over {idle_seconds} s: {cpu:.2f} %; resident memory: {rss:.1f} MiB")
PY
