#!/usr/bin/env bash
# Gemma 4 end to end on the CLI (issue 18 items 5-6): `memra gen --preset gemma4-tiny` writes a
# gemma4 model with Gemma's vocabulary and turn template, `memra run --chat` renders and answers,
# and `memra serve` answers the OpenAI client (tests/server/chat_serve_test.py). Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
m=$tmp/gemma4-tiny-q8_0.gguf
"$memra" gen --preset gemma4-tiny --dtype q8_0 --quiet -o "$m" > "$tmp/gen.log" 2>&1 || fail "gen: $(cat "$tmp/gen.log")"
grep -q "wrote .*gemma4 gemma4-tiny" "$tmp/gen.log" || fail "gen output: $(cat "$tmp/gen.log")"
"$memra" run -m "$m" --chat -p "What is the capital of France?" -n 8 --temp 0 > "$tmp/run.txt" 2> "$tmp/run.err" ||
  fail "run --chat: $(cat "$tmp/run.err")"
# <bos> <|turn> user \n What ▁is ▁the ▁capital ▁of ▁France ? <turn|> \n <|turn> model \n <|channel>
# thought \n <channel|>: the one-message render, the words single tokens of the vocabulary.
grep -q "prompt 20 tokens" "$tmp/run.err" || fail "run --chat prompt: $(cat "$tmp/run.err")"
python3 -c "import openai" 2>/dev/null || fail "the openai Python client is missing (scripts/setup.sh installs it)"
# <bos> <|turn> user \n Hello <turn|> \n <|turn> model \n <|channel> thought \n <channel|>: 14 tokens.
TMPDIR=$tmp timeout 300 python3 "$root/tests/server/chat_serve_test.py" "$memra" "$m" gemma4 14 ||
  fail "chat_serve_test.py failed"
