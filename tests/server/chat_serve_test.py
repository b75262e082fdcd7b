#!/usr/bin/env python3
"""memra serve on a model family's chat (issues 18 and 19): a synthetic tiny model from `memra gen`
(gemma4-tiny: Gemma 4's vocabulary and turn template; step35-tiny: a byte-level BPE vocabulary and
ChatML), driven by the official OpenAI client on 127.0.0.1.

Multi-turn chat with a system prompt (greedy: one-shot and streamed agree), the prompt token count
the server reports is the template render's, and the reply stops on the end of turn or the limit.

Usage: chat_serve_test.py MEMRA MODEL NAME ONE_WORD_PROMPT_TOKENS
  (ONE_WORD_PROMPT_TOKENS: the tokens of the render of one user message "Hello")
"""
import os
import socket
import subprocess
import sys
import time
import urllib.request

import openai

MEMRA, MODEL, NAME, ONE_WORD_TOKENS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    port = free_port()
    log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"memra-serve-{NAME}-{port}.log"), "w+")
    proc = subprocess.Popen([MEMRA, "serve", MODEL, "--backend", "cpu", "-t", "2", "--port", str(port), "-np", "2",
                             "-c", "512"], stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            check(proc.poll() is None, f"memra serve exited {proc.returncode}")
            try:
                with urllib.request.urlopen(base + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                check(time.time() < deadline, "memra serve did not answer /health within 60 s")
                time.sleep(0.1)
        client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
        msgs = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is the capital of France?"},
                {"role": "assistant", "content": "Paris."},
                {"role": "user", "content": "And of Italy?"}]
        r = client.chat.completions.create(model="x", messages=msgs, max_tokens=12, temperature=0)
        reply = r.choices[0].message.content
        check(r.choices[0].finish_reason in ("stop", "length"), f"finish {r}")
        check(r.usage.completion_tokens <= 12, f"usage {r.usage}")
        streamed = "".join(ch.choices[0].delta.content or "" for ch in client.chat.completions.create(
            model="x", messages=msgs, max_tokens=12, temperature=0, stream=True) if ch.choices)
        check(streamed == reply, f"streamed {streamed!r} != {reply!r}")
        # The prompt the server counts is the template's render of the conversation.
        one = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hello"}], max_tokens=1,
                                             temperature=0)
        check(one.usage.prompt_tokens == ONE_WORD_TOKENS, f"prompt tokens of a one-word chat: {one.usage}")
        print(f"{NAME} chat ok: reply {reply!r}, prompt {r.usage.prompt_tokens} tokens")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
