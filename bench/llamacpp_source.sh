#!/usr/bin/env bash
# Packs the llama.cpp source the issues compare against (b10573 = ngxson/llama.cpp 3f545bec, a
# maintainer mirror of upstream) into build-llamacpp/llamacpp-src.tar.xz (git-ignored, never
# committed): the top-level CMake files, cmake/, ggml (headers, core, the CPU and CUDA backends),
# src, include, common, tools, vendor and app. Carry it with the GPU bundle; bench/gpu_llamacpp.sh
# builds it there.
#
#   bash bench/llamacpp_source.sh MIRROR_GIT_DIR [COMMIT]
#   (MIRROR_GIT_DIR: the search tool's `fetch github:ngxson/llama.cpp` result, a bare repository)
set -euo pipefail
git_dir=${1:?usage: llamacpp_source.sh MIRROR_GIT_DIR [COMMIT]}
commit=${2:-3f545bec}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build-llamacpp
mkdir -p "$out"
paths=(CMakeLists.txt cmake ggml/CMakeLists.txt ggml/cmake ggml/include src include common tools vendor app)
top=$(git --git-dir="$git_dir" ls-tree --name-only "$commit" ggml/src/ | grep -v -E 'ggml/src/ggml-[a-z]+$' || true)
# Not the web UI, server or CLI (8.3 + 1.5 MB of sources gpu_llamacpp.sh's LLAMA_BUILD_SERVER=OFF never
# builds): the tarball, the bundle and the working tree must fit a device call's 64 MiB together.
git --git-dir="$git_dir" archive --format=tar "$commit" "${paths[@]}" $top ggml/src/ggml-cpu ggml/src/ggml-cuda \
  ':(exclude)tools/ui' ':(exclude)tools/server' ':(exclude)tools/cli' |
  XZ_OPT=-9 xz > "$out/llamacpp-src.tar.xz"
echo "$out/llamacpp-src.tar.xz: $(stat -c %s "$out/llamacpp-src.tar.xz" | awk '{printf "%.1f MB", $1/1e6}') (llama.cpp $commit)"
