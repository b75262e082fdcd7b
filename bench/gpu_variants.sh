#!/usr/bin/env bash
# Decode of one memra binary under several compile variants, on the same generated models, in one
# device call: which of a set of passes or kernel options gains and which loses (gpu_ab.sh compares
# two sides; this isolates each change of a side). For each PRESET:DTYPE, `memra gen` writes the
# model, then every variant runs `memra bench -p 0 -n 128 -r 2` ROUNDS times (variants interleaved
# within a round, so clock drift falls on all of them), with one kernel cache for all. With
# --profile=PRESET:DTYPE, that model's variants also run once with `--profile` (events around every
# op, eager) into $OUT/profile-VARIANT-PRESET-DTYPE.txt. A table of every run comes last; the runs'
# logs come back as one file, $OUT/logs.tar.gz (a device call returns only a few files).
#
# VARIANTS is a file of lines `NAME<TAB>BENCH-ARGS` (split as a shell would: quote a pass pipeline),
# e.g. `old	--passes="canonicalize,...,select-kernels{arch=sm_90 last-block-merge=false},..."`.
#
#   bash bench/gpu_variants.sh BUNDLE.tar.xz BUDGET_S ROUNDS VARIANTS [--fill=tiled] [--profile=P:D] PRESET:DTYPE...
set -uo pipefail
source "$(dirname "$0")/gen_model.sh"
bundle=${1:?usage: gpu_variants.sh BUNDLE BUDGET_S ROUNDS VARIANTS PRESET:DTYPE...}
budget=${2:?budget}
rounds=${3:?rounds}
variants=${4:?variants file}
shift 4
fill=() profile=""
while :; do
  case ${1:-} in
    --fill=*) fill=("$1"); shift ;;
    --profile=*) profile=${1#--profile=}; shift ;;
    *) break ;;
  esac
done
start=$(date +%s)
out=${OUT:-/tmp/memra-variants}
logs=/tmp/memra-variants-logs
B=/tmp/memra-variants-bin
mkdir -p "$out" "$B" "$logs"
tar xJf "$bundle" -C "$B" ./memra
names=() args=()
while IFS=$'\t' read -r n a; do
  [ -n "$n" ] && [ "${n:0:1}" != "#" ] || continue
  names+=("$n") args+=("$a")
done < "$variants"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
left() { echo $((budget - ($(date +%s) - start))); }
rows=()
for spec in "$@"; do
  preset=${spec%%:*} dtype=${spec##*:}
  [ "$(left)" -gt 30 ] || { rows+=("$spec: budget spent before gen"); continue; }
  m=$(gen_model "$B/memra" "$spec" "$logs" "$(left)" "${fill[@]}") || { rows+=("$spec: gen failed ($m)"); continue; }
  for r in $(seq 1 "$rounds"); do
    for i in "${!names[@]}"; do
      [ "$(left)" -gt 10 ] || break 2
      eval "a=(${args[$i]})"
      line=$(timeout "$(left)" "$B/memra" bench "$m" -p 0 -n 128 -r 2 --kernel-cache /tmp/memra-variants-cache "${a[@]}" \
        2> "$logs/bench-$preset-$dtype-${names[$i]}-$r.err" | grep -E "tg128" | awk -F'|' '{print $(NF-1)}')
      rows+=("$(printf '%-26s %-14s round %d  tg128 %s' "$spec" "${names[$i]}" "$r" "${line:-failed}")")
      echo "${rows[-1]}"
    done
  done
  if [ "$spec" = "$profile" ]; then
    for i in "${!names[@]}"; do
      [ "$(left)" -gt 20 ] || break
      eval "a=(${args[$i]})"
      timeout "$(left)" "$B/memra" bench "$m" -p 0 -n 32 -r 1 --profile --kernel-cache /tmp/memra-variants-cache "${a[@]}" \
        > "$out/profile-${names[$i]}-$preset-$dtype.txt" 2>&1
    done
  fi
  rm -f "$m"
done
tar czf "$out/logs.tar.gz" -C "$logs" .
echo "=== variants, decode ($(($(date +%s) - start)) s of $budget) ==="
for r in "${rows[@]}"; do echo "$r"; done
