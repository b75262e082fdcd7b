#!/usr/bin/env python3
"""Greedy continuation of the demo model in memra vs the PyTorch reference train.py recorded.

  python3 tools/train_demo/check_greedy.py MEMRA MODEL.gguf REFERENCE [--backend cpu|cuda] [memra run flags...]

REFERENCE is a key of tools/train_demo/results.json: "fp32" (the trained weights; MODEL = the
f32 export) or "bf16_weights" (the same model with every weight rounded to bf16; MODEL =
`convert_hf_to_gguf.py --type f32 --round-bf16`). Runs `memra run --tokens PROMPT_IDS -n 64
--ignore-eos --print-token-ids` and compares the ids; exit 0 when all 64 are identical, else 1
with the first difference.
"""
import json, os, subprocess, sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    memra, model, key, extra = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    res = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json")))
    if key not in res or "greedy_ids" not in res[key]:
        sys.exit(f"results.json has no greedy_ids under {key!r}")
    want = res[key]["greedy_ids"]
    cmd = [memra, "run", model, "--tokens", ",".join(map(str, res["prompt_ids"])), "-n", str(len(want)),
           "--ignore-eos", "--no-echo", "--print-token-ids", "--temp", "0"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("generated ids: ")]
    if p.returncode != 0 or not lines:
        sys.stderr.write(p.stderr)
        sys.exit(f"memra run failed (rc {p.returncode})")
    got = [int(x) for x in lines[-1][len("generated ids: "):].split(",")]
    same = sum(1 for a, b in zip(got, want) if a == b)
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    speed = [l for l in p.stderr.splitlines() if "tok/s" in l]
    print(f"greedy vs PyTorch ({key}): {'identical' if got == want else 'DIFFERENT'} "
          f"({same}/{len(want)} equal{'' if first is None else f', first difference at {first}'})"
          f" [{' '.join(extra) or 'default backend'}]")
    if speed:
        print("  " + speed[-1])
    sys.exit(0 if got == want else 1)


if __name__ == "__main__":
    main()
