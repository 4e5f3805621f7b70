#!/usr/bin/env bash
# Regenerate docs/report.png: the HTML report of the pretrain sample, in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
preflight check sample_data/pretrain.jsonl --preset pretrain-text --out "$out" -q || true
chromium --headless --no-sandbox --disable-dev-shm-usage --disable-gpu --hide-scrollbars \
  --window-size=1200,2300 --screenshot=docs/report.png "file://$out/report.html" 2>/dev/null
rm -rf "$out"
