#!/usr/bin/env python3
"""Serving benchmark for `memra serve` (or any OpenAI-compatible server): open-loop Poisson
arrivals of streamed completions at each given rate, then a burst, printing requests/s, output
tok/s, time to first token and time per output token / inter-token latency percentiles, and the
share of prompt tokens the server's prefix cache supplied (from memra's /metrics; "-" elsewhere).
Then, with --sessions, multi-turn chats: sessions arrive at --session-rate, each sends --turns
requests in turn, every prompt the previous prompt + its reply's token ids + a new message (a shared
system prompt of --system tokens first), and the table shows TTFT per turn: with prefix reuse it
does not grow with the conversation.

Standard library only (it runs on the GPU machine, which has no PyPI). Prompts are random token
ids (exact lengths on any vocabulary of at least --id-range ids), lengths drawn around the means
(uniform in [mean/2, 3*mean/2]); every request streams with ignore_eos so it generates its length.

  python3 bench/serve_bench.py --url http://127.0.0.1:8080 --rates 2,8 --duration 30 --burst 64
  python3 bench/serve_bench.py --rates '' --burst 0 --sessions 32 --turns 6 --session-rate 2
"""
import argparse
import http.client
import json
import random
import statistics
import threading
import time
import urllib.parse
import urllib.request


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


TEMPERATURE = 0.0


def one_request(url, prompt, max_tokens, out):
    """Streams one completion; appends its record (times in seconds) to out."""
    u = urllib.parse.urlparse(url)
    rec = {"sent": time.perf_counter(), "tokens": [], "ids": [], "error": None, "prompt": len(prompt)}
    try:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": TEMPERATURE, "stream": True,
                           "ignore_eos": True, "seed": len(out), "return_token_ids": True})
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            rec["error"] = f"HTTP {resp.status}: {resp.read()[:200]!r}"
        else:
            buf = b""
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n\n" in buf:
                    frame, buf = buf.split(b"\n\n", 1)
                    if not frame.startswith(b"data: "):
                        continue
                    data = frame[6:]
                    if data == b"[DONE]":
                        break
                    obj = json.loads(data)
                    if "error" in obj:
                        rec["error"] = obj["error"].get("message")
                    elif obj.get("choices") and obj["choices"][0].get("text") is not None and \
                            obj["choices"][0].get("finish_reason") is None:
                        rec["tokens"].append(time.perf_counter())
                        rec["ids"] += obj["choices"][0].get("token_ids", [])
        conn.close()
    except OSError as e:
        rec["error"] = str(e)
    rec["done"] = time.perf_counter()
    out.append(rec)


def prefix_counters(url):
    """(prompt tokens, tokens reused) from memra's /metrics, or None from another server."""
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    values = dict(l.split()[:2] for l in text.splitlines() if l and not l.startswith("#") and " " in l)
    if "memra_prefix_cache_tokens_reused_total" not in values:
        return None
    return float(values["memra_prompt_tokens_total"]), float(values["memra_prefix_cache_tokens_reused_total"])


def reuse_share(before, after):
    if before is None or after is None or after[0] == before[0]:
        return "      -"
    return f"{100 * (after[1] - before[1]) / (after[0] - before[0]):6.1f}%"


def run(url, label, arrivals, prompt_mean, output_mean, id_range, rng):
    records, threads = [], []
    before = prefix_counters(url)
    t0 = time.perf_counter()
    for at in arrivals:
        delay = t0 + at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        p = rng.randint(max(1, prompt_mean // 2), max(1, prompt_mean * 3 // 2))
        n = rng.randint(max(1, output_mean // 2), max(1, output_mean * 3 // 2))
        prompt = [rng.randrange(id_range) for _ in range(p)]
        t = threading.Thread(target=one_request, args=(url, prompt, n, records))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in records if not r["error"] and r["tokens"]]
    errors = [r["error"] for r in records if r["error"]]
    ttft = [(r["tokens"][0] - r["sent"]) * 1e3 for r in ok]
    tpot = [(r["tokens"][-1] - r["tokens"][0]) / (len(r["tokens"]) - 1) * 1e3 for r in ok if len(r["tokens"]) > 1]
    itl = [(b - a) * 1e3 for r in ok for a, b in zip(r["tokens"], r["tokens"][1:])]
    out_tokens = sum(len(r["tokens"]) for r in ok)
    print(f"| {label:>14} | {len(records):5d} | {len(errors):4d} | {len(ok) / wall:7.2f} | {out_tokens / wall:9.1f} | "
          f"{statistics.mean(ttft) if ttft else float('nan'):8.1f} | {percentile(ttft, 50):7.1f} | "
          f"{percentile(ttft, 99):7.1f} | {statistics.mean(tpot) if tpot else float('nan'):7.2f} | "
          f"{percentile(tpot, 95):7.2f} | {percentile(itl, 50):6.2f} | {percentile(itl, 99):6.2f} | "
          f"{reuse_share(before, prefix_counters(url))} |", flush=True)
    if label.startswith("burst"):
        prompt_tokens = sum(r["prompt"] for r in ok)
        print(f"  {label}: {(prompt_tokens + out_tokens) / wall:.1f} total tok/s (prompt {prompt_tokens} + output "
              f"{out_tokens} tokens in {wall:.2f} s)", flush=True)
    for e in errors[:3]:
        print(f"  error: {e}")


def session(url, turns, system, user_mean, output_mean, id_range, rng, think, out):
    """One conversation: turn k's prompt = turn k-1's prompt + its reply + a new message."""
    prompt = list(system)
    for k in range(turns):
        prompt += [rng.randrange(id_range) for _ in range(rng.randint(max(1, user_mean // 2), user_mean * 3 // 2))]
        recs = []
        one_request(url, prompt, rng.randint(max(1, output_mean // 2), output_mean * 3 // 2), recs)
        rec = recs[0]
        rec["turn"] = k + 1
        out.append(rec)
        if rec["error"] or not rec["ids"]:
            return
        prompt += rec["ids"]
        time.sleep(think)


def run_sessions(url, n, turns, rate, system_len, user_mean, output_mean, id_range, think, rng):
    system = [rng.randrange(id_range) for _ in range(system_len)]
    records, threads = [], []
    before = prefix_counters(url)
    t0, at = time.perf_counter(), 0.0
    for i in range(n):
        at += rng.expovariate(rate)
        delay = t0 + at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        t = threading.Thread(target=session, args=(url, turns, system, user_mean, output_mean, id_range,
                                                   random.Random(rng.random()), think, records))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    errors = [r["error"] for r in records if r["error"]]
    print(f"\nsessions: {n} chats arriving at {rate:g}/s, {turns} turns each, system prompt {system_len} tokens, "
          f"new messages ~{user_mean}, replies ~{output_mean} tokens, {think:g} s between turns; {len(records)} "
          f"requests in {wall:.1f} s, {len(errors)} errors, prefix cache supplied {reuse_share(before, prefix_counters(url)).strip()} "
          "of the prompt tokens")
    print("| turn | reqs | prompt tokens avg | TTFT ms avg | p50 | p99 | TPOT ms avg | p95 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in range(1, turns + 1):
        ok = [r for r in records if r.get("turn") == k and not r["error"] and r["tokens"]]
        if not ok:
            continue
        ttft = [(r["tokens"][0] - r["sent"]) * 1e3 for r in ok]
        tpot = [(r["tokens"][-1] - r["tokens"][0]) / (len(r["tokens"]) - 1) * 1e3 for r in ok if len(r["tokens"]) > 1]
        print(f"| {k} | {len(ok)} | {statistics.mean(r['prompt'] for r in ok):.0f} | {statistics.mean(ttft):.1f} | "
              f"{percentile(ttft, 50):.1f} | {percentile(ttft, 99):.1f} | "
              f"{statistics.mean(tpot) if tpot else float('nan'):.2f} | {percentile(tpot, 95):.2f} |", flush=True)
    for e in errors[:3]:
        print(f"  error: {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--rates", default="2,8", help="request rates (req/s), comma-separated; '' = none")
    ap.add_argument("--duration", type=float, default=30, help="seconds of arrivals per rate")
    ap.add_argument("--burst", type=int, default=64, help="requests sent at once after the rates (0 = none)")
    ap.add_argument("--prompt-mean", type=int, default=256)
    ap.add_argument("--output-mean", type=int, default=128)
    ap.add_argument("--id-range", type=int, default=1000, help="prompt token ids are drawn from [0, this)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--temperature", type=float, default=0.0,
                    help="sampling temperature of every request (0 = greedy; OpenAI's default is 1)")
    ap.add_argument("--sessions", type=int, default=0, help="multi-turn chats after the rates (0 = none)")
    ap.add_argument("--turns", type=int, default=6, help="turns per chat")
    ap.add_argument("--session-rate", type=float, default=2.0, help="chats starting per second (Poisson)")
    ap.add_argument("--system", type=int, default=200, help="tokens of the system prompt every chat shares")
    ap.add_argument("--user-mean", type=int, default=64, help="tokens of each new message (mean)")
    ap.add_argument("--think", type=float, default=0.5, help="seconds a user waits between a reply and the next turn")
    a = ap.parse_args()
    global TEMPERATURE
    TEMPERATURE = a.temperature
    rng = random.Random(a.seed)
    print(f"serve_bench: {a.url}, prompts ~{a.prompt_mean} tokens, outputs ~{a.output_mean} tokens "
          f"(temperature {a.temperature:g}, ignore_eos), Poisson arrivals for {a.duration:g} s per rate")
    print("|           load |  reqs | errs |   req/s | out tok/s | TTFT avg |   p50 |   p99 | TPOT avg | p95 | "
          "ITL p50 | p99 | cached |".replace("TPOT avg | p95", "TPOT ms | p95").replace("TTFT avg", "TTFT ms"))
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for rate in [float(x) for x in a.rates.split(",") if x]:
        arrivals, t = [], 0.0
        while True:
            t += rng.expovariate(rate)
            if t >= a.duration:
                break
            arrivals.append(t)
        run(a.url, f"{rate:g} req/s", arrivals, a.prompt_mean, a.output_mean, a.id_range, rng)
    if a.burst > 0:
        run(a.url, f"burst of {a.burst}", [0.0] * a.burst, a.prompt_mean, a.output_mean, a.id_range, rng)
    if a.sessions > 0:
        run_sessions(a.url, a.sessions, a.turns, a.session_rate, a.system, a.user_mean, a.output_mean, a.id_range,
                     a.think, rng)


if __name__ == "__main__":
    main()
