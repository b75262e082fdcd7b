#!/usr/bin/env python3
"""`memra serve` against the official OpenAI client (and raw HTTP for what a client would not send).

Usage: openai_test.py MEMRA MODEL.gguf

Starts the servers it needs on 127.0.0.1 (free ports) and stops them. Checks: /v1/models, text and
chat completions, streaming equal to the one-shot reply, usage (and the usage chunk), stop strings,
logprobs, seeded sampling, 16 concurrent greedy requests equal to their solo replies, the error
objects (malformed JSON, bad fields, a prompt over the context, n > 1, a body over the limit, an
unknown route), connections past --threads-http (503), a streaming client that disconnects (its request cancelled, the server keeps
serving), a two-turn chat resumed from the prefix cache (same reply as without it), /metrics,
--api-key, an HTTP/1.0 stream (unchunked), queued requests whose clients left (cancelled), and
SIGTERM during a request (a 503 that says the server is stopping, exit 0).
"""
import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import openai

MEMRA, MODEL = sys.argv[1], sys.argv[2]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *extra):
        self.port = free_port()
        self.log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"memra-serve-{self.port}.log"), "w+")
        self.proc = subprocess.Popen([MEMRA, "serve", MODEL, "--backend", "cpu", "-t", "2", "--port", str(self.port),
                                      *extra], stdout=self.log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"memra serve exited {self.proc.returncode}:\n{self.output()}")
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("memra serve did not answer /health within 60 s:\n" + self.output())

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise SystemExit("memra serve did not stop within 30 s of SIGTERM:\n" + self.output())
        assert rc == 0, f"memra serve exited {rc} on SIGTERM:\n{self.output()}"

    def raw(self, path, body=None, method=None, headers=None):
        data = body if isinstance(body, (bytes, type(None))) else body.encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def post_raw(sock, body, version="1.1"):
    """Writes a POST /v1/completions of a JSON body on a raw socket (for clients the openai library
    would not be: one that leaves, one that speaks HTTP/1.0)."""
    host = "Host: x\r\n" if version == "1.1" else ""
    sock.sendall((f"POST /v1/completions HTTP/{version}\r\n{host}Content-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n{body}").encode())


def metrics_when(srv, needles, seconds):
    """/metrics once it holds every needle (or at the deadline, for the caller to check)."""
    deadline = time.time() + seconds
    while True:
        metrics = srv.raw("/metrics")[1]
        if all(n in metrics for n in needles) or time.time() >= deadline:
            return metrics
        time.sleep(0.1)


def error_of(status_body, status, needle):
    status_got, body = status_body
    check(status_got == status, f"expected HTTP {status}, got {status_got}: {body}")
    err = json.loads(body)["error"]
    check(needle in err["message"], f"error message {err['message']!r} lacks {needle!r}")
    check(err["code"] == status and err["type"], f"error object {err}")


def main():
    srv = Server("-np", "4", "-c", "512")
    try:
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0)
        models = client.models.list()
        check([m.id for m in models.data] == ["qwen35-demo-q8_0"], f"models: {models}")

        # Text completion, greedy: one-shot and streamed give the same text; usage counts tokens.
        c = client.completions.create(model="x", prompt="And God said", max_tokens=12, temperature=0)
        text = c.choices[0].text
        check(text and c.usage.completion_tokens == 12 and c.choices[0].finish_reason == "length", f"completion {c}")
        check(c.usage.prompt_tokens > 0 and c.usage.total_tokens == c.usage.prompt_tokens + 12, f"usage {c.usage}")
        streamed = "".join(ch.choices[0].text for ch in client.completions.create(
            model="x", prompt="And God said", max_tokens=12, temperature=0, stream=True) if ch.choices)
        check(streamed == text, f"streamed {streamed!r} != {text!r}")
        # Token ids as the prompt.
        c_ids = client.completions.create(model="x", prompt=[1, 2, 3, 4], max_tokens=3, temperature=0)
        check(c_ids.usage.prompt_tokens == 4, f"ids prompt usage {c_ids.usage}")

        # Chat through the template; streaming with the usage chunk.
        msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Who spoke?"}]
        r = client.chat.completions.create(model="x", messages=msgs, max_tokens=10, temperature=0)
        reply = r.choices[0].message.content
        check(r.choices[0].message.role == "assistant" and reply, f"chat {r}")
        chunks = list(client.chat.completions.create(model="x", messages=msgs, max_tokens=10, temperature=0,
                                                     stream=True, stream_options={"include_usage": True}))
        check("".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == reply, "chat stream text")
        check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == r.usage.completion_tokens,
              f"usage chunk {chunks[-1]}")
        check([ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == r.choices[0].finish_reason,
              "stream finish_reason")

        # Tools offered and a tool round trip fed back (an assistant turn with tool_calls, then the
        # tool's answer): the template renders them and the reply comes back (this model writes no
        # <tool_call> blocks itself; tests/server/*_test.cc check their parsing).
        tools = [{"type": "function", "function": {"name": "lookup", "description": "Find a verse",
                                                   "parameters": {"type": "object",
                                                                  "properties": {"q": {"type": "string"}}}}}]
        turn = msgs + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"light\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "Let there be light."}]
        for stream in (False, True):
            out = client.chat.completions.create(model="x", messages=turn, tools=tools, max_tokens=6, temperature=0,
                                                 stream=stream)
            if stream:
                out = list(out)
                check(out and out[-1].choices[0].finish_reason in ("length", "stop", "tool_calls"), f"tools: {out}")
            else:
                check(out.choices[0].finish_reason in ("length", "stop", "tool_calls"), f"tools: {out}")

        # A two-turn chat: the second turn resumes from the prefix cache (turn 1's snapshot), prefills
        # only what follows, and says exactly what it says without the cache (cache_prompt: false).
        def metric_values():
            return {k: float(v) for k, v in (l.split() for l in srv.raw("/metrics")[1].splitlines()
                                              if l and not l.startswith("#"))}
        system = ("You are a careful reader of old books. Answer in one short sentence, quote the text "
                  "when you can, and never invent verses that are not there. ") * 3
        chat = [{"role": "system", "content": system}, {"role": "user", "content": "What was made first?"}]
        first = client.chat.completions.create(model="x", messages=chat, max_tokens=40, temperature=0)
        chat += [{"role": "assistant", "content": first.choices[0].message.content},
                 {"role": "user", "content": "And after that?"}]
        before = metric_values()
        second = client.chat.completions.create(model="x", messages=chat, max_tokens=16, temperature=0)
        after = metric_values()
        check(after["memra_prefix_cache_hits_total"] == before["memra_prefix_cache_hits_total"] + 1,
              f"turn 2 did not hit the prefix cache: {before} -> {after}")
        reused = after["memra_prefix_cache_tokens_reused_total"] - before["memra_prefix_cache_tokens_reused_total"]
        check(reused >= 64 and reused % 64 == 0 and reused > second.usage.prompt_tokens - 128,
              f"turn 2 reused {reused} of {second.usage.prompt_tokens} prompt tokens")
        uncached = client.chat.completions.create(model="x", messages=chat, max_tokens=16, temperature=0,
                                                  extra_body={"cache_prompt": False})
        check(uncached.choices[0].message.content == second.choices[0].message.content,
              f"turn 2 with the cache {second.choices[0].message.content!r} != without "
              f"{uncached.choices[0].message.content!r}")
        check(metric_values()["memra_prefix_cache_lookups_total"] == after["memra_prefix_cache_lookups_total"],
              "cache_prompt false still looked up the cache")
        check(after["memra_prefix_cache_rows"] > 0 and after["memra_prefix_cache_hit_ratio"] > 0, f"{after}")

        # A stop string cuts the text before it (finish_reason stop).
        cut = max(1, len(text) // 2)
        stop = text[cut:cut + 3]
        s = client.completions.create(model="x", prompt="And God said", max_tokens=12, temperature=0, stop=[stop])
        check(s.choices[0].finish_reason == "stop" and s.choices[0].text == text[:text.index(stop)],
              f"stop {stop!r}: {s.choices[0]}")

        # Logprobs of the chosen token and the top 2 (the model's distribution: <= 0, sorted).
        lp = client.chat.completions.create(model="x", messages=msgs, max_tokens=5, temperature=0, logprobs=True,
                                            top_logprobs=2)
        content = lp.choices[0].logprobs.content
        check(len(content) == lp.usage.completion_tokens, f"logprobs entries {len(content)}")
        for t in content:
            check(t.logprob <= 0 and len(t.top_logprobs) == 2, f"logprob entry {t}")
            check(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob, f"top order {t}")
            check(abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5, f"greedy pick is the top one: {t}")

        # Seeded sampling repeats; sampling differs from greedy somewhere.
        def sampled(seed):
            return client.completions.create(model="x", prompt="And God said", max_tokens=24, temperature=1.0,
                                             top_p=0.95, seed=seed).choices[0].text
        a, b = sampled(42), sampled(42)
        check(a == b, f"seed 42 twice: {a!r} vs {b!r}")
        check(any(sampled(s) != text for s in (1, 2, 3)) or a != text, "sampling never left the greedy text")

        # 16 concurrent greedy requests on 4 slots: all complete, each equal to its solo reply.
        prompts = [f"In the beginning {i}" for i in range(16)]
        solo = [client.completions.create(model="x", prompt=p, max_tokens=8, temperature=0).choices[0].text
                for p in prompts]
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            together = list(pool.map(lambda p: client.completions.create(
                model="x", prompt=p, max_tokens=8, temperature=0).choices[0].text, prompts))
        check(together == solo, f"concurrent replies differ from solo ones:\n{together}\n{solo}")

        # Errors: OpenAI error objects with the right status.
        error_of(srv.raw("/v1/chat/completions", "{bad json"), 400, "not valid JSON")
        error_of(srv.raw("/v1/chat/completions", json.dumps({"model": "x"})), 400, "'messages'")
        error_of(srv.raw("/v1/completions", json.dumps({"prompt": "hi", "temperature": "hot"})), 400,
                 "'temperature': must be a number")
        error_of(srv.raw("/v1/completions", json.dumps({"prompt": "hi", "n": 2})), 400, "'n'")
        error_of(srv.raw("/v1/completions", json.dumps({"prompt": [1, -5]})), 400, "token id -5")
        error_of(srv.raw("/v1/completions", json.dumps({"prompt": "word " * 600})), 400, "the context holds 512")
        # A body over the limit: 413 from its Content-Length, before the server reads it (the
        # connection then closes, so the client may not get to send it all).
        with socket.create_connection(("127.0.0.1", srv.port)) as big:
            big.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 9437184\r\n\r\n{")
            try:
                big.sendall(b" " * (1 << 20))
            except OSError:
                pass
            head = big.recv(65536).decode(errors="replace")
        check(head.startswith("HTTP/1.1 413") and "over 8388608 bytes" in head, f"oversized body: {head[:300]}")
        error_of(srv.raw("/v1/nothing", method="GET"), 404, "no route")
        error_of(srv.raw("/v1/chat/completions", json.dumps({"messages": [{"role": "wizard", "content": "x"}]})), 400,
                 "unknown role")

        # An HTTP/1.0 client streams too: no chunk framing (1.0 has none), the events as they are, the
        # stream's end the connection's close.
        with socket.create_connection(("127.0.0.1", srv.port)) as old:
            body = json.dumps({"prompt": "And God said", "max_tokens": 3, "temperature": 0, "stream": True})
            post_raw(old, body, "1.0")
            old.settimeout(30)
            got = b""
            while True:
                part = old.recv(65536)
                if not part:
                    break
                got += part
            head, _, events = got.partition(b"\r\n\r\n")
            check(b"200" in head.split(b"\r\n")[0] and b"chunked" not in head.lower(), f"HTTP/1.0 stream head {head!r}")
            check(events.startswith(b"data: {") and events.rstrip().endswith(b"data: [DONE]"),
                  f"HTTP/1.0 stream events {events[:200]!r} ... {events[-60:]!r}")

        # A streaming client that goes away: its request is cancelled, the server keeps serving.
        sock = socket.create_connection(("127.0.0.1", srv.port))
        body = json.dumps({"prompt": "And God said", "max_tokens": 400, "temperature": 0, "stream": True})
        post_raw(sock, body)
        got = b""
        while b"data:" not in got:
            part = sock.recv(4096)
            check(part, f"the stream ended before its first event: {got!r}")
            got += part
        sock.close()
        metrics = metrics_when(srv, ["memra_requests_cancelled_total 1", "memra_requests_running 0"], 30)
        check("memra_requests_cancelled_total 1" in metrics, f"the disconnect was not cancelled:\n{metrics}")
        check(client.completions.create(model="x", prompt="And God said", max_tokens=12,
                                        temperature=0).choices[0].text == text, "serving after a disconnect")
        check("memra_requests_total" in metrics and "memra_slots 4" in metrics, f"metrics:\n{metrics}")
        for name in ("memra_kv_blocks ", "memra_kv_blocks_used ", "memra_kv_cache_bytes ", "memra_recurrent_state_bytes ",
                     "memra_generated_tokens_per_second "):
            check(name in metrics, f"metrics lack {name.strip()}:\n{metrics}")
        values = dict(l.split() for l in metrics.splitlines() if l and not l.startswith("#"))
        check(int(values["memra_kv_blocks"]) > 0 and int(values["memra_kv_cache_bytes"]) > 0, f"KV: {values}")
    finally:
        srv.stop()

    # A full queue answers 503 (and the others complete); a slow client gets 408 within --timeout
    # while the server keeps serving; a non-streaming client that disconnects is cancelled too.
    srv = Server("-np", "1", "--max-queue", "2", "--timeout", "2")
    try:
        body = json.dumps({"prompt": "And God said", "max_tokens": 200, "temperature": 0, "ignore_eos": True})
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda _: srv.raw("/v1/completions", body), range(6)))
        codes = sorted(code for code, _ in results)
        check(codes.count(200) >= 2 and codes.count(503) >= 1 and set(codes) <= {200, 503}, f"queue full: {codes}")
        error_of(next(r for r in results if r[0] == 503), 503, "retry later")
        slow = socket.create_connection(("127.0.0.1", srv.port))
        t0 = time.time()
        try:
            for ch in b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n":
                slow.sendall(bytes([ch]))
                time.sleep(0.1)
        except OSError:
            pass  # closed on us: what should happen
        reply = slow.recv(4096).decode(errors="replace")
        slow.close()
        check(reply.startswith("HTTP/1.1 408") and time.time() - t0 < 10, f"slow client: {reply[:200]!r}")
        check(srv.raw("/v1/completions", json.dumps({"prompt": "And God", "max_tokens": 2}))[0] == 200,
              "serving beside a slow client")
        gone = socket.create_connection(("127.0.0.1", srv.port))
        post_raw(gone, body)
        time.sleep(0.3)
        gone.close()
        check("memra_requests_cancelled_total 1" in metrics_when(srv, ["memra_requests_cancelled_total 1"], 30),
              "a non-streaming disconnect runs on")
    finally:
        srv.stop()

    # Connections past --threads-http get a 503 error object (their request read first, so the
    # client sees the answer, not a reset), and the server keeps serving.
    srv = Server("-np", "1", "--threads-http", "1", "--timeout", "5")
    try:
        time.sleep(0.5)  # the /health polls' connection threads end
        held = socket.create_connection(("127.0.0.1", srv.port))  # takes the one connection thread
        time.sleep(0.3)
        body = json.dumps({"prompt": "And God", "max_tokens": 2})
        for _ in range(3):
            code, text = srv.raw("/v1/completions", body)
            error_of((code, text), 503, "too many connections")
        held.close()
        # The one connection thread frees a moment after each connection ends, so a second request
        # right after a 200 can still meet a 503: the first 200 is the evidence.
        deadline = time.time() + 10
        served = False
        while time.time() < deadline and not served:
            served = srv.raw("/v1/completions", body)[0] == 200
            if not served:
                time.sleep(0.2)
        check(served, "serving after the held connection closed")
    finally:
        srv.stop()

    # A bounded load: 400 short requests from 32 clients, zero errors.
    srv = Server("-np", "8")
    try:
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0)
        t0 = time.time()

        def one(i):
            r = client.completions.create(model="x", prompt=f"Verse {i}", max_tokens=4, temperature=0.7, seed=i)
            return r.usage.completion_tokens
        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            tokens = list(pool.map(one, range(400)))
        wall = time.time() - t0
        check(len(tokens) == 400 and all(0 < t <= 4 for t in tokens), "load test replies")
        print(f"load: 400 requests from 32 clients in {wall:.1f} s ({400 / wall:.1f} req/s, "
              f"{sum(tokens) / wall:.0f} output tok/s), 0 errors")
    finally:
        srv.stop()

    # --api-key: the /v1/ routes need the bearer token; /health does not.
    srv = Server("-np", "1", "--api-key", "sesame")
    try:
        try:
            openai.OpenAI(base_url=srv.base + "/v1", api_key="wrong", max_retries=0).models.list()
            raise AssertionError("a wrong API key was accepted")
        except openai.AuthenticationError:
            pass
        ok = openai.OpenAI(base_url=srv.base + "/v1", api_key="sesame", max_retries=0)
        check(ok.completions.create(model="x", prompt="And God", max_tokens=2).usage.completion_tokens == 2, "key ok")
        check(srv.raw("/health")[0] == 200, "/health without a key")
    finally:
        srv.stop()
    # Clients that give up while their requests wait in the queue: the requests leave it (noticed
    # between events, not only when a token is written), so they do not fill --max-queue.
    srv = Server("-np", "1", "--max-queue", "3")
    try:
        def hold_the_slot():
            try:
                srv.raw("/v1/completions", json.dumps({"prompt": "And God said", "max_tokens": 1500, "ignore_eos": True}),
                        headers={"Content-Type": "application/json"})
            except OSError:
                pass  # the server is killed under it below

        hold = threading.Thread(target=hold_the_slot)
        hold.start()
        time.sleep(0.5)
        for stream in (False, True):
            with socket.create_connection(("127.0.0.1", srv.port)) as quitter:
                body = json.dumps({"prompt": "Verse", "max_tokens": 50, "stream": stream})
                post_raw(quitter, body)
                time.sleep(0.3)
        metrics = metrics_when(srv, ["memra_requests_cancelled_total 2", "memra_requests_queued 0"], 10)
        check("memra_requests_cancelled_total 2" in metrics and "memra_requests_queued 0" in metrics,
              f"abandoned queued requests were not cancelled:\n{metrics}")
    finally:
        srv.proc.kill()
        srv.proc.wait()

    # SIGTERM while a non-streaming request runs: the engine cancels it, the client gets a 503 that
    # says why (not an empty reply), and the server exits 0.
    srv = Server("-np", "1")
    got = {}

    def long_request():
        got["reply"] = srv.raw("/v1/completions", json.dumps({"prompt": "And God said", "max_tokens": 4000,
                                                               "ignore_eos": True}),
                               headers={"Content-Type": "application/json"})

    t = threading.Thread(target=long_request)
    t.start()
    time.sleep(1.0)
    srv.stop()
    t.join(30)
    error_of(got.get("reply", (0, "{}")), 503, "the server is stopping")
    print("serve_openai: ok")


if __name__ == "__main__":
    main()
