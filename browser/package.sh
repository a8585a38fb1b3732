#!/usr/bin/env bash
# Packs browser/extension into the zip a browser's extension store takes:
# target/flycode-companion-VERSION.zip, with manifest.json at its root and nothing else but the
# extension's own files (no build step: the zip holds the same files Chromium or Firefox load
# unpacked).
#
#   browser/package.sh            (prints the zip's path)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import json, os, zipfile
root = "browser/extension"
version = json.load(open(os.path.join(root, "manifest.json")))["version"]
os.makedirs("target", exist_ok=True)
out = f"target/flycode-companion-{version}.zip"
files = sorted(
    os.path.relpath(os.path.join(d, f), root)
    for d, _, fs in os.walk(root)
    for f in fs
    if not f.startswith(".")
)
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for name in files:
        info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        z.writestr(info, open(os.path.join(root, name), "rb").read())
print(out)
PY
