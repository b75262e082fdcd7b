#!/usr/bin/env bash
# Sets up, builds and runs memra's main job on the embedded default model.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build" >/dev/null
memra=$root/build/tools/memra
mkdir -p "$root/build/models"
"$memra" gen --preset tiny --dtype bf16 --seed 1 -o "$root/build/models/qwen35-tiny.gguf"
"$memra" inspect "$root/build/models/qwen35-tiny.gguf"
