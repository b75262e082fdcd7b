#!/usr/bin/env bash
# memra bench --batch (issue 15 item 6): llama-batched-bench's table (PP, TG, B, N_KV = B * (PP +
# TG), times and tok/s) measured through the scheduler on the batched engine (BatchedSlots), one row
# per -p and B with positive times and rates that follow from them; -o jsonl / json / csv carry the
# same rows under llama-batched-bench's -jsonl keys. Refusals exit 1 naming the flag: --backend cuda
# without a GPU, -d, -p 0, and --batch values outside 1..256 (the
# options layer). Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
command -v python3 >/dev/null || { echo "bench_batch: skipped (no python3)"; exit 0; }
bench=("$memra" bench "$model" --backend cpu --batch 1,4 -p 16 -n 4 -r 1)
for fmt in md json jsonl csv; do
  "${bench[@]}" -o $fmt >"$tmp/out.$fmt" 2>"$tmp/err.$fmt" || { cat "$tmp/err.$fmt"; fail "-o $fmt: exit code $?"; }
done
grep -q "memra bench: --batch on .*: 5 slots of context .* (one for the TTFT probe)" "$tmp/err.md" || { cat "$tmp/err.md"; fail "no slots line"; }
# The TTFT table on stderr: one row per B, positive times, the ratio theirs.
python3 - "$tmp/err.md" <<'PY' || fail "no TTFT table"
import sys
rows = [l for l in open(sys.argv[1]) if l.startswith("|") and not l.startswith("|--")]
assert rows[0].split("|")[1:-1] == ["    PP ", "    B ", " TTFT alone ms ", " TTFT beside B ms ", " ratio "], rows[0]
assert len(rows) == 3, rows
for r, b in zip(rows[1:], (1, 4)):
    pp, bb, alone, beside, ratio = [float(x) for x in r.split("|")[1:-1]]
    assert (pp, bb) == (16, b) and alone > 0 and beside > 0, r
    assert abs(ratio - beside / alone) <= 0.01 + 0.01 * ratio, r
PY
python3 - "$tmp" <<'PY' || fail "the --batch outputs are not llama-batched-bench's"
import csv, json, sys
tmp = sys.argv[1]
md = [l for l in open(f"{tmp}/out.md").read().split("\n") if l]
assert all(l.startswith("|") for l in md), f"md: a line outside the table: {md}"
assert md[0] == ("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |"), md[0]
assert md[1] == "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|", md[1]
assert len(md) == 4, f"md: expected one row per B: {md}"
assert len({len(l) for l in md}) == 1, "md: rows of different widths:\n" + "\n".join(md)
want = [(16, 4, 1, 20), (16, 4, 4, 80)]
for l, w in zip(md[2:], want):
    c = [x.strip() for x in l.split("|")[1:-1]]
    assert tuple(int(x) for x in c[:4]) == w, f"md row {l!r}: expected PP, TG, B, N_KV {w}"
    t_pp, s_pp, t_tg, s_tg, t, s = map(float, c[4:])
    assert t_pp > 0 and t_tg > 0 and t > 0 and s_pp > 0 and s_tg > 0 and s > 0, f"md row {l!r}: a time or rate is 0"
keys = ["n_kv_max", "n_batch", "n_ubatch", "flash_attn", "is_pp_shared", "n_gpu_layers", "n_threads",
        "n_threads_batch", "pp", "tg", "pl", "n_kv", "t_pp", "speed_pp", "t_tg", "speed_tg", "t", "speed"]

def check(o, w, where):
    assert list(o.keys()) == keys, f"{where}: keys {list(o.keys())}"
    assert (o["pp"], o["tg"], o["pl"], o["n_kv"]) == w, f"{where}: {o}"
    assert o["t_pp"] > 0 and o["t_tg"] > 0 and o["n_threads"] >= 1, where
    b, pp, tg = o["pl"], o["pp"], o["tg"]
    for got, exp in ((o["speed_pp"], b * pp / o["t_pp"]), (o["speed_tg"], b * tg / o["t_tg"]),
                     (o["speed"], b * (pp + tg) / o["t"]), (o["t"], o["t_pp"] + o["t_tg"])):
        assert abs(got - exp) <= 1e-3 * exp + 1e-5, f"{where}: {got} is not {exp}"

arr = json.load(open(f"{tmp}/out.json"))
assert isinstance(arr, list) and len(arr) == 2, f"json: {arr!r}"
for i, (o, w) in enumerate(zip(arr, want)):
    check(o, w, f"json[{i}]")
lines = [l for l in open(f"{tmp}/out.jsonl").read().split("\n") if l]
assert len(lines) == 2, f"jsonl: {len(lines)} lines"
for i, (l, w) in enumerate(zip(lines, want)):
    check(json.loads(l), w, f"jsonl line {i + 1}")
rows = list(csv.reader(open(f"{tmp}/out.csv")))
assert rows[0] == keys and len(rows) == 3, f"csv: {rows}"
for i, (r, w) in enumerate(zip(rows[1:], want)):
    check({k: (float(v) if "." in v else int(v)) for k, v in zip(keys, r)}, w, f"csv row {i + 1}")
PY
refused() {  # refused PATTERN -- memra args...
  local pattern=$1
  shift 2
  "$memra" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
  local rc=$?
  [ $rc -eq 1 ] || { cat "$tmp/err.txt"; fail "memra $*: exit code $rc, expected 1"; }
  grep -q -- "$pattern" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "memra $*: no \"$pattern\" in the error"; }
  [ -s "$tmp/out.txt" ] && { cat "$tmp/out.txt"; fail "memra $*: printed a report"; }
  return 0
}
# Without a GPU (CI) --backend cuda is refused by name before the model is read.
if ! command -v nvidia-smi >/dev/null 2>&1; then
  refused "--backend cuda: no usable CUDA GPU here.*use --backend cpu" -- \
    bench "$model" --backend cuda --batch 1,4 -p 16 -n 4
fi
refused "--batch and -d/--n-depth" -- bench "$model" --backend cpu --batch 2 -p 16 -n 4 -d 8
# --profile: the table, then the engine's time per op kind on stderr (the step's ops among them).
"$memra" bench "$model" --backend cpu --batch 2 -p 16 -n 4 -r 1 --profile >"$tmp/prof.md" 2>"$tmp/prof.err" ||
  { cat "$tmp/prof.err"; fail "--batch --profile exited $?"; }
grep -q "^|" "$tmp/prof.md" || fail "--batch --profile printed no table"
grep -q "^ *paged_attention " "$tmp/prof.err" || { cat "$tmp/prof.err"; fail "--batch --profile: no paged_attention row"; }
# --temp: every request samples (on the batched engine's sampler); a negative one is refused.
"$memra" bench "$model" --backend cpu --batch 2 -p 16 -n 4 -r 1 --temp 0.8 >"$tmp/temp.md" 2>"$tmp/temp.err" ||
  { cat "$tmp/temp.err"; fail "--batch --temp 0.8 exited $?"; }
[ "$(grep -c '^| *16 ' "$tmp/temp.md")" = 1 ] || { cat "$tmp/temp.md"; fail "--temp 0.8: no row"; }
refused "for the --temp option" -- bench "$model" --backend cpu --batch 2 -p 16 -n 4 --temp -1
refused "for the --temp option" -- bench "$model" --backend cpu --batch 2 -p 16 -n 4 --temp nan
# --temp without --batch would be ignored (the pp / tg tests are greedy): refused; so is a run
# that measures nothing.
refused "--temp applies to --batch tests only" -- bench "$model" --backend cpu -p 8 -n 4 --temp 0.5
refused "nothing to measure" -- bench "$model" --backend cpu -p 0 -n 0
refused "-p 0 with --batch" -- bench "$model" --backend cpu --batch 2 -p 0,16 -n 4
for bad in 0 257 1,x; do
  "$memra" bench "$model" --backend cpu --batch $bad -p 16 -n 4 >"$tmp/out.txt" 2>"$tmp/err.txt"
  rc=$?
  { [ $rc -eq 1 ] || [ $rc -eq 2 ]; } || { cat "$tmp/err.txt"; fail "--batch $bad: exit code $rc"; }
  grep -q -- "--batch option" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "--batch $bad: the flag is not named"; }
done
echo "bench_batch: ok"
