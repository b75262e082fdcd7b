#!/usr/bin/env python3
"""Trains memra's demo model: transformers' qwen3_5 text model on data/train.npy (see prepare_data.py).

  python3 tools/train_demo/train.py OUT_DIR [--seconds 200]
Writes OUT_DIR/ckpt (HF checkpoint, fp32 safetensors + config), loss.png, results.json
(held-out perplexity and 64-token greedy continuations computed in PyTorch, fp32 and with
bf16-rounded weights). The LR schedule (warmup + cosine) follows wall-clock time, so the step
count depends on the machine; everything else is seeded.
"""
import argparse, json, math, os, random, time
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT = "And God said unto Moses, "


def make_config(vocab):
    try:
        from transformers import Qwen3_5TextConfig
    except ImportError:
        from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
    layers = 8
    return Qwen3_5TextConfig(
        vocab_size=vocab, hidden_size=256, intermediate_size=768, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        linear_conv_kernel_dim=4, linear_key_head_dim=64, linear_value_head_dim=64,
        linear_num_key_heads=2, linear_num_value_heads=4,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)],
        full_attention_interval=4, rms_norm_eps=1e-6, tie_word_embeddings=True,
        max_position_embeddings=4096, hidden_act="silu", attention_dropout=0.0,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [3, 3, 2], "mrope_interleaved": True},
        bos_token_id=0, eos_token_id=0, pad_token_id=0)


def make_model(cfg):
    try:
        from transformers import Qwen3_5ForCausalLM
    except ImportError:
        from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5ForCausalLM
    return Qwen3_5ForCausalLM(cfg)


@torch.no_grad()
def perplexity(model, ids, ctx, dev):
    nll, n = 0.0, 0
    for s in range(0, len(ids) - 1, ctx):
        x = torch.tensor(ids[s:s + ctx + 1], dtype=torch.long, device=dev)[None]
        if x.shape[1] < 2:
            break
        logits = model(x[:, :-1]).logits.float()
        nll += torch.nn.functional.cross_entropy(logits[0], x[0, 1:], reduction="sum").item()
        n += x.shape[1] - 1
    return math.exp(nll / n), n


@torch.no_grad()
def greedy(model, ids, n, dev):
    x = list(ids)
    for _ in range(n):
        logits = model(torch.tensor(x, device=dev)[None]).logits[0, -1]
        x.append(int(logits.argmax()))
    return x[len(ids):]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=30)  # the shipped model: 30 s on an H200 (~4 passes; longer overfits)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    random.seed(a.seed); np.random.seed(a.seed); torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(HERE, "data", "tokenizer.json"))
    train = np.load(os.path.join(HERE, "data", "train.npy")).astype(np.int64)
    held = np.load(os.path.join(HERE, "data", "heldout.npy")).astype(np.int64)
    cfg = make_config(tok.get_vocab_size())
    model = make_model(cfg).to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    print("params", nparams, flush=True)
    decay = [p for n_, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n_, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    rng = np.random.default_rng(a.seed)
    t_train = torch.from_numpy(train).to(dev)
    log, t0, step = [], time.time(), 0
    while True:
        frac = (time.time() - t0) / a.seconds
        if frac >= 1:
            break
        lr = a.lr * min(1.0, frac / 0.05) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.from_numpy(rng.integers(0, len(train) - a.seq - 1, a.batch)).to(dev)
        idx = starts[:, None] + torch.arange(a.seq + 1, device=dev)[None]
        batch = t_train[idx]
        with torch.autocast(dev, dtype=torch.bfloat16):
            logits = model(batch[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                                 batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 10 == 0 or step == 1:
            log.append((step, time.time() - t0, loss.item(), lr))
            if step % 50 == 0 or step == 1:
                print(f"step {step} t {time.time()-t0:.0f}s loss {loss.item():.4f} lr {lr:.2e}", flush=True)
    train_time = time.time() - t0
    model.eval()
    res = {"params": nparams, "steps": step, "train_seconds": train_time, "tokens_seen": step * a.batch * a.seq,
           "final_train_loss": log[-1][2], "config": cfg.to_dict(), "prompt": PROMPT, "seed": a.seed}
    pids = tok.encode(PROMPT).ids
    res["prompt_ids"] = pids
    for name, m in (("fp32", model), ("bf16_weights", None)):
        if m is None:
            m = make_model(cfg).to(dev).eval()
            m.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in model.state_dict().items()})
        ppl, n = perplexity(m, held.tolist(), a.seq, dev)
        g = greedy(m, pids, 64, dev)
        res[name] = {"heldout_ppl": ppl, "heldout_tokens": n, "heldout_ctx": a.seq, "greedy_ids": g,
                     "greedy_text": tok.decode(g)}
        print(name, "held-out ppl", ppl, "greedy:", repr(PROMPT + tok.decode(g)), flush=True)
    os.makedirs(a.out, exist_ok=True)
    model.save_pretrained(os.path.join(a.out, "ckpt"), safe_serialization=True)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    try:
        import matplotlib; matplotlib.use("Agg"); import matplotlib.pyplot as plt
        plt.figure(figsize=(6, 4))
        plt.plot([l[0] for l in log], [l[2] for l in log])
        plt.xlabel("step"); plt.ylabel("train loss (nats/token)"); plt.yscale("log")
        plt.title(f"memra demo qwen35, {nparams/1e6:.1f}M params"); plt.grid(alpha=.3)
        plt.savefig(os.path.join(a.out, "loss.png"), dpi=100)
    except ImportError as e:
        print("no matplotlib:", e)
    with open(os.path.join(a.out, "loss.tsv"), "w") as f:
        f.write("step\tseconds\tloss\tlr\n" + "".join(f"{s}\t{t:.2f}\t{l:.5f}\t{r:.3e}\n" for s, t, l, r in log))


if __name__ == "__main__":
    main()
