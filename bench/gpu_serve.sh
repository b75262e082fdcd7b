#!/usr/bin/env bash
# `memra serve` on the GPU under bench/serve_bench.py's load (issue 16's serving numbers) in one
# device call: generates the model (PRESET[:DTYPE], default 9b bf16), starts the server with
# --parallel SLOTS on CUDA, waits for /health, replays Poisson arrivals at RATES and a burst, stops
# the server. Run from the repository root on the GPU machine:
#
#   [TEMPS="0 1"] [SESSIONS=32] [NO_CACHE=1] bash bench/gpu_serve.sh build-gpu/gpu-bundle.tar.xz [PRESET[:DTYPE]] \
#     [SLOTS] [RATES] [SECONDS]
#
# BURST: requests sent at once after the rates (default 64). SESSIONS: multi-turn chats after the rates (serve_bench.py --sessions); NO_CACHE=1 then runs the
# same chats again on a server started with --cache-ram 0 (no prefix reuse), for the comparison.
set -uo pipefail
bundle=${1:?usage: gpu_serve.sh BUNDLE.tar.xz [PRESET[:DTYPE]] [SLOTS] [RATES] [SECONDS]}
spec=${2:-9b}
slots=${3:-64}
rates=${4-2,8}
seconds=${5-30}
preset=${spec%%:*}; dtype=bf16; [ "$spec" != "$preset" ] && dtype=${spec#*:}
out=${OUT:-/tmp/memra-gpu-out}
bin=/tmp/memra-gpu
mkdir -p "$out" "$bin" /tmp/memra-models
tar xJf "$bundle" -C "$bin" || { echo "cannot unpack $bundle"; exit 1; }
m=/tmp/memra-models/qwen35-$preset-$dtype.gguf
start=$(date +%s)
[ -f "$m" ] || "$bin/memra" gen --preset "$preset" --dtype "$dtype" --quiet -o "$m" > "$out/gen.log" 2>&1
echo "gen $preset-$dtype: $(( $(date +%s) - start )) s"
port=8090
get() { python3 -c "import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())" "$1"; }
# start_server LOG [FLAGS...]: memra serve in the background (pid in $pid), waits for /health.
start_server() {
  local log=$1; shift
  "$bin/memra" serve "$m" --backend cuda --parallel "$slots" --port $port --kernel-cache /tmp/memra-cache "$@" \
    > "$log" 2>&1 &
  pid=$!
  local start=$(date +%s)
  until get "http://127.0.0.1:$port/health" > /dev/null 2>&1; do
    kill -0 $pid 2>/dev/null || { echo "memra serve exited:"; tail -20 "$log"; exit 1; }
    [ $(( $(date +%s) - start )) -gt 400 ] && { echo "no /health after 400 s"; tail -20 "$log"; kill $pid; exit 1; }
    sleep 1
  done
  echo "server ready after $(( $(date +%s) - start )) s"
  grep "memra serve:" "$log"
}
stop_server() {
  kill -TERM $pid
  wait $pid
  echo "memra serve exit code $?"
}
sessions() {
  python3 bench/serve_bench.py --url "http://127.0.0.1:$port" --rates '' --burst 0 --sessions "$SESSIONS" --turns 6 \
    --session-rate 2 | tee -a "$out/serve-bench.md"
}
start_server "$out/serve.log"
for temp in ${TEMPS:-0}; do
  python3 bench/serve_bench.py --url "http://127.0.0.1:$port" --rates "$rates" --duration "$seconds" --burst "${BURST:-64}" \
    --temperature "$temp" | tee -a "$out/serve-bench.md"
done
[ -n "${SESSIONS:-}" ] && sessions
get "http://127.0.0.1:$port/metrics" | grep -v "^#" | tee "$out/metrics.txt"
stop_server
if [ -n "${SESSIONS:-}" ] && [ -n "${NO_CACHE:-}" ]; then
  echo "--- the same chats without prefix reuse (--cache-ram 0)"
  start_server "$out/serve-nocache.log" --cache-ram 0
  sessions
  stop_server
fi
