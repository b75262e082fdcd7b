#!/usr/bin/env bash
# memra run --backend cuda. Without a GPU: a clear error before the model is read, and the default
# backend is cpu. With one: greedy ids on the tiny f32 model equal llama.cpp's, and --logits-out
# has [48, 259] f32 close to the CPU executor's; qwen35moe runs there too. Args: MEMRA DATA_DIR SHARED_DIR.
set -euo pipefail
memra=$1
data=$2
model=$data/models/qwen35-tiny-f32.gguf
ref=$data/ref/qwen35-tiny-f32
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$memra" run --help >"$tmp/help.txt" 2>&1 || true
grep -q "cuda when a CUDA GPU is present" "$tmp/help.txt" || fail "--help does not document the default backend"
if "$memra" run "$model" --tokens 1,2 -n 1 --backend tpu >/dev/null 2>"$tmp/e0.txt"; then fail "unknown backend accepted"; fi
grep -q "not one of cpu, cuda" "$tmp/e0.txt" || { cat "$tmp/e0.txt"; fail "no backend list"; }

prompt=1,87,107,104,35,116,120,108,102,110,35,101,117,114,122,113,35,105,114,123,35,109,120,112,115,118,35,114,121,104,117,35,119,107,104,35,111,100,125,124,35,103,114,106,49,35,52,53
expected=$(od -An -v -t d4 "$ref/greedy_tokens.i32" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//; s/ /,/g')

if "$memra" run "$model" --tokens "$prompt" -n 32 --ignore-eos --print-token-ids --temp 0 --backend cuda \
     --logits-out "$tmp/gpu.f32" >"$tmp/out.txt" 2>"$tmp/err.txt"; then
  # A GPU: greedy ids and logits.
  got=$(sed -n 's/^generated ids: //p' "$tmp/out.txt")
  [ "$got" = "$expected" ] || fail "cuda greedy ids $got, expected $expected"
  grep -q "cuda executor" "$tmp/err.txt" || fail "no cuda executor line"
  [ "$(stat -c %s "$tmp/gpu.f32")" -eq $((48 * 259 * 4)) ] || fail "cuda logits file size"
  # qwen35moe through memra run on the GPU (routing and experts on the device): 32 ids in the
  # vocabulary (its numerics against the CPU are CudaExecutor_test's: a near tie on the greedy
  # path may legitimately go the other way under the decode GEMVs' int8 activations).
  moe=$data/models/qwen35moe-tiny-q8_0.gguf
  "$memra" run "$moe" --tokens "$prompt" -n 32 --ignore-eos --print-token-ids --temp 0 --backend cuda \
    >"$tmp/moe.txt" 2>"$tmp/moe-err.txt" || { cat "$tmp/moe-err.txt"; fail "cuda run of qwen35moe"; }
  ids=$(sed -n 's/^generated ids: //p' "$tmp/moe.txt" | tr ',' '\n')
  [ "$(echo "$ids" | grep -c .)" -eq 32 ] || fail "qwen35moe cuda: not 32 ids"
  echo "$ids" | awk '$1 < 0 || $1 >= 259 { bad = 1 } END { exit bad }' || fail "qwen35moe cuda: id outside the vocabulary"
  echo "run_cuda: ok (GPU)"
else
  grep -q -- "--backend cuda: no usable CUDA GPU here" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "no clear no-GPU message"; }
  grep -q "use --backend cpu" "$tmp/err.txt" || fail "no hint"
  # The default is cpu here.
  "$memra" run "$model" --tokens 1,87,107 -n 2 >/dev/null 2>"$tmp/def.txt" || { cat "$tmp/def.txt"; fail "default run failed"; }
  grep -q "cpu executor" "$tmp/def.txt" || { cat "$tmp/def.txt"; fail "default backend is not cpu without a GPU"; }
  echo "run_cuda: ok (no GPU: clear error, cpu default)"
fi
