#!/usr/bin/env bash
# memra compile / memra run MODEL.plan on the tiny fixture model: the plan runs with the same
# logits bytes and greedy ids as the GGUF (compiled in memory) and as the unfused module
# (--passes=), --report's table, pass-manager flags on compile and run, and plans refused for
# another GGUF or arch (with what differs). Args: MEMRA DATA_DIR SHARED_DIR.
set -euo pipefail
memra=$1
data=$2
model=$data/models/qwen35-tiny-f32.gguf
other=$data/models/qwen35-tiny-q8_0.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

prompt=1,87,107,104,35,116,120,108,102,110,35,101,117,114,122,113,35,105,114,123,35,109,120,112,115,118,35,114,121,104,117,35,119,107,104,35,111,100,125,124,35,103,114,106,49,35,52,53

# 1. Compile with a report: one row per bucket function, fused op counts, arena vs naive.
"$memra" compile "$model" -o "$tmp/m.plan" --all-logits --buckets 16,32 --report >"$tmp/report.txt" 2>&1 \
  || { cat "$tmp/report.txt"; fail "compile failed"; }
grep -q "^@prefill_t16 *16 " "$tmp/report.txt" || { cat "$tmp/report.txt"; fail "no @prefill_t16 row"; }
grep -q "^@prefill_t32 *32 " "$tmp/report.txt" || fail "no @prefill_t32 row"
grep -q "^@decode *1 " "$tmp/report.txt" || fail "no @decode row"
grep -q "kernel table: version 1, " "$tmp/report.txt" || fail "no kernel table line"
head -c 12 "$tmp/m.plan" | grep -q "MEMRAPLAN 2" || fail "plan magic"

# 2. The plan, the GGUF through the pipeline and the unfused module: same logits bytes and ids.
# Chunks of exactly a bucket's size run the bucket functions (16 + 16 + 16; 32 + 16).
"$memra" run "$tmp/m.plan" --chunk 16 --profile --temp 0 --tokens "$prompt" -n 8 --print-token-ids --logits-out "$tmp/plan.f32" \
  >"$tmp/plan.txt" 2>"$tmp/plan.err" || { cat "$tmp/plan.err"; fail "run of the plan failed"; }
"$memra" run "$model" --chunk 32 --temp 0 --tokens "$prompt" -n 8 --print-token-ids --logits-out "$tmp/gguf.f32" \
  >"$tmp/gguf.txt" 2>"$tmp/gguf.err" || { cat "$tmp/gguf.err"; fail "run of the GGUF failed"; }
"$memra" run "$model" --passes= --temp 0 --tokens "$prompt" -n 8 --print-token-ids --logits-out "$tmp/plain.f32" \
  >"$tmp/plain.txt" 2>"$tmp/plain.err" || { cat "$tmp/plain.err"; fail "unfused run failed"; }
grep -q "profile @prefill_t16: 3 calls" "$tmp/plan.err" || { cat "$tmp/plan.err"; fail "the plan did not run @prefill_t16"; }
cmp -s "$tmp/plan.f32" "$tmp/plain.f32" || fail "plan logits differ from the unfused module's"
cmp -s "$tmp/gguf.f32" "$tmp/plain.f32" || fail "pipeline logits differ from the unfused module's"
[ "$(grep 'generated ids' "$tmp/plan.txt")" = "$(grep 'generated ids' "$tmp/plain.txt")" ] || fail "greedy ids differ"

# 3. Pass-manager flags on compile and run.
"$memra" compile "$model" -o "$tmp/d.plan" --dump-dir "$tmp/dumps" --time-passes 2>"$tmp/time.txt" >/dev/null \
  || fail "compile with dumps failed"
[ -f "$tmp/dumps/00-input.mir" ] || fail "no 00-input.mir"
ls "$tmp/dumps" | grep -q "partition-segments.mir" || fail "no partition-segments dump"
grep -q "Pass execution timing report" "$tmp/time.txt" || fail "no timing on compile"
"$memra" run "$model" --tokens 1,87 -n 1 --print-after=partition-segments --time-passes >/dev/null 2>"$tmp/run.err" \
  || fail "run with pass flags failed"
grep -q "segment {bucket = 16, capturable = 1" "$tmp/run.err" || fail "no segment in --print-after output"
grep -q "Pass execution timing report" "$tmp/run.err" || fail "no timing on run"

# 4. Refused plans: another GGUF (says size and hash differ), another arch, a cut file.
if "$memra" run "$tmp/m.plan" --gguf "$other" --tokens 1 -n 1 >/dev/null 2>"$tmp/e1.txt"; then fail "accepted another GGUF"; fi
grep -q "compiled for another GGUF" "$tmp/e1.txt" && grep -q "size" "$tmp/e1.txt" && grep -q "SHA-256" "$tmp/e1.txt" \
  || { cat "$tmp/e1.txt"; fail "GGUF mismatch message"; }
# A CUDA target memra's kernels do not support is refused before anything is lowered.
"$memra" compile "$model" --arch sm_89 -o "$tmp/old.plan" 2>"$tmp/e3.txt" && fail "compiled for sm_89"
grep -q "sm_89 is not supported yet" "$tmp/e3.txt" || { cat "$tmp/e3.txt"; fail "sm_89: the refusal does not say why"; }
[ -e "$tmp/old.plan" ] && fail "a refused compile left a plan"
if "$memra" run "$tmp/m.plan" --arch sm_80 --tokens 1 -n 1 >/dev/null 2>"$tmp/e2.txt"; then fail "accepted another arch"; fi
grep -q "targets sm_90 but this run targets sm_80" "$tmp/e2.txt" || { cat "$tmp/e2.txt"; fail "arch mismatch message"; }
head -c 5000 "$tmp/m.plan" >"$tmp/cut.plan"
if "$memra" run "$tmp/cut.plan" --tokens 1 -n 1 >/dev/null 2>"$tmp/e3.txt"; then fail "accepted a cut plan"; fi
grep -q "not a valid memra plan" "$tmp/e3.txt" || { cat "$tmp/e3.txt"; fail "cut plan message"; }
# One digit changed inside the IR (a weight of another layer, still a valid plan): refused as
# damaged by the plan's xxh64 line, not run with the wrong weight.
sed '0,/@blk\.0\.attn_norm\.weight/s//@blk.2.attn_norm.weight/' "$tmp/m.plan" >"$tmp/edited.plan"
cmp -s "$tmp/m.plan" "$tmp/edited.plan" && fail "the edit changed nothing"
if "$memra" run "$tmp/edited.plan" --tokens 1 -n 1 >/dev/null 2>"$tmp/e5.txt"; then fail "ran an edited plan"; fi
grep -q "xxh64 does not match its bytes" "$tmp/e5.txt" || { cat "$tmp/e5.txt"; fail "edited plan message"; }
if "$memra" compile "$model" -o "$tmp/x.plan" --arch gfx90 2>"$tmp/e4.txt"; then fail "accepted --arch gfx90"; fi
echo "compile_plan: ok"
