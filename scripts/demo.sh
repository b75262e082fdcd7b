#!/usr/bin/env bash
# Sets up, builds and runs memra's main job: text generation with `memra run` on the CPU
# executor, from the embedded default model (the tiny random-weight qwen35 fixture model in
# tests/data/models; a trained demo model replaces it in a later issue).
#   scripts/demo.sh [MODEL.gguf] [PROMPT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build" >/dev/null
memra=$root/build/tools/memra
model=${1:-$root/tests/data/models/qwen35-tiny-f32.gguf}
prompt=${2:-The quick brown fox jumps over the lazy dog. }
"$memra" run "$model" -p "$prompt" -n 64
