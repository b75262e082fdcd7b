#!/usr/bin/env bash
# memra inspect --json on the fixtures in tests/data/models: typed values (numbers as numbers,
# bools as bools, arrays as arrays, strings without added quotes) and the file type named as
# llama.cpp's llama_ftype ("F32", "Q8_0"), the id kept in general.file_type; the text report
# names it too.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
command -v python3 >/dev/null || { echo "inspect_json: skipped (no python3)"; exit 0; }
for pair in "qwen35-tiny-f32.gguf F32 0" "qwen35-tiny-q8_0.gguf Q8_0 7"; do
  read -r file name id <<<"$pair"
  f=$data/models/$file
  "$memra" inspect --json "$f" >"$tmp/j.json" || fail "inspect --json $file failed"
  python3 - "$tmp/j.json" "$name" "$id" <<'PY' || fail "$file: JSON types"
import json, sys
d = json.load(open(sys.argv[1]))
name, fid = sys.argv[2], int(sys.argv[3])
def is_int(x): return isinstance(x, int) and not isinstance(x, bool)
hp, gen, tok = d["hyperparameters"], d["general"], d["tokenizer"]
assert d["file_type"] == name, d["file_type"]
assert is_int(gen["file_type"]) and gen["file_type"] == fid, gen["file_type"]
assert d["architecture"] == "qwen35" and gen["architecture"] == "qwen35", (d["architecture"], gen["architecture"])
assert gen["name"] == "qwen35-tiny", gen["name"]  # no embedded quotes
assert '"' not in gen["description"] and gen["description"].endswith("seed 1"), gen["description"]  # not cut
for k in ("context_length", "embedding_length", "block_count", "attention.head_count", "ssm.state_size"):
    assert is_int(hp[k]), (k, hp[k])
assert hp["context_length"] == 4096 and hp["block_count"] == 4
assert isinstance(hp["attention.layer_norm_rms_epsilon"], float) and hp["attention.layer_norm_rms_epsilon"] == 1e-06, \
    hp["attention.layer_norm_rms_epsilon"]
assert isinstance(hp["rope.freq_base"], (int, float)) and hp["rope.freq_base"] == 1e7  # JSON: 10000000
assert hp["rope.dimension_sections"] == [3, 3, 2, 0], hp["rope.dimension_sections"]
assert is_int(d["n_tensors"]) and d["n_tensors"] == len(d["tensors"]) == 56
assert all(is_int(n) for t in d["tensors"] for n in t["ne"])
assert tok["present"] is True and tok["chat_template"] is False
assert is_int(tok["vocab_size"]) and tok["vocab_size"] == 259
assert tok["special_ids"]["bos"] == 1
PY
  "$memra" inspect --no-tensors "$f" >"$tmp/t.txt" || fail "inspect $file failed"
  grep -q "^file type     $name$" "$tmp/t.txt" || { cat "$tmp/t.txt"; fail "$file: no 'file type $name' line"; }
  grep -Eq "^  file_type +$id \($name\)$" "$tmp/t.txt" || { cat "$tmp/t.txt"; fail "$file: general.file_type not named"; }
done
echo "inspect_json: ok"
