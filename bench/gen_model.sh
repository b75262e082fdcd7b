# Sourced by the device benchmark scripts (gpu_ab.sh, gpu_variants.sh): one generated model.
#
#   gen_model MEMRA PRESET:DTYPE LOG_DIR SECONDS [GEN-ARGS...]
#
# runs `MEMRA gen --preset PRESET --dtype DTYPE GEN-ARGS --quiet` into /tmp/memra-models (within
# SECONDS, its log LOG_DIR/gen-PRESET-DTYPE.log), prints the model's path and says on stderr how
# long it took; on failure it removes the partial file, prints the log's last line as the reason
# and returns 1.
gen_model() {
  local bin=$1 spec=$2 logs=$3 seconds=$4
  shift 4
  local preset=${spec%%:*} dtype=${spec##*:}
  local m=/tmp/memra-models/$preset-$dtype.gguf log=$logs/gen-$preset-$dtype.log t0
  mkdir -p /tmp/memra-models "$logs"
  t0=$(date +%s)
  timeout "$seconds" "$bin" gen --preset "$preset" --dtype "$dtype" "$@" --quiet -o "$m" > "$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then
    echo "gen $spec: $(($(date +%s) - t0)) s" >&2
    echo "$m"
    return 0
  fi
  rm -f "$m"
  local why
  why=$(tail -1 "$log")
  echo "${why:-exit status $rc, no output}"
  return 1
}
