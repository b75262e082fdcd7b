#!/usr/bin/env bash
# The model-family registry through the CLI: memra lower / compile / run / bench / perplexity all
# pick the family from general.architecture (qwen35 and qwen35moe lower and run; a planned family
# says "not supported yet"), an unknown one lists what memra supports. Args: MEMRA DATA_DIR SHARED_DIR.
set -euo pipefail
memra=$1
data=$2
shared=$3
model=$data/models/qwen35-tiny-f32.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. qwen35 lowers.
"$memra" lower "$model" -o "$tmp/tiny.mir" 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; fail "lower failed"; }
grep -q '^module attributes {arch = "qwen35"' "$tmp/tiny.mir" || fail "no qwen35 module"

# expect_error CMD... : the command fails and its stderr holds $want.
expect_error() {
  if "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; then fail "$* succeeded"; fi
  grep -qF "$want" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "$*: no \"$want\""; }
}

# 2. An unknown architecture: the tiny model with general.architecture "falcon" (same length as
# "qwen35", so the header stays the same size).
if command -v python3 >/dev/null; then
  python3 - "$model" "$tmp/falcon.gguf" <<'PY'
import struct, sys
b = open(sys.argv[1], 'rb').read()
key = b'general.architecture'
old = key + struct.pack('<IQ', 8, 6) + b'qwen35'
assert b.count(old) == 1, 'general.architecture value not found'
open(sys.argv[2], 'wb').write(b.replace(old, key + struct.pack('<IQ', 8, 6) + b'falcon'))
PY
  want="unsupported architecture 'falcon': memra supports qwen35"
  expect_error "$memra" lower "$tmp/falcon.gguf"
  expect_error "$memra" compile "$tmp/falcon.gguf" --arch cpu -o "$tmp/falcon.plan"
  expect_error "$memra" run "$tmp/falcon.gguf" --backend cpu --tokens 1,2 -n 1
  expect_error "$memra" bench "$tmp/falcon.gguf" --backend cpu -p 4 -n 0 -r 1
  echo "some text to score" >"$tmp/text.txt"
  expect_error "$memra" perplexity "$tmp/falcon.gguf" -f "$tmp/text.txt" --backend cpu
else
  echo "python3 not found: unknown-architecture case skipped"
fi

# 3. qwen35moe: lowered through the registry (the copy in tests/data).
moe=$data/models/qwen35moe-tiny-q8_0.gguf
if [ -f "$moe" ]; then
  "$memra" lower "$moe" >"$tmp/moe.mir" || { echo "FAIL: memra lower $moe"; exit 1; }
  grep -q 'moe_route' "$tmp/moe.mir" || { echo "FAIL: no moe_route in the lowered qwen35moe module"; exit 1; }
  grep -q 'arch = "qwen35moe"' "$tmp/moe.mir" || { echo "FAIL: qwen35moe attributes missing"; exit 1; }
  "$memra" run "$moe" --backend cpu --tokens 1,87,107 -n 4 >"$tmp/moe-run.txt" 2>"$tmp/err.txt" ||
    { cat "$tmp/err.txt"; fail "memra run of qwen35moe on the cpu failed"; }
else
  echo "$moe not found: qwen35moe case skipped"
fi
echo "lower_families: ok"
