#!/usr/bin/env bash
# memra gen --dtype <llama.cpp file type> on the tiny preset: general.file_type is llama.cpp's
# LLAMA_FTYPE, memra inspect --json shows llama-quantize's per-tensor types (the mixes of
# tests/frontends/QuantMix_test.cc, taken from llama-quantize b10573 on memra gen's bf16 file), and
# memra run generates from each file. The iq4 files are also read by llama.cpp's gguf-py when a
# python with the `gguf` package is at hand ($MEMRA_GGUF_PYTHON, else python3; skipped, saying so,
# without it): the tensor types, and its dequantized iq4 tensors against the bf16 file of the same
# seed (the iq4 tensors are quantized from those bf16 values).
# Args: MEMRA DATA_DIR SHARED_DIR.
set -euo pipefail
memra=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# dtype, file type name, then name=type pairs llama-quantize wrote (the rest: base type / f32).
check() {
  local dtype=$1 ftype=$2 base=$3
  shift 3
  "$memra" gen --preset tiny --dtype "$dtype" --seed 5 --quiet -o "$tmp/$dtype.gguf" >/dev/null \
    || fail "gen --dtype $dtype failed"
  "$memra" inspect --json "$tmp/$dtype.gguf" >"$tmp/$dtype.json" || fail "inspect $dtype failed"
  python3 - "$tmp/$dtype.json" "$ftype" "$base" "$@" <<'PY' || fail "tensor types of $dtype"
import json, sys
j = json.load(open(sys.argv[1]))
ftype, base, pairs = sys.argv[2], sys.argv[3], dict(p.split("=") for p in sys.argv[4:])
assert j["file_type"] == ftype, (j["file_type"], ftype)
assert j["n_tensors"] == 56
for t in j["tensors"]:
    stays_f32 = len([d for d in t["ne"] if d > 1]) == 1 or "ssm_conv1d" in t["name"]
    want = pairs.get(t["name"], "f32" if stays_f32 else base)
    assert t["type"] == want, (t["name"], t["type"], want)
PY
  "$memra" run "$tmp/$dtype.gguf" --backend cpu --tokens 1,87,107,104 -n 4 --ignore-eos --temp 0 \
    --print-token-ids >"$tmp/run.txt" 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; fail "run on $dtype failed"; }
  [ "$(sed -n 's/^generated ids: //p' "$tmp/run.txt" | tr ',' '\n' | grep -c .)" -eq 4 ] \
    || fail "run on $dtype: $(cat "$tmp/run.txt")"
}

ssm_out() { for l in 0 1 2; do echo "blk.$l.ssm_out.weight=$1"; done; }
check q4_k_m Q4_K_M q4_K output.weight=q6_K blk.2.attn_qkv.weight=q6_K blk.3.attn_v.weight=q6_K \
  blk.2.ffn_down.weight=q6_K blk.3.ffn_down.weight=q6_K $(ssm_out q5_0)
check q5_k_m Q5_K_M q5_K output.weight=q6_K blk.2.attn_qkv.weight=q6_K blk.3.attn_v.weight=q6_K \
  blk.2.ffn_down.weight=q6_K blk.3.ffn_down.weight=q6_K $(ssm_out q5_1)
check q6_k Q6_K q6_K $(ssm_out q8_0)
check q4_0 Q4_0 q4_0 output.weight=q6_K
check mxfp4 MXFP4_MOE mxfp4
check q4_k_s Q4_K_S q4_K output.weight=q6_K $(for l in 0 1 2; do echo "blk.$l.attn_qkv.weight=q5_K"; done) \
  blk.3.attn_v.weight=q5_K $(ssm_out q5_0)
check q5_k_s Q5_K_S q5_K output.weight=q6_K $(ssm_out q5_1)
check q2_k Q2_K q2_K output.weight=q6_K blk.3.attn_output.weight=q3_K blk.3.attn_v.weight=q3_K \
  $(for l in 0 1 2; do echo "blk.$l.attn_qkv.weight=q3_K"; done) \
  $(for l in 0 1 2 3; do echo "blk.$l.ffn_down.weight=q3_K"; done) $(ssm_out q4_0)
check q3_k_m Q3_K_M q3_K output.weight=q6_K blk.0.attn_qkv.weight=q5_K blk.1.attn_qkv.weight=q5_K \
  blk.2.attn_qkv.weight=q4_K blk.3.attn_v.weight=q4_K blk.3.attn_output.weight=q4_K \
  $(for l in 0 1 2 3; do echo "blk.$l.ffn_down.weight=q4_K"; done) $(ssm_out q4_0)

# IQ4_XS: ssm_out (128-element rows) falls back to iq4_nl; output.weight q6_K in both.
check iq4_xs IQ4_XS iq4_xs output.weight=q6_K $(ssm_out iq4_nl)
check iq4_nl IQ4_NL iq4_nl output.weight=q6_K

py=${MEMRA_GGUF_PYTHON:-python3}
if "$py" -c "import gguf" 2>/dev/null; then
  "$memra" gen --preset tiny --dtype bf16 --seed 5 --quiet -o "$tmp/bf16.gguf" >/dev/null || fail "gen bf16 failed"
  for dtype in iq4_xs iq4_nl; do
    "$py" - "$tmp/$dtype.gguf" "$tmp/bf16.gguf" <<'PY' || fail "gguf-py on $dtype"
import sys
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize
q, ref = GGUFReader(sys.argv[1]), GGUFReader(sys.argv[2])
bf16 = {t.name: t for t in ref.tensors}
n = 0
for t in q.tensors:
    if t.tensor_type.name not in ("IQ4_XS", "IQ4_NL"):
        continue
    x = dequantize(t.data, t.tensor_type).astype(np.float64).ravel()
    r = bf16[t.name]
    y = (r.data.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64).ravel()
    assert x.shape == y.shape, (t.name, x.shape, y.shape)
    nmse = ((x - y) ** 2).sum() / (y ** 2).sum()
    assert nmse < 0.02, (t.name, nmse)
    n += 1
assert n == 32, n
PY
  done
else
  echo "gen_quant_mixes: no gguf package for $py, gguf-py read of the iq4 files skipped"
fi
echo "gen_quant_mixes: ok"
