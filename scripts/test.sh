#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest prints the summary line).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build"
cd "$root/build" && ctest --output-on-failure -j"$(nproc)"
