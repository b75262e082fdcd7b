#!/usr/bin/env bash
# A one-minute soak of memra serve (tests/server/soak.py; the 30-minute run's numbers are in
# bench/RESULTS.md): 8 clients mixing greedy replies that must equal the solo ones, sampled and
# streamed requests, cancellations, abrupt disconnects, hostile bytes and long prompts on the demo
# model (CPU); no 5xx but 503, every reply well-formed, RSS within 64 MiB of its warm-up level.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
TMPDIR=$tmp timeout 400 python3 "$root/tests/server/soak.py" "$memra" "$root/models/demo/qwen35-demo-q8_0.gguf" \
  --minutes 1 --clients 8 > "$tmp/soak.txt" 2>&1
rc=$?
cat "$tmp/soak.txt"
[ $rc -eq 0 ] || fail "soak.py exited $rc"
echo "serve_soak: ok"
