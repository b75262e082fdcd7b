#!/usr/bin/env python3
"""HF transformers `qwen3_5` text checkpoint -> qwen35 GGUF (what llama.cpp's converter does).

  python3 tools/convert_hf_to_gguf.py CKPT_DIR TOKENIZER_JSON OUT.gguf [--type q8_0|bf16|f32] [--name NAME]
                                      [--round-bf16]

Mapping per shared/design/hf-qwen35-mapping.md, inverted:
  * RMSNorm weights (input/post-attention/final/q_norm/k_norm) stored as 1 + w; linear_attn.norm as-is;
  * ssm_a = -exp(A_log) (computed in f64);
  * value heads reordered from HF's grouped order (head j = kh*r + s) to GGUF's tiled order (s*Hk + kh)
    in in_proj_qkv's V rows, in_proj_z, in_proj_b/a, A_log, dt_bias, conv1d's V channels, out_proj's columns;
  * q_proj kept as-is: HF's per-head [q_h | gate_h] layout is already GGUF's interleaved layout;
  * conv1d [C, 1, K] squeezed to [C, K].
Tokenizer: gpt2-type byte-level BPE with pre `qwen2`, tokens/token_type/merges, special ids, ChatML template.
Needs: pip install gguf numpy.
"""
import argparse, json, os, struct, sys
import numpy as np
import gguf

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def load_safetensors(ckpt):
    files = sorted(f for f in os.listdir(ckpt) if f.endswith(".safetensors"))
    out = {}
    for fn in files:
        with open(os.path.join(ckpt, fn), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            hdr = json.loads(f.read(n))
            base = 8 + n
            buf = np.memmap(os.path.join(ckpt, fn), dtype=np.uint8, mode="r")
            for k, v in hdr.items():
                if k == "__metadata__":
                    continue
                a, b = v["data_offsets"]
                raw = np.array(buf[base + a:base + b])
                if v["dtype"] == "F32":
                    t = raw.view(np.float32)
                elif v["dtype"] == "BF16":
                    t = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
                elif v["dtype"] == "F16":
                    t = raw.view(np.float16).astype(np.float32)
                else:
                    raise SystemExit(f"{fn}: tensor {k}: dtype {v['dtype']} not supported")
                out[k] = t.reshape(v["shape"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt"); ap.add_argument("tokenizer"); ap.add_argument("out")
    ap.add_argument("--type", default="q8_0", choices=["q8_0", "bf16", "f32"])
    ap.add_argument("--name", default="qwen35-demo")
    ap.add_argument("--description", default="")
    ap.add_argument("--round-bf16", action="store_true",
                    help="round every checkpoint weight to bf16 (nearest even) first, as torch's "
                         ".to(torch.bfloat16) does: with --type f32 the file holds exactly the weights of "
                         "a PyTorch run with bf16-rounded weights (train.py's 'bf16_weights' reference)")
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.ckpt, "config.json")))
    cfg = cfg.get("text_config", cfg)
    sd = load_safetensors(a.ckpt)
    if a.round_bf16:
        def bf16(x):
            u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
            u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
            return u.astype(np.uint32).view(np.float32).reshape(x.shape)
        sd = {k: bf16(v) for k, v in sd.items()}
    sd = {k.replace("model.language_model.", "model."): v for k, v in sd.items()}
    used = set()

    def get(k):
        if k not in sd:
            raise SystemExit(f"missing HF tensor {k}")
        used.add(k)
        return sd[k].astype(np.float32)

    L, E = cfg["num_hidden_layers"], cfg["hidden_size"]
    Hk, Hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    r = Hv // Hk
    perm = [(g % Hk) * r + g // Hk for g in range(Hv)]  # GGUF head g <- HF head perm[g]
    vrows = lambda x, d: x.reshape(Hv, d, *x.shape[1:])[perm].reshape(x.shape)  # per-head blocks on axis 0
    layer_types = cfg.get("layer_types") or [
        "full_attention" if (i + 1) % cfg.get("full_attention_interval", 4) == 0 else "linear_attention" for i in range(L)]
    interval = cfg.get("full_attention_interval", 4)
    assert all((t == "full_attention") == ((i + 1) % interval == 0) for i, t in enumerate(layer_types)), \
        "layer_types must follow full_attention_interval"
    rope = cfg.get("rope_parameters") or {}
    prf = rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 0.25))
    n_rot = int(cfg["head_dim"] * prf)
    sections = list(rope.get("mrope_section", [11, 11, 10])) + [0]

    tensors = []
    one_plus = lambda x: x + 1.0
    tensors.append(("token_embd.weight", get("model.embed_tokens.weight")))
    for i in range(L):
        p, g = f"model.layers.{i}.", f"blk.{i}."
        tensors.append((g + "attn_norm.weight", one_plus(get(p + "input_layernorm.weight"))))
        tensors.append((g + "post_attention_norm.weight", one_plus(get(p + "post_attention_layernorm.weight"))))
        if layer_types[i] == "linear_attention":
            la = p + "linear_attn."
            qkv = get(la + "in_proj_qkv.weight")
            kd = 2 * Hk * dk
            qkv = np.concatenate([qkv[:kd], vrows(qkv[kd:], dv)])
            conv = get(la + "conv1d.weight").reshape(qkv.shape[0], -1)
            conv = np.concatenate([conv[:kd], vrows(conv[kd:], dv)])
            a_log = get(la + "A_log").astype(np.float64)
            out_w = get(la + "out_proj.weight")
            out_w = out_w.reshape(E, Hv, dv)[:, perm].reshape(E, Hv * dv)
            tensors += [
                (g + "attn_qkv.weight", qkv),
                (g + "attn_gate.weight", vrows(get(la + "in_proj_z.weight"), dv)),
                (g + "ssm_conv1d.weight", conv),
                (g + "ssm_dt.bias", get(la + "dt_bias")[perm]),
                (g + "ssm_a", (-np.exp(a_log)).astype(np.float32)[perm]),
                (g + "ssm_beta.weight", get(la + "in_proj_b.weight")[perm]),
                (g + "ssm_alpha.weight", get(la + "in_proj_a.weight")[perm]),
                (g + "ssm_norm.weight", get(la + "norm.weight")),
                (g + "ssm_out.weight", out_w)]
        else:
            sa = p + "self_attn."
            tensors += [
                (g + "attn_q.weight", get(sa + "q_proj.weight")),
                (g + "attn_k.weight", get(sa + "k_proj.weight")),
                (g + "attn_v.weight", get(sa + "v_proj.weight")),
                (g + "attn_output.weight", get(sa + "o_proj.weight")),
                (g + "attn_q_norm.weight", one_plus(get(sa + "q_norm.weight"))),
                (g + "attn_k_norm.weight", one_plus(get(sa + "k_norm.weight")))]
        tensors += [(g + "ffn_gate.weight", get(p + "mlp.gate_proj.weight")),
                    (g + "ffn_up.weight", get(p + "mlp.up_proj.weight")),
                    (g + "ffn_down.weight", get(p + "mlp.down_proj.weight"))]
    tensors.append(("output_norm.weight", one_plus(get("model.norm.weight"))))
    if not cfg.get("tie_word_embeddings", False):
        tensors.append(("output.weight", get("lm_head.weight")))
    else:
        used.add("lm_head.weight")
    left = sorted(set(sd) - used - {k for k in sd if ".mtp." in k or k.startswith("mtp.")})
    if left:
        raise SystemExit(f"unmapped HF tensors: {left[:8]}")

    w = gguf.GGUFWriter(a.out, "qwen35")
    w.add_name(a.name)
    if a.description:
        w.add_description(a.description)
    arch = "qwen35"
    w.add_context_length(cfg.get("max_position_embeddings", 4096))
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_rope_freq_base(float(rope.get("rope_theta", cfg.get("rope_theta", 1e7))))
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    w.add_rope_dimension_count(n_rot)
    w.add_array(f"{arch}.rope.dimension_sections", [int(x) for x in sections[:4]])
    w.add_uint32(f"{arch}.ssm.conv_kernel", cfg["linear_conv_kernel_dim"])
    w.add_uint32(f"{arch}.ssm.state_size", dk)
    w.add_uint32(f"{arch}.ssm.group_count", Hk)
    w.add_uint32(f"{arch}.ssm.time_step_rank", Hv)
    w.add_uint32(f"{arch}.ssm.inner_size", Hv * dv)
    w.add_uint32(f"{arch}.full_attention_interval", interval)
    w.add_uint32(f"{arch}.nextn_predict_layers", 0)
    qt = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "bf16": gguf.GGMLQuantizationType.BF16,
          "f32": gguf.GGMLQuantizationType.F32}[a.type]
    w.add_file_type({"q8_0": 7, "bf16": 32, "f32": 0}[a.type])

    # Tokenizer, as real Qwen GGUFs carry it.
    tj = json.load(open(a.tokenizer, encoding="utf-8"))
    vocab = dict(tj["model"]["vocab"])
    for t in tj.get("added_tokens", []):
        vocab[t["content"]] = t["id"]
    n_vocab = get("model.embed_tokens.weight").shape[0]
    toks = [None] * n_vocab
    for s, i in vocab.items():
        toks[i] = s
    specials = {t["content"] for t in tj.get("added_tokens", []) if t.get("special")}
    types = []
    for i, s in enumerate(toks):
        if s is None:
            toks[i] = f"[PAD{i}]"; types.append(gguf.TokenType.UNUSED)
        else:
            types.append(gguf.TokenType.CONTROL if s in specials else gguf.TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(merges)
    eot = vocab["<|endoftext|>"]
    w.add_eos_token_id(eot)
    w.add_pad_token_id(eot)
    w.add_bos_token_id(eot)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    for name, t in tensors:
        t = np.ascontiguousarray(t, dtype=np.float32)
        keep_f32 = t.ndim == 1 or name.endswith("ssm_conv1d.weight") or qt == gguf.GGMLQuantizationType.F32
        if keep_f32:
            w.add_tensor(name, t)
        elif qt == gguf.GGMLQuantizationType.Q8_0 and t.shape[-1] % 32 != 0:
            w.add_tensor(name, t)
        else:
            q = gguf.quants.quantize(t, qt)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}: {len(tensors)} tensors, {os.path.getsize(a.out)} bytes")


if __name__ == "__main__":
    main()
