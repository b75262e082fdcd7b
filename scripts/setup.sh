#!/usr/bin/env bash
# Installs the Debian packages memra builds and tests with. Idempotent; silent when all is there.
set -euo pipefail
pkgs=(cmake g++ make ninja-build libabsl-dev llvm-14-dev llvm-14-tools libgtest-dev libgmock-dev
      libicu-dev zlib1g-dev libtinfo-dev clang-14 clang-format-14 libclang-rt-14-dev python3
      libboost-dev nlohmann-json3-dev python3-pip)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq >/dev/null
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Test-only Python tools from PyPI: the official OpenAI client drives `memra serve` in
# tests/server (Debian's Python may be externally managed: then --break-system-packages).
if ! python3 -c "import openai" 2>/dev/null; then
  echo "setup: installing the openai Python client (tests only)"
  python3 -m pip install -q openai 2>/dev/null || python3 -m pip install -q --break-system-packages openai ||
    echo "setup: could not install the openai client (no PyPI?): tests/cli/serve_openai.sh will fail and say so"
fi
