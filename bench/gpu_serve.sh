#!/usr/bin/env bash
# `memra serve` on the GPU under bench/serve_bench.py's load (issue 16's serving numbers) in one
# device call: generates the model (PRESET[:DTYPE], default 9b bf16), starts the server with
# --parallel SLOTS on CUDA, waits for /health, replays Poisson arrivals at RATES and a burst, stops
# the server. Run from the repository root on the GPU machine:
#
#   [TEMPS="0 1"] bash bench/gpu_serve.sh build-gpu/gpu-bundle.tar.xz [PRESET[:DTYPE]] [SLOTS] [RATES] [SECONDS]
set -uo pipefail
bundle=${1:?usage: gpu_serve.sh BUNDLE.tar.xz [PRESET[:DTYPE]] [SLOTS] [RATES] [SECONDS]}
spec=${2:-9b}
slots=${3:-64}
rates=${4:-2,8}
seconds=${5:-30}
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
"$bin/memra" serve "$m" --backend cuda --parallel "$slots" --port $port --kernel-cache /tmp/memra-cache \
  > "$out/serve.log" 2>&1 &
pid=$!
start=$(date +%s)
get() { python3 -c "import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())" "$1"; }
until get "http://127.0.0.1:$port/health" > /dev/null 2>&1; do
  kill -0 $pid 2>/dev/null || { echo "memra serve exited:"; tail -20 "$out/serve.log"; exit 1; }
  [ $(( $(date +%s) - start )) -gt 400 ] && { echo "no /health after 400 s"; tail -20 "$out/serve.log"; kill $pid; exit 1; }
  sleep 1
done
echo "server ready after $(( $(date +%s) - start )) s"
grep "memra serve:" "$out/serve.log"
for temp in ${TEMPS:-0}; do
  python3 bench/serve_bench.py --url "http://127.0.0.1:$port" --rates "$rates" --duration "$seconds" --burst 64 \
    --temperature "$temp" | tee -a "$out/serve-bench.md"
done
get "http://127.0.0.1:$port/metrics" | grep -v "^#" | tee "$out/metrics.txt"
kill -TERM $pid
wait $pid
echo "memra serve exit code $?"
