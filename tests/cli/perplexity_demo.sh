#!/usr/bin/env bash
# memra perplexity on the trained demo model over an excerpt of its held-out split
# (tools/train_demo: never trained on), computed as llama-perplexity does. A model that learned
# English scores far below the uniform baseline (perplexity = vocabulary size, 6144). The excerpt
# is 1500 tokens (its one <|endoftext|> read as text, as llama-perplexity does): 5 chunks of -c 256
# (>= 2 * 256 needed), 127 scored tokens each.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -euo pipefail
memra=$1
data=$2
model=$(cd "$data/../.." && pwd)/models/demo/qwen35-demo-q8_0.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
"$memra" perplexity "$model" -f "$data/demo_heldout_excerpt.txt" --backend cpu -c 256 >"$tmp/out.txt" \
  2>"$tmp/err.txt" || { cat "$tmp/err.txt"; fail "perplexity exited $?"; }
cat "$tmp/out.txt"
# llama-perplexity's final line, on stdout.
read -r ppl unc < <(sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\)$/\1 \2/p' "$tmp/out.txt")
[ -n "${ppl:-}" ] && [ -n "${unc:-}" ] || fail "no 'Final estimate: PPL = X +/- Y' line: $(cat "$tmp/out.txt")"
awk -v p="$ppl" 'BEGIN { exit !(p > 1 && p < 300) }' || fail "perplexity $ppl outside (1, 300)"
# llama-perplexity (ngxson/llama.cpp 3f545becc, CPU, -c 256 -b 256) on the same model and text:
# "[1]58.9172,[2]55.6251,[3]64.0677,[4]57.5557,[5]55.7975," and "PPL = 55.7975 +/- 5.80129";
# memra 55.7778: the q8_0 matmul arithmetic differs (memra dequantizes the weights and keeps f32
# activations; llama.cpp's CPU quantizes the activations to q8_0 too). On an f32 model the two agree
# to 2e-6 (tests/runtime/Perplexity_test.cc).
awk -v p="$ppl" 'BEGIN { d = p / 55.7975 - 1; exit !(d < 0.005 && d > -0.005) }' \
  || fail "perplexity $ppl not within 0.5 % of llama-perplexity's 55.7975"
awk -v p="$ppl" -v u="$unc" 'BEGIN { exit !(u > 0 && u < p / 2) }' || fail "uncertainty $unc implausible"
# Its running line ends at the final estimate, and the counts follow the method.
grep -q "^\[1\][0-9.]*,\[2\][0-9.]*,\[3\][0-9.]*,\[4\][0-9.]*,\[5\]$ppl,$" "$tmp/err.txt" \
  || { cat "$tmp/err.txt"; fail "no [i]ppl line ending in $ppl"; }
grep -q "635 tokens scored in 5 chunks of 256" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "counts"; }
# --chunks caps the chunks (llama-perplexity's flag; -1 and 0 = all).
"$memra" perplexity "$model" -f "$data/demo_heldout_excerpt.txt" --backend cpu -c 256 --chunks 2 \
  >/dev/null 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; fail "--chunks 2 exited $?"; }
grep -q "254 tokens scored in 2 chunks of 256" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "--chunks 2 counts"; }
"$memra" perplexity "$model" -f "$data/demo_heldout_excerpt.txt" --backend cpu -c 256 --chunks -1 \
  >/dev/null 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; fail "--chunks -1 exited $?"; }
grep -q "635 tokens scored in 5 chunks of 256" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "--chunks -1 counts"; }
# Fewer than 2 * ctx tokens: llama-perplexity's error, with both figures.
set +e
"$memra" perplexity "$model" -f "$data/demo_heldout_excerpt.txt" --backend cpu -c 1024 >/dev/null 2>"$tmp/err.txt"
rc=$?
set -e
[ $rc -eq 1 ] || fail "too few tokens: exit code $rc"
grep -q "you need at least 2048 tokens to evaluate perplexity with a context of 1024; the text tokenizes to only 1500 tokens" \
  "$tmp/err.txt" || fail "too few tokens not reported: $(cat "$tmp/err.txt")"
err=$("$memra" perplexity "$model" -f "$data/demo_heldout_excerpt.txt" --backend cpu -c 2 2>&1) && fail "-c 2 accepted"
grep -q -- "ctx-size option: 2 is out of range: expected 3 to" <<<"$err" || fail "-c 2 not reported: $err"
err=$("$memra" perplexity "$model" -f /nonexistent.txt --backend cpu 2>&1) && fail "missing file accepted"
grep -q "cannot open /nonexistent.txt" <<<"$err" || fail "missing file not reported: $err"
echo "perplexity_demo: ok"
