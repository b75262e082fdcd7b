#!/usr/bin/env bash
# memra bench -o md|json|jsonl|csv in llama-bench's layouts (issue 12): the json array, the jsonl
# lines and the csv rows parse, with llama-bench's field names and types; the md table's rows all
# have the same width. -o xml and -r 0 are refused naming the flag (they printed markdown / 0.00).
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
command -v python3 >/dev/null || { echo "bench_output: skipped (no python3)"; exit 0; }
bench=("$memra" bench "$model" --backend cpu -p 16 -n 4 -r 2)
for fmt in md json jsonl csv; do
  "${bench[@]}" -o $fmt > "$tmp/out.$fmt" 2> "$tmp/err.txt"
  rc=$?
  [ $rc -eq 0 ] || { cat "$tmp/err.txt"; fail "-o $fmt: exit code $rc"; }
done
python3 - "$tmp" "$model" <<'PY' || fail "the outputs do not parse as llama-bench's"
import csv, json, sys
tmp, model = sys.argv[1:]
fields = ("build_commit,build_number,cpu_info,gpu_info,backends,model_filename,model_type,model_size,"
          "model_n_params,n_batch,n_ubatch,n_threads,cpu_mask,cpu_strict,poll,type_k,type_v,n_gpu_layers,"
          "n_cpu_moe,split_mode,main_gpu,no_kv_offload,flash_attn,devices,tensor_split,tensor_buft_overrides,"
          "load_mode,embeddings,no_op_offload,no_host,fit_target,fit_min_ctx,n_prompt,n_gen,n_depth,test_time,"
          "avg_ns,stddev_ns,avg_ts,stddev_ts").split(",")
ints = {"build_number", "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads", "poll",
        "n_gpu_layers", "n_cpu_moe", "main_gpu", "flash_attn", "no_op_offload", "fit_target", "fit_min_ctx",
        "n_prompt", "n_gen", "n_depth", "avg_ns", "stddev_ns"}
bools = {"cpu_strict", "no_kv_offload", "embeddings", "no_host"}
floats = {"avg_ts", "stddev_ts"}

def check(o, where):
    assert list(o.keys()) == fields + ["samples_ns", "samples_ts"], f"{where}: keys {list(o.keys())}"
    for k in fields:
        v = o[k]
        want = int if k in ints else bool if k in bools else (int, float) if k in floats else str
        assert isinstance(v, want) and not (want is int and isinstance(v, bool)), f"{where}: {k} = {v!r}"
    assert o["backends"] == "CPU" and o["model_filename"] == model, where
    assert o["model_type"] == "qwen35 2.4M all F32", f"{where}: {o['model_type']}"
    assert o["model_size"] > 0 and o["model_n_params"] > 0 and o["n_threads"] >= 1, where
    assert o["test_time"].endswith("Z") and "T" in o["test_time"], where
    assert len(o["samples_ns"]) == 2 and len(o["samples_ts"]) == 2, f"{where}: one sample per repetition"
    assert all(isinstance(s, int) and s > 0 for s in o["samples_ns"]), where
    assert all(isinstance(s, (int, float)) and s > 0 for s in o["samples_ts"]), where
    assert o["avg_ts"] > 0 and o["avg_ns"] > 0, where
    n = o["n_prompt"] + o["n_gen"]
    for ns, ts in zip(o["samples_ns"], o["samples_ts"]):
        assert abs(1e9 * n / ns - ts) <= 1e-3 * ts, f"{where}: t/s {ts} is not 1e9 * {n} / {ns}"

tests = [(16, 0), (0, 4)]  # (n_prompt, n_gen): pp16 then tg4
arr = json.load(open(f"{tmp}/out.json"))
assert isinstance(arr, list) and len(arr) == 2, f"json: {arr!r}"
for i, o in enumerate(arr):
    check(o, f"json[{i}]")
    assert (o["n_prompt"], o["n_gen"]) == tests[i], f"json[{i}]"
lines = [l for l in open(f"{tmp}/out.jsonl").read().split("\n") if l]
assert len(lines) == 2, f"jsonl: {len(lines)} lines"
for i, l in enumerate(lines):
    o = json.loads(l)
    check(o, f"jsonl line {i + 1}")
    assert (o["n_prompt"], o["n_gen"]) == tests[i]
rows = list(csv.reader(open(f"{tmp}/out.csv")))
assert rows[0] == fields, f"csv header: {rows[0]}"
assert len(rows) == 3 and all(len(r) == len(fields) for r in rows[1:]), "csv: a row per test, every field"
for r in rows[1:]:
    d = dict(zip(fields, r))
    int(d["avg_ns"]), float(d["avg_ts"]), int(d["model_size"])
    assert d["backends"] == "CPU"
md = [l for l in open(f"{tmp}/out.md").read().split("\n") if l.startswith("|")]
assert len(md) == 4, f"md: {md}"
assert len({len(l) for l in md}) == 1, "md: rows of different widths:\n" + "\n".join(md)
head = [c.strip() for c in md[0].split("|")[1:-1]]
assert head == ["model", "size", "params", "backend", "threads", "test", "t/s"], f"md columns: {head}"
for l in md[2:]:
    cell = l.split("|")[-2]
    assert cell.endswith(" ") and cell[-2] != " " and "±" in cell, f"md: t/s not right-aligned: {l!r}"
PY
# Refused values: exit 1 or 2 and a message naming the flag.
"${bench[@]}" -o xml > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
{ [ $rc -eq 1 ] || [ $rc -eq 2 ]; } || { cat "$tmp/err.txt"; fail "-o xml: exit code $rc"; }
# The options layer refuses it while parsing (--output, the -o alias's option); the bench body
# refuses it too ("-o xml: expected md, json, jsonl or csv") if a declaration ever lets it through.
grep -qE -- "(--output option: 'xml' is not one of md, json, jsonl, csv|-o xml: expected md, json, jsonl or csv)" \
  "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "-o xml: flag and values not named"; }
[ -s "$tmp/out.txt" ] && { cat "$tmp/out.txt"; fail "-o xml: printed a report"; }
"$memra" bench "$model" --backend cpu -p 16 -n 4 -r 0 > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
{ [ $rc -eq 1 ] || [ $rc -eq 2 ]; } || { cat "$tmp/err.txt"; fail "-r 0: exit code $rc"; }
grep -qE -- "(--repetitions option: 0 is out of range: expected 1 to|-r must be >= 1)" "$tmp/err.txt" ||
  { cat "$tmp/err.txt"; fail "-r 0: flag and limit not named"; }
echo "bench_output: ok"
