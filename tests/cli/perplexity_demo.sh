#!/usr/bin/env bash
# memra perplexity on the trained demo model over an excerpt of its held-out split
# (tools/train_demo: never trained on). A model that learned English scores far below the
# uniform baseline (perplexity = vocabulary size, 6144); PyTorch measured 96 on the whole split.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -euo pipefail
memra=$1
data=$2
model=$(cd "$data/../.." && pwd)/models/demo/qwen35-demo-q8_0.gguf
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$("$memra" perplexity "$model" -f "$data/demo_heldout_excerpt.txt" --backend cpu --ctx 256 2>/dev/null) \
  || fail "perplexity exited $?"
echo "$out"
ppl=$(sed -n 's/^PPL = \([0-9.]*\) .*/\1/p' <<<"$out")
[ -n "$ppl" ] || fail "no PPL line"
awk -v p="$ppl" 'BEGIN { exit !(p > 1 && p < 300) }' || fail "perplexity $ppl outside (1, 300)"
err=$("$memra" perplexity "$model" -f /nonexistent.txt --backend cpu 2>&1) && fail "missing file accepted"
grep -q "cannot open /nonexistent.txt" <<<"$err" || fail "missing file not reported: $err"
echo "perplexity_demo: ok"
