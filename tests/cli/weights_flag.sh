#!/usr/bin/env bash
# --weights (issue 13): one flag, each word valid on one backend (cpu per-row|dequant, cuda
# blocks|bf16), a word of the other backend refused naming the right ones; memra compile
# --weights blocks|bf16 for CUDA targets only, recorded in the plan (header line and the IR's
# kernel_weights), blocks dequantizing with Dequant.cu and holding the GGUF's bytes, bf16 not.
# The compile part needs NVRTC (no GPU): skipped without it. Args: MEMRA DATA_DIR SHARED_DIR.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
q8=$data/models/qwen35-tiny-q8_0.gguf

# 1. The backend's words only.
if "$memra" run "$q8" --backend cpu --weights bf16 --tokens 1,2 -n 1 2>"$tmp/e.txt"; then
  fail "cpu accepted --weights bf16"
fi
grep -q "weights bf16 applies to the cuda backend; with --backend cpu use per-row or dequant" "$tmp/e.txt" \
  || { cat "$tmp/e.txt"; fail "cpu --weights bf16 message"; }
if "$memra" bench "$q8" --backend cpu --weights blocks -p 16 -n 0 -r 1 2>"$tmp/e.txt" >/dev/null; then
  fail "bench cpu accepted --weights blocks"
fi
grep -q "applies to the cuda backend" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "bench message"; }
if "$memra" run "$q8" --weights q8 --tokens 1 -n 1 2>"$tmp/e.txt"; then fail "accepted --weights q8"; fi
grep -q "is not one of blocks, bf16, per-row, dequant" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "bad word message"; }
"$memra" run "$q8" --backend cpu --weights dequant --tokens 1,2 -n 2 --temp 0 >/dev/null 2>"$tmp/e.txt" \
  || { cat "$tmp/e.txt"; fail "cpu --weights dequant failed"; }
grep -q "dequant weights" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "cpu load line lacks the weight mode"; }

# 2. compile: CUDA targets only.
if "$memra" compile "$q8" --arch cpu --weights bf16 -o "$tmp/cpu.plan" 2>"$tmp/e.txt"; then
  fail "compile --arch cpu accepted --weights"
fi
grep -q "applies to CUDA targets" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "compile cpu message"; }

# 3. The plan records the mode; blocks dequantize with Dequant.cu and keep the file's bytes.
if ! "$memra" compile "$q8" --arch sm_90 --buckets 16 -o "$tmp/b.plan" --report >"$tmp/b.txt" 2>&1; then
  if grep -qi "nvrtc" "$tmp/b.txt"; then echo "SKIP: NVRTC not available: $(cat "$tmp/b.txt")"; exit 0; fi
  cat "$tmp/b.txt"; fail "compile --weights blocks failed"
fi
"$memra" compile "$q8" --arch sm_90 --buckets 16 --weights bf16 -o "$tmp/f.plan" --report >"$tmp/f.txt" 2>&1 \
  || { cat "$tmp/f.txt"; fail "compile --weights bf16 failed"; }
grep -aq '^weights = "blocks"' "$tmp/b.plan" || fail "blocks plan: no weights line"
grep -aq '^weights = "bf16"' "$tmp/f.plan" || fail "bf16 plan: no weights line"
grep -aq 'kernel_weights = "blocks"' "$tmp/b.plan" || fail "blocks plan: IR lacks kernel_weights"
grep -aq 'kernel_weights = "bf16"' "$tmp/f.plan" || fail "bf16 plan: IR lacks kernel_weights"
grep -aq 'Dequant.cu<DEQ_TYPE=8>::dequant_bf16' "$tmp/b.plan" || fail "blocks plan: no q8_0 dequantization"
grep -aq 'Dequant.cu<DEQ_TYPE=8>::dequant_rows_f32' "$tmp/b.plan" || fail "blocks plan: no embed on blocks"
grep -aq 'Dequant.cu' "$tmp/f.plan" && fail "bf16 plan dequantizes per step"
grep -aq 'workspace_bytes = ' "$tmp/b.plan" || fail "blocks plan: no workspace_bytes"
# Device memory by kind: blocks hold the tensors' bytes (2.4 MiB here), bf16 copies about twice.
grep -q "device memory (weights as blocks; .*): weights 2.4 MiB, KV cache 4.0 MiB, recurrent state 0.1 MiB, arenas" \
  "$tmp/b.txt" || { cat "$tmp/b.txt"; fail "blocks: device memory line"; }
grep -q "device memory (weights as bf16; .*): weights 4.5 MiB, .*workspace 0.0 MiB" "$tmp/f.txt" \
  || { cat "$tmp/f.txt"; fail "bf16: device memory line"; }
grep -q "(arch sm_90, weights as blocks)" "$tmp/b.txt" || fail "report header lacks the weight mode"
echo "weights_flag: ok"
