#!/usr/bin/env bash
# memra serve refuses what it cannot serve before listening, exit 1 with the reason: an address
# that is not an IP, a port already taken, a missing model, --backend cuda without a GPU.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
demo=$data/../../models/demo/qwen35-demo-q8_0.gguf
refused() {  # refused PATTERN -- memra args...
  local pattern=$1
  shift 2
  timeout 30 "$memra" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
  local rc=$?
  [ $rc -eq 1 ] || { cat "$tmp/err.txt"; fail "memra $*: exit code $rc, expected 1"; }
  grep -q -- "$pattern" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "memra $*: no \"$pattern\" in the error"; }
}
refused "--host not-an-address: not an IP address" -- serve "$demo" --backend cpu --host not-an-address --port 0
# A port in use: hold one with a listening socket, then ask for it.
port_file=$tmp/port
python3 - "$port_file" <<'PY' &
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
time.sleep(20)
PY
holder=$!
for _ in $(seq 100); do [ -s "$port_file" ] && break; sleep 0.1; done
refused "cannot listen on 127.0.0.1:$(cat "$port_file")" -- serve "$demo" --backend cpu --port "$(cat "$port_file")"
kill $holder 2>/dev/null
if ! command -v nvidia-smi >/dev/null 2>&1; then
  refused "--backend cuda: no usable CUDA GPU here" -- serve "$demo" --backend cuda --port 0
fi
refused "does not exist\|No such file\|cannot open\|not found" -- serve "$tmp/none.gguf" --backend cpu --port 0
echo "serve_errors: ok"
