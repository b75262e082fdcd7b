#!/usr/bin/env bash
# memra run on the tiny fixture model: --tokens with --logits-out, greedy continuation, chunking,
# -p text, and clear failures (context overflow, bad arguments). Args: MEMRA DATA_DIR SHARED_DIR.
set -euo pipefail
memra=$1
data=$2
model=$data/models/qwen35-tiny-f32.gguf
ref=$data/ref/qwen35-tiny-f32
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

prompt=1,87,107,104,35,116,120,108,102,110,35,101,117,114,122,113,35,105,114,123,35,109,120,112,115,118,35,114,121,104,117,35,119,107,104,35,111,100,125,124,35,103,114,106,49,35,52,53
expected=$(od -An -v -t d4 "$ref/greedy_tokens.i32" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//; s/ /,/g')

# 1. One prefill call: logits file of [48, 259] f32, greedy ids equal llama.cpp's.
"$memra" run "$model" --tokens "$prompt" -n 32 --ignore-eos --print-token-ids --temp 0 \
  --logits-out "$tmp/logits.f32" >"$tmp/out.txt" 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; fail "memra run exited $?"; }
size=$(stat -c %s "$tmp/logits.f32")
[ "$size" -eq $((48 * 259 * 4)) ] || fail "logits file has $size bytes, expected $((48 * 259 * 4))"
got=$(sed -n 's/^generated ids: //p' "$tmp/out.txt")
[ "$got" = "$expected" ] || fail "greedy ids $got, expected $expected"
grep -q "tok/s" "$tmp/err.txt" || fail "no speed line"
grep -q "prompt 48 tokens" "$tmp/err.txt" || fail "prompt count missing"

# 2. Chunks of 16 and one call give the same logits bytes (the CPU executor is split-invariant).
"$memra" run "$model" --tokens "$prompt" -n 1 --chunk 16 --logits-out "$tmp/logits16.f32" \
  >/dev/null 2>"$tmp/err16.txt" || { cat "$tmp/err16.txt"; fail "chunked run failed"; }
cmp -s "$tmp/logits.f32" "$tmp/logits16.f32" || fail "chunk 16 logits differ from one call"

# 3. The logits match llama.cpp's logits_batch.f32 within 1e-4 (if python3 is here to compare).
if command -v python3 >/dev/null; then
  python3 - "$tmp/logits.f32" "$ref/logits_batch.f32" <<'PY' || fail "logits differ from llama.cpp"
import struct, sys
a = open(sys.argv[1], 'rb').read(); b = open(sys.argv[2], 'rb').read()
n = len(b) // 4
x = struct.unpack(f'{n}f', a); y = struct.unpack(f'{n}f', b)
d = max(abs(p - q) for p, q in zip(x, y))
print(f"logits vs llama.cpp: max|d| {d:.3e}")
sys.exit(0 if len(a) == len(b) and d <= 1e-4 else 1)
PY
fi

# 4. Text prompt through the tokenizer, trace lines, sampling.
"$memra" run "$model" -p "hello" -n 8 --temp 0.8 --top-k 20 --seed 7 --trace-layers \
  >"$tmp/text.txt" 2>"$tmp/trace.txt" || { cat "$tmp/trace.txt"; fail "text prompt run failed"; }
head -c 5 "$tmp/text.txt" | grep -q "hello" || fail "prompt not echoed"
[ "$(grep -c '^trace l_out-' "$tmp/trace.txt")" -eq 4 ] || fail "expected 4 l_out trace lines"

# 5. Clear errors: context overflow, bad ids, bad arguments.
if "$memra" run "$model" --tokens "$prompt" --ctx-size 32 -n 1 >/dev/null 2>"$tmp/e1.txt"; then fail "overflow accepted"; fi
grep -q "context overflow" "$tmp/e1.txt" || { cat "$tmp/e1.txt"; fail "no context overflow message"; }
# A text prompt too long for the context is refused before it is echoed (stdout stays empty).
if "$memra" run "$model" -p "hello world, a prompt of many more tokens than eight" --ctx-size 8 -n 1 >"$tmp/o1.txt" \
  2>"$tmp/e1.txt"; then fail "text overflow accepted"; fi
grep -q "context overflow" "$tmp/e1.txt" || { cat "$tmp/e1.txt"; fail "no context overflow message for -p"; }
[ ! -s "$tmp/o1.txt" ] || fail "the prompt was echoed before the overflow error: $(cat "$tmp/o1.txt")"
if "$memra" run "$model" --tokens 1,999 -n 1 >/dev/null 2>"$tmp/e2.txt"; then fail "bad id accepted"; fi
grep -q "outside the vocabulary" "$tmp/e2.txt" || { cat "$tmp/e2.txt"; fail "no vocabulary message"; }
if "$memra" run "$model" -n 1 >/dev/null 2>"$tmp/e3.txt"; then fail "missing prompt accepted"; fi
grep -q "no prompt: give -p TEXT" "$tmp/e3.txt" || { cat "$tmp/e3.txt"; fail "no prompt message"; }

# 6. memra lower prints a module with both functions.
"$memra" lower "$model" >"$tmp/m.mir" || fail "memra lower failed"
grep -q "func @prefill" "$tmp/m.mir" && grep -q "func @decode" "$tmp/m.mir" || fail "lowered module lacks functions"
echo "run_tiny: ok"
