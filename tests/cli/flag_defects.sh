#!/usr/bin/env bash
# Issue 12's command-line defects, one by one: each value is refused with exit code 1 and an
# error naming the flag and its limit (the options layer, tools/Options.h), and llama.cpp's
# spellings work (-m, -c, -t, -s -1, -f, -n, -ngl, -sys). The memory, gen -o and NaN defects have
# their own tests (ctx_memory.sh, gen_destination.sh, nan_logits.sh).
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
refused() {  # refused PATTERN -- memra args...
  local pattern=$1
  shift 2
  "$memra" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
  local rc=$?
  [ $rc -eq 1 ] || { cat "$tmp/err.txt"; fail "memra $*: exit code $rc, expected 1"; }
  grep -q -- "$pattern" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "memra $*: no \"$pattern\" in the error"; }
}
run=(run "$model" --backend cpu --tokens 1,2,3 -n 1)
# --tokens: an empty entry is an error (it was skipped), named before the model loads.
refused "--tokens: entry 2 is empty" -- run "$model" --backend cpu --tokens 1,,2 -n 1
grep -q "loaded in" "$tmp/err.txt" && fail "--tokens 1,,2 was refused only after loading the model"
# bench: --temp outside --batch and a run that measures nothing.
refused "--temp applies to --batch tests only" -- bench "$model" --backend cpu -p 8 -n 2 --temp 0.7
refused "nothing to measure" -- bench "$model" --backend cpu -p 0 -n 0
# --profile-skip (timing the graph without some ops) is for one GPU's pp / tg tests only.
refused "--profile-skip needs --backend cuda on one GPU" -- bench "$model" --backend cpu -p 0 -n 2 --profile-skip=delta_net_step
refused "--profile-skip times the pp / tg tests only" -- bench "$model" --backend cpu -p 8 --batch 1 --profile-skip=gemv
refused "ctx-size option: 100000000 is out of range: expected 0 to 16777216" -- "${run[@]}" --ctx-size 100000000
refused "ctx-size option: 9223372036854775807 is out of range" -- "${run[@]}" --ctx-size 9223372036854775807
refused "ctx-size option: -1 is out of range" -- "${run[@]}" --ctx-size -1
refused "threads option: 100000 is out of range: expected 0 to" -- "${run[@]}" --threads 100000
refused "threads option: 1000 is out of range" -- "${run[@]}" -t 1000
refused "batch-size option: -5 is out of range" -- "${run[@]}" --chunk -5
refused "temp option: 'nan' is not a finite number" -- "${run[@]}" --temp nan
refused "top-p option: 2 is out of range: expected from 0 to 1" -- "${run[@]}" --top-p 2
refused "top-k option: -5 is out of range" -- "${run[@]}" --top-k -5
refused "min-p option: 'inf' is not a finite number" -- "${run[@]}" --min-p inf
refused "repeat-penalty option: 0 is out of range: expected above 0" -- "${run[@]}" --repeat-penalty 0
refused "n-predict option: 'ten' is not an integer" -- "${run[@]}" -n ten
# Integers as strictly as floats: no surrounding whitespace (it was accepted: " 5" ran 5 tokens).
refused "n-predict option: ' 5' is not an integer" -- "${run[@]}" -n " 5"
refused "n-predict option: '5 ' is not an integer" -- "${run[@]}" -n "5 "
refused "backend option: 'tpu' is not one of cpu, cuda" -- "${run[@]}" --backend tpu
refused "repeat-penalty option: 1e-50 is out of range as a 32-bit float (0): expected above 0" -- "${run[@]}" --repeat-penalty 1e-50
refused "inject-fault=disk:3: expected device-alloc:N or nvrtc:N" -- "${run[@]}" --inject-fault disk:3
refused "inject-fault=nvrtc:0: expected device-alloc:N or nvrtc:N with N >= 1" -- "${run[@]}" --inject-fault nvrtc:0
refused "inject-fault applies to --backend cuda" -- "${run[@]}" --inject-fault device-alloc:2
refused "ctx-size option: 1 is out of range: expected 3 to" -- perplexity "$model" -f /dev/null --ctx 1
bench=(bench "$model" --backend cpu -p 8 -n 2)
refused "repetitions option: 0 is out of range: expected 1 to 1000" -- "${bench[@]}" -r 0
refused "output option: 'xml' is not one of md, json, jsonl, csv" -- "${bench[@]}" -o xml
refused "n-prompt option: 'x' is not an integer" -- "${bench[@]}" -p 8,x
refused "n-prompt option: ' 4' is not an integer" -- "${bench[@]}" -p "8, 4"

# A plan fixes its context and pipeline: those flags are errors with a plan, not ignored.
"$memra" compile "$model" --arch cpu -o "$tmp/m.plan" 2>/dev/null || fail "compile"
refused "a plan fixes its context; compile it with --ctx-size" -- run "$tmp/m.plan" --tokens 1,2 -n 1 --ctx-size 64
refused "passes and the pass dumps apply when compiling" -- run "$tmp/m.plan" --tokens 1,2 -n 1 --passes=dce
refused "a plan fixes its KV cache types; compile it with --cache-type-k/-v" -- run "$tmp/m.plan" --tokens 1,2 -n 1 -ctk f16

# KV cache types (llama.cpp's -ctk / -ctv): f32, f16, bf16, q8_0; anything else is refused by name,
# and a 16-bit or q8_0 cache runs.
refused "cache-type-k option: 'q4_0' is not one of f32, f16, bf16, q8_0" -- "${run[@]}" -ctk q4_0
refused "cache-type-v option: 'f64' is not one of f32, f16, bf16, q8_0" -- "${run[@]}" --cache-type-v f64
"$memra" "${run[@]}" -ctk f16 -ctv bf16 >/dev/null 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; fail "a 16-bit KV cache run"; }
"$memra" "${run[@]}" -ctk q8_0 -ctv f16 >/dev/null 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; fail "a q8_0 K cache run"; }
refused "--gguf and --arch apply to a plan" -- run "$model" --tokens 1,2 -n 1 --arch sm_90
refused "no model: give it as the first argument or with -m PATH" -- run --tokens 1,2 -n 1
refused "two models given" -- run "$model" -m "$tmp/other.gguf" --tokens 1,2 -n 1

# llama.cpp's spellings.
printf 'hello' >"$tmp/prompt.txt"
"$memra" run -m "$model" -f "$tmp/prompt.txt" -n 4 -c 128 -t 1 -s 42 -ngl 99 --temp 0.7 --min-p 0.1 \
  --repeat-penalty 1.1 --repeat-last-n 16 --presence-penalty 0.5 --frequency-penalty 0.5 --backend cpu \
  >"$tmp/out.txt" 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; fail "llama.cpp flags refused"; }
grep -q "^hello" "$tmp/out.txt" || fail "-f prompt not echoed"
grep -q -- "-ngl ignored" "$tmp/err.txt" || fail "-ngl not noted"
grep -q "context 128" "$tmp/err.txt" || fail "-c not used"
# -s -1 (the default) draws a seed and prints it; the printed seed repeats the run.
"$memra" run "$model" -p hi -n 8 -s -1 --backend cpu >"$tmp/a.txt" 2>"$tmp/a.err" || fail "-s -1"
seed=$(sed -n 's/.*repeat with -s \([0-9]*\)).*/\1/p' "$tmp/a.err")
[ -n "$seed" ] || { cat "$tmp/a.err"; fail "no seed printed"; }
"$memra" run "$model" -p hi -n 8 -s "$seed" --backend cpu >"$tmp/b.txt" 2>/dev/null || fail "-s $seed"
cmp -s "$tmp/a.txt" "$tmp/b.txt" || fail "the printed seed does not repeat the run"
refused "-sys needs --chat or -cnv" -- "${run[@]}" -sys "be brief"
echo "flag_defects: ok"
