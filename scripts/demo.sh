#!/usr/bin/env bash
# Sets up, builds and runs memra's main job: text generation with `memra run` on the CPU
# executor, from the trained demo model models/demo/qwen35-demo-q8_0.gguf (8.4M-parameter qwen35
# trained on the KJV Bible + fortune cookies, see tools/train_demo/). The random-weight fixtures in
# tests/data/models stay for the numerics tests.
#   scripts/demo.sh [MODEL.gguf] [PROMPT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build" memra >/dev/null
memra=$root/build/tools/memra
model=${1:-$root/models/demo/qwen35-demo-q8_0.gguf}
prompt=${2:-And God said unto Moses,}
"$memra" run "$model" -p "$prompt" -n 64
