#!/usr/bin/env bash
# A kernel's loops as the GPU runs them, without a GPU: compiles one module (a key as the plan and
# `memra opt` print it, e.g. 'GemvQuant.cu<GQ_FMT=12,GQ_K=21504,...>::gemv_q') with nvcc for sm_90,
# prints ptxas's registers / spills / shared memory, and for each loop of the entry (a label and the
# branch back to it) its instruction count and commonest opcodes, largest first. For weighing a
# kernel change on this machine before a device call (bench/RESULTS.md session 42: the 31B down's
# 608 -> 568 instructions a chunk). A development aid; the count is static (a branch's skipped side
# is counted too).
#
#   bash bench/sass_loop.sh 'FILE.cu<DEF=V,...>::ENTRY' [ARCH (default sm_90)] [TOP (default 12)]
#
# nvdisasm: from PATH or the CUDA toolkit; else the `nvidia-cuda-nvdisasm` wheel from PyPI, unpacked
# once into build/.nvdisasm (test-only tooling, as numpy and gguf are).
set -euo pipefail
key=${1:?usage: sass_loop.sh 'FILE.cu<DEF=V,...>::ENTRY' [ARCH] [TOP]}
arch=${2:-sm_90}
top=${3:-12}
root=$(cd "$(dirname "$0")/.." && pwd)
file=${key%%<*}
entry=${key##*::}
defs=${key#*<}
defs=${defs%>*}
[ "$file" != "$key" ] && [ "$entry" != "$key" ] || { echo "sass_loop.sh: expected FILE.cu<DEFS>::ENTRY, got $key" >&2; exit 2; }
src=$root/kernels/cuda/$file
[ -f "$src" ] || { echo "sass_loop.sh: no kernel source $src" >&2; exit 2; }
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
[ -n "$nvcc" ] || { echo "sass_loop.sh: no nvcc" >&2; exit 2; }
nvdisasm=$(command -v nvdisasm || ls "$(dirname "$nvcc")/nvdisasm" 2>/dev/null || true)
if [ -z "$nvdisasm" ]; then
  cache=$root/build/.nvdisasm
  nvdisasm=$(find "$cache" -name nvdisasm -type f 2>/dev/null | head -1 || true)
  if [ -z "$nvdisasm" ]; then
    mkdir -p "$cache"
    python3 -m pip download --no-deps -q nvidia-cuda-nvdisasm -d "$cache" >&2
    (cd "$cache" && python3 -m zipfile -e ./*.whl .)
    nvdisasm=$(find "$cache" -name nvdisasm -type f | head -1)
    chmod +x "$nvdisasm"
  fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=()
IFS=',' read -ra kv <<< "$defs"
for d in "${kv[@]}"; do [ -n "$d" ] && flags+=("-D$d"); done
"$nvcc" -cubin -arch="$arch" -std=c++17 -I"$root/kernels/cuda" "${flags[@]}" -Xptxas -v "$src" -o "$work/k.cubin" \
  2> "$work/ptxas.txt" || { cat "$work/ptxas.txt" >&2; exit 1; }
awk -v e="$entry" '/Compiling entry function/ { on = index($0, "'"'"'" e "'"'"'") > 0 } on && /Used|spill/' "$work/ptxas.txt" |
  sed 's/^ptxas info *: */  /'
"$nvdisasm" -c "$work/k.cubin" > "$work/all.sass"
awk -v e="$entry" '$0 ~ "^\\.text\\." e ":" { on = 1; next } on && /^\.text\./ { on = 0 } on' "$work/all.sass" > "$work/k.sass"
python3 - "$work/k.sass" "$top" <<'EOF'
import re, sys
from collections import Counter
lines = open(sys.argv[1]).read().splitlines()
top = int(sys.argv[2])
labels, insts = {}, []  # label -> index of the next instruction; (opcode, branch target)
for line in lines:
    m = re.match(r'^(\.L_x_\d+):', line)
    if m:
        labels[m.group(1)] = len(insts)
        continue
    m = re.match(r'^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9]*(?:\.[A-Z0-9_.]+)?)(.*)$', line)
    if m:
        t = re.search(r'`\((\.L_x_\d+)\)', m.group(2))
        insts.append((m.group(1), t.group(1) if t else None))
print(f"  {len(insts)} instructions in the entry")
loops = []
for i, (op, target) in enumerate(insts):
    if op.startswith('BRA') and target in labels and labels[target] <= i:
        loops.append((labels[target], i))
for lo, hi in sorted(set(loops), key=lambda r: r[0] - r[1])[:4]:
    ops = Counter(op for op, _ in insts[lo:hi + 1])
    common = ', '.join(f"{n} {o}" for o, n in ops.most_common(top))
    print(f"  loop of {hi - lo + 1} instructions (#{lo}..#{hi}): {common}")
EOF
