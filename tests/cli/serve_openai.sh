#!/usr/bin/env bash
# memra serve (issue 16) through the official OpenAI Python client: tests/server/openai_test.py
# starts its servers on 127.0.0.1 (the demo model, CPU) and stops them. Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
python3 -c "import openai" 2>/dev/null || fail "the openai Python client is missing (scripts/setup.sh installs it)"
TMPDIR=$tmp timeout 600 python3 "$root/tests/server/openai_test.py" "$memra" "$root/models/demo/qwen35-demo-q8_0.gguf" ||
  fail "openai_test.py failed"
