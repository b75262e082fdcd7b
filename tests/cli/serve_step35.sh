#!/usr/bin/env bash
# Step 3.5 end to end on the CLI (issue 19 items 4-5): `memra gen --preset step35-tiny` writes a
# step35 model with a byte-level BPE vocabulary and a ChatML template, `memra run --chat` renders
# and answers, and `memra serve` answers the OpenAI client (tests/server/chat_serve_test.py).
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
m=$tmp/step35-tiny-q8_0.gguf
"$memra" gen --preset step35-tiny --dtype q8_0 --quiet -o "$m" > "$tmp/gen.log" 2>&1 || fail "gen: $(cat "$tmp/gen.log")"
grep -q "wrote .*step35 step35-tiny" "$tmp/gen.log" || fail "gen output: $(cat "$tmp/gen.log")"
"$memra" run -m "$m" --chat -p "What is the capital of France?" -n 8 --temp 0 > "$tmp/run.txt" 2> "$tmp/run.err" ||
  fail "run --chat: $(cat "$tmp/run.err")"
# <|im_start|> u s e r \n, the 30 bytes of the question, <|im_end|> \n <|im_start|> a s s i s t a n t \n:
# a byte vocabulary without merges, one token per byte.
grep -q "prompt 49 tokens" "$tmp/run.err" || fail "run --chat prompt: $(cat "$tmp/run.err")"
python3 -c "import openai" 2>/dev/null || fail "the openai Python client is missing (scripts/setup.sh installs it)"
# <|im_start|> user (4) \n Hello (5) <|im_end|> \n <|im_start|> assistant (9) \n: 24 tokens.
TMPDIR=$tmp timeout 300 python3 "$root/tests/server/chat_serve_test.py" "$memra" "$m" step35 24 ||
  fail "chat_serve_test.py failed"
