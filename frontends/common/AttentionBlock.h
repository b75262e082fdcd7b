// Causal self-attention over a per-layer KV cache, optionally with an output gate: the attention
// block of qwen35 (gated) and the starting point of the other families' (qwen35moe's is the
// same; Gemma 4 and Step 3.5 attend without the interleaved gate).
//
//   q = attn_q · h (with the gate: per head [q_h | gate_h], split by q_gate_split)
//   k = attn_k · h, v = attn_v · h                      as [T, heads, head_dim]
//   q, k = rms_norm(·, attn_{q,k}_norm) per head         (qk_norm)
//   q, k = rope(·, pos, n_rot, rope_base)
//   kv_append(k, v); o = attention(q, caches, pos, scale) (⊙ sigmoid(gate) with the gate)
//   out = attn_output · o                                 h [T, n_embd] -> [T, n_embd]
//
// Tensors blk.N.attn_{q,k,v,output}.weight (+ attn_{q,k}_norm.weight), states blk.N.k_cache and
// blk.N.v_cache (kv, [n_ctx, n_head_kv, head_dim], attribute layer = N). Nodes carry llama.cpp's
// names (q_gated-N, Kcur_proj-N, Vcur-N, Qcur_normed-N, Kcur_normed-N, Qcur-N, Kcur-N,
// attn_pregate-N, gate_sigmoid-N, attn_gated-N, attn_output-N).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "frontends/LowerOptions.h"
#include "frontends/common/LayerContext.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

struct AttentionParams {
  enum class Gate {
    kNone,          // plain attention: attn_q {n_embd, head_dim * n_head}
    kInterleavedQ,  // attn_q {n_embd, 2 * head_dim * n_head} holds [q_h | gate_h] per head;
                    // o ⊙= sigmoid(gate) (Qwen3.5's gated attention)
  };
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_rot = 0;  // rotary dims of each head (NeoX pairs)
  double rope_base = 10000.0;
  double norm_eps = 0;  // of the q/k norms
  double scale = 0;     // softmax scale (1/sqrt(head_dim) for most families)
  Gate gate = Gate::kNone;
  bool qk_norm = true;  // per-head RMS norm of q and k (attn_q_norm, attn_k_norm {head_dim})
};

absl::Status DeclareAttentionWeights(const gguf::GgufFile& file, ir::Module& m, int64_t layer, int64_t n_embd,
                                     const AttentionParams& p);
// Adds blk.N.k_cache and blk.N.v_cache, [n_ctx, Hkv, D] of the given element types. ring > 0:
// they are sliding-window rings for that window (state attribute "ring"; n_ctx is then the
// ring's rows, not the context).
void DeclareKvCache(ir::Module& m, int64_t layer, int64_t n_ctx, const AttentionParams& p,
                    const KvCacheTypes& types = {}, int64_t ring = 0);
// The paged form (a module lowered with slots): [n_blocks, block, Hkv, D] K and V pools.
void DeclarePagedKvCache(ir::Module& m, int64_t layer, int64_t n_blocks, int64_t block, const AttentionParams& p,
                         const KvCacheTypes& types = {});
// h: the normed input [T, n_embd]; pos: i32[T] positions. Appends to the layer's KV cache.
ir::Value* BuildAttention(const LayerContext& c, ir::Value* h, ir::Value* pos, const AttentionParams& p);

}  // namespace memra::frontends
