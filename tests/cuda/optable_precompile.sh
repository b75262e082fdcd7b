#!/usr/bin/env bash
# OpTable_test --precompile-kernels=DIR, the op table's cubins compiled without a GPU for the bundle
# (bench/make_gpu_bundle.sh): one TEST's rows compiled by NVRTC into a fresh cache folder, then a
# second run finds every module there and compiles none. Skipped (77) without NVRTC.
# Args: OPTABLE_TEST.
set -uo pipefail
bin=${1:?usage: optable_precompile.sh OPTABLE_TEST}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { "$bin" --precompile-kernels="$tmp/cache" --gtest_filter=OpTableTest.Norms > "$tmp/$1.txt" 2>&1; }

run first || { cat "$tmp/first.txt"; fail "the first precompile run failed"; }
if grep -q "cannot precompile" "$tmp/first.txt"; then
  grep "cannot precompile" "$tmp/first.txt"
  exit 77
fi
line=$(grep -m1 "precompiled:" "$tmp/first.txt") || { cat "$tmp/first.txt"; fail "no precompiled line"; }
echo "first:  $line"
n=$(echo "$line" | sed -n 's/.*: \([0-9]*\) kernel modules:.*/\1/p')
[ -n "$n" ] && [ "$n" -gt 0 ] || fail "no module compiled: $line"
echo "$line" | grep -q " $n compiled " || fail "the first run did not compile its $n modules: $line"
echo "$line" | grep -q " 0 rows not selectable" || fail "rows the sm_90 preset cannot select: $line"
cubins=$(find "$tmp/cache" -name '*.cubin' | wc -l)
[ "$cubins" -eq "$n" ] || fail "$cubins cubins in the cache for $n modules"
# Nothing ran: no row of the table was printed.
grep -q "^op  *dtype" "$tmp/first.txt" && fail "precompiling ran the table"

run second || { cat "$tmp/second.txt"; fail "the second precompile run failed"; }
line=$(grep -m1 "precompiled:" "$tmp/second.txt")
echo "second: $line"
echo "$line" | grep -q " 0 compiled " || fail "the second run compiled again: $line"
echo "$line" | grep -q " $n from the disk cache" || fail "the second run did not find its $n modules: $line"

# A flag value that is missing is refused.
"$bin" --precompile-kernels= > "$tmp/bad.txt" 2>&1 && fail "--precompile-kernels= accepted"
grep -q "unknown argument" "$tmp/bad.txt" || { cat "$tmp/bad.txt"; fail "--precompile-kernels= not named"; }
echo "ok"
