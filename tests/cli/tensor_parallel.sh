#!/usr/bin/env bash
# --tp (issue 21) on the CPU backend, where the ranks are threads of one process: memra run, the
# batched engine (--prompts-file) and memra serve split the model over 2 ranks and generate what
# the unsplit model generates (greedy); a plan compiled with --tp records it and runs split; a
# plan's tp and a flag that disagree, and a tp nothing divides by, are errors naming the problem.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
q8=$data/models/qwen35-tiny-q8_0.gguf

ids() { grep '^generated ids:' "$1" | head -1; }

# 1. memra run: the same greedy ids, and the load line says the ranks.
for m in "$model" "$q8" "$data/models/qwen35moe-tiny-q8_0.gguf" "$data/models/step35-tiny-q8_0.gguf"; do
  for tp in 1 2; do
    "$memra" run "$m" --backend cpu --tp $tp -p "The quick brown fox" -n 12 --temp 0 --print-token-ids \
      >"$tmp/r$tp.txt" 2>"$tmp/r$tp.err" || { cat "$tmp/r$tp.err"; fail "run --tp $tp on $m"; }
  done
  [ -n "$(ids "$tmp/r1.txt")" ] || fail "no ids printed"
  [ "$(ids "$tmp/r1.txt")" = "$(ids "$tmp/r2.txt")" ] ||
    fail "$m: --tp 2 generated $(ids "$tmp/r2.txt"), unsplit $(ids "$tmp/r1.txt")"
  grep -q "2 tensor-parallel ranks, each a cpu executor" "$tmp/r2.err" || { cat "$tmp/r2.err"; fail "load line"; }
done

# 2. The batched engine (paged KV cache, per-slot states), every family: each prompt's continuation
# as unsplit.
printf 'Hello there\nThe quick brown fox\nOnce upon a time\n' > "$tmp/p.txt"
for m in qwen35-tiny-q8_0 qwen35moe-tiny-q8_0 step35-tiny-q8_0 gemma4-tiny-q8_0 gemma4e-tiny-q8_0; do
  for tp in 1 2; do
    "$memra" run "$data/models/$m.gguf" --backend cpu --tp $tp --prompts-file "$tmp/p.txt" -np 2 -n 8 --temp 0 \
      >"$tmp/b$tp.out" 2>"$tmp/b$tp.err" || { cat "$tmp/b$tp.err"; fail "$m --prompts-file --tp $tp"; }
  done
  cmp -s "$tmp/b1.out" "$tmp/b2.out" || { diff "$tmp/b1.out" "$tmp/b2.out"; fail "$m --prompts-file: tp 2 differs"; }
done

# 3. A plan compiled for 2 ranks runs split; another --tp is refused naming both.
"$memra" compile "$q8" --arch cpu --tp 2 -o "$tmp/t2.plan" >/dev/null 2>"$tmp/c.txt" || { cat "$tmp/c.txt"; fail "compile"; }
grep -aq "tp = 2" "$tmp/t2.plan" || fail "the plan does not record tp = 2"
"$memra" run "$tmp/t2.plan" --backend cpu -p "The quick brown fox" -n 12 --temp 0 --print-token-ids \
  >"$tmp/p2.txt" 2>"$tmp/p2.err" || { cat "$tmp/p2.err"; fail "run the tp 2 plan"; }
"$memra" run "$q8" --backend cpu -p "The quick brown fox" -n 12 --temp 0 --print-token-ids >"$tmp/p1.txt" 2>/dev/null
[ "$(ids "$tmp/p1.txt")" = "$(ids "$tmp/p2.txt")" ] || fail "the tp 2 plan generated $(ids "$tmp/p2.txt")"
if "$memra" run "$tmp/t2.plan" --backend cpu --tp 4 -p "Hi" -n 1 2>"$tmp/e.txt"; then fail "accepted --tp 4 on a tp 2 plan"; fi
grep -q "is a plan compiled for 2 ranks; compile it with --tp 4" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "plan message"; }

# 4. Nothing divides by 3: an error that says why.
if "$memra" run "$q8" --backend cpu --tp 3 -p "Hi" -n 1 2>"$tmp/e.txt"; then fail "accepted --tp 3"; fi
grep -q "nothing in the module can be cut into 3 parts" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "tp 3 message"; }

# 4b. memra bench --tp 1,2: each split's tests in one table, then their scaling against tp 1; the
# batched bench takes one split.
"$memra" bench "$q8" --backend cpu -t 2 --tp 1,2 -p 16 -n 8 -r 1 >"$tmp/b.md" 2>"$tmp/b.err" ||
  { cat "$tmp/b.err"; fail "bench --tp 1,2"; }
[ "$(grep -c '| *[12] | *\(pp16\|tg8\) |' "$tmp/b.md")" = 4 ] || { cat "$tmp/b.md"; fail "bench rows per split"; }
grep -q "tensor-parallel scaling" "$tmp/b.err" && grep -Eq '^\| tg8 +\|   2 \|.*x \|.*% \|$' "$tmp/b.err" ||
  { cat "$tmp/b.err"; fail "bench scaling table"; }
if "$memra" bench "$q8" --backend cpu --tp 1,2 --batch 2 -p 8 -n 4 2>"$tmp/e.txt" >/dev/null; then
  fail "accepted --batch with two --tp values"
fi
grep -q -- "--batch takes one --tp value" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "batch tp message"; }

# 5. memra serve --tp 2 answers greedy completions as the unsplit server does, its prefix cache
# included.
root=$(cd "$(dirname "$0")/../.." && pwd)
python3 - "$memra" "$root/models/demo/qwen35-demo-q8_0.gguf" <<'PY' || fail "serve --tp"
import json, os, socket, subprocess, sys, time, urllib.request
memra, model = sys.argv[1], sys.argv[2]
def port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
def reply(tp):
    p = port()
    log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tp-serve-{p}.log"), "w+")
    proc = subprocess.Popen([memra, "serve", model, "--backend", "cpu", "-t", "2", "-np", "2", "--tp", str(tp),
                             "--cache-ram", "64", "--port", str(p)], stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{p}"
        deadline = time.time() + 60
        while True:
            if proc.poll() is not None or time.time() > deadline:
                log.seek(0)
                raise SystemExit(f"serve --tp {tp} did not start:\n{log.read()}")
            try:
                urllib.request.urlopen(base + "/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        def complete(prompt, **extra):
            body = json.dumps({"prompt": prompt, "max_tokens": 12, "temperature": 0, **extra}).encode()
            req = urllib.request.Request(base + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            return json.loads(urllib.request.urlopen(req, timeout=60).read())["choices"][0]["text"]
        def hits():
            text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
            return float(next(l.split()[1] for l in text.splitlines() if l.startswith("memra_prefix_cache_hits_total")))
        short = complete("The quick brown fox")
        # The prefix cache per rank: a chat's second turn resumes from the first's snapshot (each
        # rank's own state shards) and says what it says without the cache.
        def chat(messages, **extra):
            body = json.dumps({"messages": messages, "max_tokens": 12, "temperature": 0, **extra}).encode()
            req = urllib.request.Request(base + "/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            return json.loads(urllib.request.urlopen(req, timeout=60).read())["choices"][0]["message"]["content"]
        system = "You are a careful reader of old books. Answer in one short sentence, quote the text. " * 3
        turn = [{"role": "system", "content": system}, {"role": "user", "content": "What was made first?"}]
        turn += [{"role": "assistant", "content": chat(turn)}, {"role": "user", "content": "And after that?"}]
        before = hits()
        cached = chat(turn)
        if hits() != before + 1:
            raise SystemExit(f"tp {tp}: the second turn did not hit the prefix cache")
        if cached != chat(turn, cache_prompt=False):
            raise SystemExit(f"tp {tp}: the prefix cache changed the reply")
        return short, cached
    finally:
        proc.terminate()
        proc.wait(timeout=30)
one, two = reply(1), reply(2)
if one != two:
    raise SystemExit(f"serve --tp 2 answered {two!r}, unsplit {one!r}")
PY
echo "tensor_parallel: ok"
