#!/usr/bin/env bash
# Non-finite logits stop generation, bench's greedy decode loop and perplexity with an error naming
# the step (issue 12), not token 0 forever or "nan": a copy of the tiny model with NaN in
# output_norm.weight.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
command -v python3 >/dev/null || { echo "nan_logits: skipped (no python3)"; exit 0; }
# The tensor's offset: the data section plus the aligned sizes of the tensors before it (file order).
"$memra" inspect "$model" --json > "$tmp/info.json" || fail "inspect failed"
python3 - "$model" "$tmp/info.json" "$tmp/nan.gguf" <<'PY' || fail "could not write the NaN model"
import json, shutil, struct, sys
src, info, dst = sys.argv[1:]
d = json.load(open(info))
off, align = d["data_offset"], d["alignment"]
for t in d["tensors"]:
    if t["name"] == "output_norm.weight":
        break
    off += (t["bytes"] + align - 1) // align * align
else:
    sys.exit("output_norm.weight not found")
shutil.copy(src, dst)
with open(dst, "r+b") as f:
    f.seek(off)
    f.write(struct.pack("<f", float("nan")) * (t["bytes"] // 4))
PY
"$memra" run "$tmp/nan.gguf" --backend cpu --tokens 1,2,3 -n 4 --temp 0 --decode-chunk 0 >/dev/null 2>"$tmp/e1.txt"
[ $? -eq 1 ] || { cat "$tmp/e1.txt"; fail "run: exit code not 1"; }
grep -q "the logits after the prompt (3 tokens) are not finite" "$tmp/e1.txt" || { cat "$tmp/e1.txt"; fail "run: no step named"; }
printf 'In the beginning God created the heaven and the earth.\n' > "$tmp/text.txt"
"$memra" perplexity "$tmp/nan.gguf" --backend cpu -f "$tmp/text.txt" --ctx 16 >/dev/null 2>"$tmp/e2.txt"
[ $? -eq 1 ] || { cat "$tmp/e2.txt"; fail "perplexity: exit code not 1"; }
# 77 tokens (BOS, the bytes, a 3-byte U+2581 per space): 4 chunks of 16, each scored from position 8 (llama-perplexity's method).
grep -q "the logits after position 8 of chunk 1 (of 4) are not finite" "$tmp/e2.txt" \
  || { cat "$tmp/e2.txt"; fail "perplexity: no chunk named"; }
# The greedy decode loop (Executor::DecodeGreedy; on CUDA the device loop) that bench's tg runs.
"$memra" bench "$tmp/nan.gguf" --backend cpu -p 0 -n 4 -r 1 >/dev/null 2>"$tmp/e3.txt"
[ $? -eq 1 ] || { cat "$tmp/e3.txt"; fail "bench: exit code not 1"; }
grep -q "the logits after decode step 1 are not finite" "$tmp/e3.txt" || { cat "$tmp/e3.txt"; fail "bench: no step named"; }
echo "nan_logits: ok"
