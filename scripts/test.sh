#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest prints the summary line), then checks that the C++ /
# CUDA sources are clang-formatted (scripts/check_format.sh); fails if either fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build"
status=0
(cd "$root/build" && ctest --output-on-failure -j"$(nproc)") || status=1
"$root/scripts/check_format.sh" || status=1
exit $status
