#!/usr/bin/env python3
"""A soak of `memra serve` (issue 20): a mixed load on 127.0.0.1 for a bounded time, sampled.

Usage: soak.py MEMRA MODEL.gguf [--minutes M] [--clients N] [--backend cpu|cuda] [--decode-class exact] [--json OUT]

Starts memra serve (4 slots, a 512-token context, a queue of 12, a 120 s request time limit),
records each greedy prompt's reply alone, then runs N clients for M minutes, each picking one of:
  greedy      a completion or chat (streamed or not) whose text must equal its solo reply
  sampled     temperature 0.8, any text; the reply must be well-formed
  cancel      a stream read for two frames, then the connection dropped
  disconnect  half a request, then the connection dropped
  hostile     bytes that are not HTTP, a target that is not UTF-8, malformed JSON, a body over
              --max-body, a prompt over the context, a wrong Content-Length
  long        a prompt of ~450 tokens (near the context)
Every reply must be well-formed (JSON, or SSE frames of JSON), no status but 200, 400, 404, 408,
413 and 503 (queue full) may appear, and greedy replies must equal the solo ones throughout. The
server's RSS (and, on cuda, the GPU's used memory) is sampled every 5 s; after the first minute's
warm-up it may grow by at most --rss-bound MiB (default 64). Prints a table; exit 1 on any breach.
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("memra")
ap.add_argument("model")
ap.add_argument("--minutes", type=float, default=30)
ap.add_argument("--clients", type=int, default=16)
ap.add_argument("--backend", default="cpu")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rss-bound", type=float, default=64, help="MiB of RSS growth allowed after the warm-up")
ap.add_argument("--json", default="")
ap.add_argument("--decode-class", default="", help="memra serve --decode-class (bucket or exact; default: the server's)")
args = ap.parse_args()

CTX = 512
PROMPTS = ["And God said unto Moses,", "In the beginning", "The LORD is my shepherd;", "Blessed are the",
           "And it came to pass", "Let there be light"]
CHATS = ["Who was Moses?", "Say something about light.", "Tell me about the sea."]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


port = free_port()
log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"memra-soak-{port}.log"), "w+")
proc = subprocess.Popen([args.memra, "serve", args.model, "--backend", args.backend, "-t", str(args.threads),
                         "--port", str(port), "-np", "4", "-c", str(CTX), "--max-queue", "12",
                         "--request-time-limit", "120", "--timeout", "10"] +
                        (["--decode-class", args.decode_class] if args.decode_class else []),
                        stdout=log, stderr=subprocess.STDOUT)


def server_log():
    log.flush()
    log.seek(0)
    return log.read()


def die(msg):
    proc.kill()
    sys.exit(f"soak: {msg}\n--- server log (tail) ---\n{server_log()[-3000:]}")


deadline = time.time() + 120
while True:
    if proc.poll() is not None:
        die(f"memra serve exited {proc.returncode} at start")
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", "/health")
        if c.getresponse().status == 200:
            break
    except OSError:
        pass
    if time.time() > deadline:
        die("no /health within 120 s")
    time.sleep(0.2)

lock = threading.Lock()
counts = {}        # (kind, status) -> n
breaches = []      # what went wrong


def count(kind, status):
    with lock:
        counts[(kind, status)] = counts.get((kind, status), 0) + 1
        if status >= 500 and status != 503:
            breaches.append(f"{kind}: HTTP {status}")


def breach(msg):
    with lock:
        if len(breaches) < 50:
            breaches.append(msg)


def post(path, body, timeout=180):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    c.request("POST", path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.getheader("Content-Type") or "", r.read().decode("utf-8", "replace")


def is_error_object(text):
    try:
        j = json.loads(text)
        return isinstance(j.get("error"), dict) and bool(j["error"].get("message"))
    except ValueError:
        return False


def sse_text(body, chat):
    """The text of an SSE stream (None if any frame is not JSON or [DONE] is missing)."""
    out, done = [], False
    for frame in body.split("\n\n"):
        if not frame.strip():
            continue
        if not frame.startswith("data: "):
            return None
        payload = frame[6:]
        if payload == "[DONE]":
            done = True
            continue
        try:
            j = json.loads(payload)
        except ValueError:
            return None
        if "error" in j:
            return None
        for ch in j.get("choices", []):
            out.append((ch.get("delta") or {}).get("content") or "" if chat else ch.get("text") or "")
    return "".join(out) if done else None


def greedy(prompt, chat, stream):
    body = {"max_tokens": 24, "temperature": 0, "stream": stream}
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    status, ctype, text = post("/v1/chat/completions" if chat else "/v1/completions", body)
    if status != 200:
        return status, None
    if stream:
        return status, sse_text(text, chat)
    j = json.loads(text)
    ch = j["choices"][0]
    return status, ch["message"]["content"] if chat else ch["text"]


# Solo replies, one request at a time.
solo = {}
for p in PROMPTS:
    solo[(p, False)] = greedy(p, False, False)[1]
for p in CHATS:
    solo[(p, True)] = greedy(p, True, False)[1]
if any(v is None for v in solo.values()):
    die(f"a solo reply failed: {solo}")


def act_greedy(rng):
    chat = rng.random() < 0.4
    p = rng.choice(CHATS if chat else PROMPTS)
    stream = rng.random() < 0.5
    status, text = greedy(p, chat, stream)
    count("greedy", status)
    if status == 200 and text != solo[(p, chat)]:
        breach(f"greedy {'chat' if chat else 'completion'} {'stream' if stream else ''} of {p!r}: "
               f"{text!r} != solo {solo[(p, chat)]!r}")


def act_sampled(rng):
    body = {"prompt": rng.choice(PROMPTS), "max_tokens": rng.randint(1, 40), "temperature": 0.8,
            "seed": rng.randint(0, 1 << 30), "stream": rng.random() < 0.5, "logprobs": rng.choice([None, 2])}
    status, ctype, text = post("/v1/completions", {k: v for k, v in body.items() if v is not None})
    count("sampled", status)
    if status == 200:
        ok = sse_text(text, False) is not None if body["stream"] else "choices" in json.loads(text)
        if not ok:
            breach(f"sampled: a malformed reply: {text[:300]!r}")
    elif not is_error_object(text):
        breach(f"sampled: HTTP {status} without an error object")


def raw_socket():
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    return s


def act_cancel(rng):
    body = json.dumps({"prompt": rng.choice(PROMPTS), "max_tokens": 200, "temperature": 0, "stream": True})
    s = raw_socket()
    s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    got = b""
    while got.count(b"data: ") < 2:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    s.close()  # abruptly, mid-stream
    m = re.match(rb"HTTP/1.1 (\d+)", got)
    count("cancel", int(m.group(1)) if m else 0)


def act_disconnect(rng):
    s = raw_socket()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"messages\": [")
    time.sleep(rng.random() * 0.2)
    s.close()
    count("disconnect", 0)


HOSTILE = [
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(64),
    b"GET /v1/com\xd2pletions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 9\r\n\r\n{\"prompt\"",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 20\r\n\r\n{\"prompt\": [1e999]}  ",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n[]",
    b"GET / HTTP/1.1\r\n" + b"X-Long: " + b"a" * 70000 + b"\r\n\r\n",
]


def _post(path, body):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
            str(len(body)).encode() + b"\r\n\r\n" + body)


# Bodies that once ended the server (session 30): a content part whose type is not a string, and
# JSON nested 70,000 deep in a chat message.
HOSTILE += [
    _post(b"/v1/chat/completions", b'{"messages":[{"role":"user","content":[{"type":1,"text":"hi"}]}]}'),
    _post(b"/v1/chat/completions",
          b'{"messages":[{"role":"user","content":"hi","x":' + b"[" * 70000 + b"]" * 70000 + b"}]}"),
]


def act_hostile(rng):
    s = raw_socket()
    pick = rng.randrange(len(HOSTILE) + 2)
    if pick < len(HOSTILE):
        data = HOSTILE[pick]
    elif pick == len(HOSTILE):  # a body over the 8 MiB limit
        data = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 9000000\r\n\r\n"
        data += b" " * 200000
    else:  # a prompt over the context
        body = json.dumps({"prompt": list(range(1, CTX + 20)), "max_tokens": 4}).encode()
        data = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\n\r\n" + body)
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the server answered and closed before reading it all
    got = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    s.close()
    m = re.match(rb"HTTP/1.1 (\d+)", got)
    status = int(m.group(1)) if m else 0
    count("hostile", status)
    if m and status != 200:
        body = got.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in got else b""
        if not is_error_object(body.decode("utf-8", "replace")):
            breach(f"hostile #{pick}: HTTP {status} without an error object: {got[:200]!r}")
    if m and status in (200,):
        breach(f"hostile #{pick} was answered 200")


def act_long(rng):
    ids = [rng.randrange(3, 200) for _ in range(rng.randint(380, 470))]
    status, ctype, text = post("/v1/completions", {"prompt": ids, "max_tokens": 16, "temperature": 0})
    count("long", status)
    if status == 200 and "choices" not in json.loads(text):
        breach("long: a malformed reply")


ACTIONS = [(act_greedy, 40), (act_sampled, 20), (act_cancel, 10), (act_disconnect, 8), (act_hostile, 12),
           (act_long, 10)]
end = time.time() + args.minutes * 60
stop = threading.Event()


def client(seed):
    rng = random.Random(seed)
    names = [a for a, w in ACTIONS for _ in range(w)]
    while time.time() < end and not stop.is_set():
        act = rng.choice(names)
        try:
            act(rng)
        except (OSError, http.client.HTTPException) as e:
            count(act.__name__[4:], -1)  # a connection error: counted, reported
        except Exception as e:  # noqa: BLE001 - any other failure is a breach
            breach(f"{act.__name__}: {type(e).__name__}: {e}")


def rss_mib():
    with open(f"/proc/{proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def gpu_used_mib():
    if args.backend != "cuda":
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        return float(out.split()[0])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


samples = []  # (t, rss, gpu)
t0 = time.time()
threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
for t in threads:
    t.start()
while time.time() < end:
    if proc.poll() is not None:
        stop.set()
        die(f"memra serve exited {proc.returncode} during the soak")
    samples.append((time.time() - t0, rss_mib(), gpu_used_mib()))
    time.sleep(5)
for t in threads:
    t.join(timeout=300)
samples.append((time.time() - t0, rss_mib(), gpu_used_mib()))

# Still serving, and still equal to the solo replies.
for (p, chat), ref in solo.items():
    status, text = greedy(p, chat, False)
    if status != 200 or text != ref:
        breach(f"after the soak, {p!r}: HTTP {status} {text!r} != {ref!r}")
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
c.request("GET", "/metrics")
metrics = c.getresponse().read().decode()
proc.send_signal(signal.SIGTERM)
try:
    rc = proc.wait(timeout=60)
except subprocess.TimeoutExpired:
    proc.kill()
    rc = "hung"
if rc != 0:
    breach(f"memra serve exited {rc} on SIGTERM")

warm = [s for s in samples if s[0] >= min(60, args.minutes * 60 / 4)]
rss_warm = warm[0][1] if warm else samples[0][1]
rss_max = max(s[1] for s in warm) if warm else samples[-1][1]
growth = rss_max - rss_warm
if growth > args.rss_bound:
    breach(f"RSS grew {growth:.1f} MiB after the warm-up (bound {args.rss_bound} MiB)")
gpu = [s[2] for s in warm if s[2] is not None]
gpu_growth = (max(gpu) - gpu[0]) if gpu else None
if gpu_growth is not None and gpu_growth > args.rss_bound:
    breach(f"GPU memory grew {gpu_growth:.0f} MiB after the warm-up")

total = sum(counts.values())
metric = {m.group(1): float(m.group(2)) for m in re.finditer(r"^memra_(\w+) ([0-9.e+-]+)$", metrics, re.M)}
print(f"=== memra serve soak: {args.minutes:g} min, {args.clients} clients, backend {args.backend} ===")
print(f"{'action':<12} {'status':>6} {'count':>8}")
for (kind, status), n in sorted(counts.items()):
    print(f"{kind:<12} {status:>6} {n:>8}")
print(f"requests {total}; server: {int(metric.get('requests_total', 0))} accepted, "
      f"{int(metric.get('requests_cancelled_total', 0))} cancelled, {int(metric.get('requests_refused_total', 0))} "
      f"refused (503), {int(metric.get('requests_errors_total', 0))} errors, "
      f"{int(metric.get('generated_tokens_total', 0))} tokens generated")
print(f"RSS: {samples[0][1]:.1f} MiB at the start, {rss_warm:.1f} after the warm-up, max {rss_max:.1f} after it, "
      f"{samples[-1][1]:.1f} at the end (growth {growth:+.1f} MiB, bound {args.rss_bound:g})")
if gpu:
    print(f"GPU memory used: {gpu[0]:.0f} MiB after the warm-up, max {max(gpu):.0f} (growth {gpu_growth:+.0f})")
if args.json:
    with open(args.json, "w") as f:
        json.dump({"counts": {f"{k}:{s}": n for (k, s), n in counts.items()}, "samples": samples,
                   "breaches": breaches, "metrics": metric}, f)
if breaches:
    print("BREACHES:")
    for b in breaches:
        print("  " + b)
    sys.exit(1)
print("soak: ok")
