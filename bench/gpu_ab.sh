#!/usr/bin/env bash
# Decode A/B of two memra binaries on the same generated models, in one device call: for each
# PRESET:DTYPE, `memra gen` (by NEW) writes the model, then `memra bench -p 0 -n 128 -r 2` runs
# ROUNDS times alternating OLD and NEW (each with its own kernel cache: their kernel sources
# differ), and a table of every run comes last. The binaries may be xz'ed (carried that way to fit
# the device call's 64 MiB).
#
# --fill=tiled: NEW generates with `memra gen --fill tiled` (each large tensor repeats its first
# 1 Mi drawn values: the same bytes a weight, written several times faster; for speed only).
#
# --old-args=ARGS / --new-args=ARGS: more `memra bench` arguments for that side, split as a shell
# would (quote a value with spaces): one binary may then be both sides (OLD = NEW), differing by a
# compile option through --passes, e.g. --old-args='--passes="...,select-kernels{arch=sm_90
# sm-count=132 q8-companions=false},..."'.
#
#   bash bench/gpu_ab.sh OLD[.xz] NEW[.xz] BUDGET_S ROUNDS [--fill=tiled] [--old-args=A] [--new-args=A] PRESET:DTYPE...
#   e.g. bash bench/gpu_ab.sh build-gpu/memra-old.xz build-gpu/memra-new.xz 520 2 gemma4-26b-a4b:q4_k_m
set -uo pipefail
source "$(dirname "$0")/gen_model.sh"
old=${1:?usage: gpu_ab.sh OLD NEW BUDGET_S ROUNDS PRESET:DTYPE...}
new=${2:?usage: gpu_ab.sh OLD NEW BUDGET_S ROUNDS PRESET:DTYPE...}
budget=${3:?usage: gpu_ab.sh OLD NEW BUDGET_S ROUNDS PRESET:DTYPE...}
rounds=${4:?usage: gpu_ab.sh OLD NEW BUDGET_S ROUNDS PRESET:DTYPE...}
shift 4
fill=()
declare -A extra=([old]="" [new]="")
while :; do
  case ${1:-} in
    --fill=*) fill=("$1"); shift ;;
    --old-args=*) extra[old]=${1#--old-args=}; shift ;;
    --new-args=*) extra[new]=${1#--new-args=}; shift ;;
    *) break ;;
  esac
done
start=$(date +%s)
out=${OUT:-/tmp/memra-ab}
bin=/tmp/memra-ab-bin
mkdir -p "$out" "$bin"
for pair in "old:$old" "new:$new"; do
  name=${pair%%:*} src=${pair#*:}
  case $src in
    *.xz) xz -dc "$src" > "$bin/memra-$name" ;;
    *) cp "$src" "$bin/memra-$name" ;;
  esac
  chmod +x "$bin/memra-$name"
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
left() { echo $((budget - ($(date +%s) - start))); }
rows=()
for spec in "$@"; do
  preset=${spec%%:*} dtype=${spec##*:}
  [ "$(left)" -gt 30 ] || { rows+=("$spec: budget spent before gen"); continue; }
  m=$(gen_model "$bin/memra-new" "$spec" "$out" "$(left)" "${fill[@]}") || { rows+=("$spec: gen failed ($m)"); continue; }
  for r in $(seq 1 "$rounds"); do
    for b in old new; do
      [ "$(left)" -gt 10 ] || break 2
      eval "args=(${extra[$b]})"  # the side's extra arguments, split as a shell would (quotes kept)
      line=$(timeout "$(left)" "$bin/memra-$b" bench "$m" -p 0 -n 128 -r 2 --kernel-cache "/tmp/memra-ab-cache-$b" "${args[@]}" \
        2> "$out/bench-$preset-$dtype-$b-$r.err" | grep -E "tg128" | awk -F'|' '{print $(NF-1)}')
      rows+=("$(printf '%-28s %-4s round %d  tg128 %s' "$spec" "$b" "$r" "${line:-failed}")")
    done
  done
  rm -f "$m"
done
echo "=== A/B decode ($(($(date +%s) - start)) s of $budget) ==="
for r in "${rows[@]}"; do echo "$r"; done
