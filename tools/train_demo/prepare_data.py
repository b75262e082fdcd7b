#!/usr/bin/env python3
"""Builds the demo model's corpus and tokenizer from Debian-packaged English text.

Needs (here, not on the GPU machine): apt-get install -y bible-kjv bible-kjv-text fortunes fortunes-min;
pip install tokenizers numpy.  Writes into data/ (git-ignored, carried to the GPU machine):
  train.txt.gz / heldout.txt.gz  documents joined by <|endoftext|>
  train.npy / heldout.npy        uint16 token ids (each document followed by <|endoftext|>)
  tokenizer.json                 byte-level BPE, qwen2 pre-tokenizer regex
Documents: one per KJV chapter (verse numbers stripped), one per fortune cookie. Deduplicated on
whitespace-normalised text; every document whose sha1 % 20 == 0 goes to the held-out split.
"""
import glob, gzip, hashlib, json, os, re, subprocess, sys
import numpy as np
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, Regex

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data")
VOCAB = int(os.environ.get("VOCAB", "6144"))
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Qwen2's pre-tokenizer split regex (llama.cpp LLAMA_VOCAB_PRE_TYPE_QWEN2).
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def kjv_docs():
    txt = subprocess.run(["bible", "-f", "Genesis1:1-Revelation22:21"], capture_output=True,
                         text=True, check=True).stdout
    chapters = {}
    for line in txt.splitlines():
        m = re.match(r"^(\S+?)(\d+):(\d+) (.*)$", line)
        if not m:
            continue
        chapters.setdefault((m.group(1), m.group(2)), []).append(m.group(4).strip())
    return [("bible-kjv-text:/usr/lib/bible.data", " ".join(v)) for v in chapters.values()]


def fortune_docs():
    docs = []
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if os.path.splitext(path)[1] in (".dat", ".u8") or os.path.isdir(path) or os.path.islink(path):
            continue
        pkg = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True).stdout.split(":")[0]
        with open(path, encoding="utf-8", errors="replace") as f:
            for d in f.read().split("\n%\n"):
                d = d.strip("%\n ").rstrip()
                if len(d) >= 20:
                    docs.append((f"{pkg}:{path}", d))
    return docs


def main():
    os.makedirs(OUT, exist_ok=True)
    seen, train, held, counts = set(), [], [], {}
    for src, d in kjv_docs() + fortune_docs():
        key = hashlib.sha1(" ".join(d.split()).lower().encode()).digest()
        if key in seen:
            counts.setdefault(src, [0, 0, 0])[2] += 1
            continue
        seen.add(key)
        c = counts.setdefault(src, [0, 0, 0])
        if key[0] % 20 == 0:
            held.append(d); c[1] += 1
        else:
            train.append(d); c[0] += 1
    for name, docs in (("train", train), ("heldout", held)):
        with gzip.open(os.path.join(OUT, f"{name}.txt.gz"), "wt", encoding="utf-8") as f:
            f.write("<|endoftext|>".join(docs))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIAL, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(train, trainer)
    tok.save(os.path.join(OUT, "tokenizer.json"))
    eot = tok.token_to_id("<|endoftext|>")
    for name, docs in (("train", train), ("heldout", held)):
        ids = []
        for enc in tok.encode_batch(docs):
            ids.extend(enc.ids); ids.append(eot)
        np.save(os.path.join(OUT, f"{name}.npy"), np.array(ids, dtype=np.uint16))
        print(f"{name}: {len(docs)} docs, {len(ids)} tokens")
    print("vocab", tok.get_vocab_size())
    with open(os.path.join(OUT, "sources.json"), "w") as f:
        json.dump({k: {"train": v[0], "heldout": v[1], "duplicates_dropped": v[2]} for k, v in counts.items()}, f, indent=1)


if __name__ == "__main__":
    main()
