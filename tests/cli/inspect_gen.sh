#!/usr/bin/env bash
# memra gen + memra inspect through the CLI: a generated tiny model inspects as qwen35 with the
# fixture's shapes, --json is valid JSON with the same counts, bad input fails with a message.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -euo pipefail
memra=$1
data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$memra" gen --preset tiny --dtype q8_0 --seed 3 --quiet -o "$tmp/tiny.gguf" >"$tmp/gen.txt" \
  || fail "gen failed: $(cat "$tmp/gen.txt")"
grep -q "56 tensors" "$tmp/gen.txt" || fail "gen summary: $(cat "$tmp/gen.txt")"

"$memra" inspect "$tmp/tiny.gguf" >"$tmp/inspect.txt" || fail "inspect failed"
grep -q "^architecture  qwen35" "$tmp/inspect.txt" || fail "architecture line missing"
grep -q "^file type     Q8_0$" "$tmp/inspect.txt" || fail "file type line missing"
grep -q "ssm.time_step_rank" "$tmp/inspect.txt" || fail "hyperparameter missing"
grep -q "model llama, pre -, vocab 259" "$tmp/inspect.txt" || fail "tokenizer summary missing"
grep -Eq "blk\.0\.attn_qkv\.weight +q8_0 +256 x 256" "$tmp/inspect.txt" || fail "tensor row missing"

"$memra" inspect --json "$tmp/tiny.gguf" >"$tmp/inspect.json" || fail "inspect --json failed"
python3 - "$tmp/inspect.json" <<'PY' || fail "json check failed"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["architecture"] == "qwen35", j["architecture"]
assert j["n_tensors"] == 56 == len(j["tensors"])
assert j["hyperparameters"]["block_count"] == 4  # a number (tests/cli/inspect_json.sh: the types)
assert j["file_type"] == "Q8_0", j["file_type"]
assert j["tokenizer"]["vocab_size"] == 259
assert sum(t["bytes"] for t in j["tensors"]) == j["total_tensor_bytes"]
PY

# Every malformed corpus file: a one-line error naming the file, exit status 1, no crash.
for f in "$data"/gguf_malformed/*.gguf; do
  set +e
  "$memra" inspect "$f" >/dev/null 2>"$tmp/err.txt"
  rc=$?
  set -e
  [ $rc -eq 1 ] || fail "inspect $f exited $rc"
  grep -q "$(basename "$f")" "$tmp/err.txt" || fail "error for $f does not name the file: $(cat "$tmp/err.txt")"
done
"$memra" gen --preset 70b -o "$tmp/x.gguf" 2>"$tmp/err.txt" && fail "unknown preset accepted"
grep -q "unknown preset '70b' (qwen35: tiny" "$tmp/err.txt" || fail "preset error: $(cat "$tmp/err.txt")"
echo "inspect_gen: ok"
