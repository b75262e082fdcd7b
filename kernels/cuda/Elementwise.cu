// Elementwise ops, casts, copies and small per-token ops. Sizes are run-time arguments (the
// valid rows of the bucket); grids cover the bucket and loop (grid-stride).
#include "Common.cuh"

// y = a + b / a * b, b broadcast over a's leading dims (nb divides n).
extern "C" __global__ void add_f32(const float* a, const float* b, float* y, i64 n, i64 nb) {
  MEMRA_GRID_STRIDE(i, n) y[i] = a[i] + b[nb == n ? i : i % nb];
}
extern "C" __global__ void mul_f32(const float* a, const float* b, float* y, i64 n, i64 nb) {
  MEMRA_GRID_STRIDE(i, n) y[i] = a[i] * b[nb == n ? i : i % nb];
}
extern "C" __global__ void scale_f32(const float* x, float* y, i64 n, float factor) {
  MEMRA_GRID_STRIDE(i, n) y[i] = x[i] * factor;
}
extern "C" __global__ void sigmoid_f32(const float* x, float* y, i64 n) {
  MEMRA_GRID_STRIDE(i, n) y[i] = sigmoidf_(x[i]);
}
extern "C" __global__ void silu_f32(const float* x, float* y, i64 n) {
  MEMRA_GRID_STRIDE(i, n) y[i] = siluf_(x[i]);
}
extern "C" __global__ void softplus_f32(const float* x, float* y, i64 n) {
  MEMRA_GRID_STRIDE(i, n) y[i] = softplusf_(x[i]);
}
extern "C" __global__ void exp_f32(const float* x, float* y, i64 n) {
  MEMRA_GRID_STRIDE(i, n) y[i] = expf(x[i]);
}
extern "C" __global__ void swiglu_f32(const float* g, const float* u, float* y, i64 n) {
  MEMRA_GRID_STRIDE(i, n) y[i] = siluf_(g[i]) * u[i];
}
// attention_gated's output gate: y = a * sigmoid(g) (sigmoid as sigmoid_f32 computes it).
extern "C" __global__ void mul_sigmoid_f32(const float* a, const float* g, float* y, i64 n) {
  MEMRA_GRID_STRIDE(i, n) y[i] = a[i] * sigmoidf_(g[i]);
}
extern "C" __global__ void fill_f32(float* y, i64 n, float v) {
  MEMRA_GRID_STRIDE(i, n) y[i] = v;
}
extern "C" __global__ void fill_i32(int* y, i64 n, int v) {
  MEMRA_GRID_STRIDE(i, n) y[i] = v;
}

// Casts between f32 and the 16-bit types (the GEMM operand copies).
extern "C" __global__ void cast_f32_bf16(const float* x, u16* y, i64 n) {
  MEMRA_GRID_STRIDE(i, n) y[i] = f32_to_bf16(x[i]);
}
extern "C" __global__ void cast_f32_f16(const float* x, u16* y, i64 n) {
  MEMRA_GRID_STRIDE(i, n) y[i] = f32_to_f16(x[i]);
}
extern "C" __global__ void cast_bf16_f32(const u16* x, float* y, i64 n) {
  MEMRA_GRID_STRIDE(i, n) y[i] = bf16_to_f32(x[i]);
}
extern "C" __global__ void cast_f16_f32(const u16* x, float* y, i64 n) {
  MEMRA_GRID_STRIDE(i, n) y[i] = f16_to_f32(x[i]);
}

// Copies `len` slices of `inner` elements per outer index between two [outer, dim, inner]
// tensors: dst[o, dst_off + j, :] = src[o, src_off + j, :] for j < len (concat, split, view,
// take_last_row). 4-byte elements.
extern "C" __global__ void copy_axis_32(const float* src, float* dst, i64 outer, i64 src_dim,
                                        i64 src_off, i64 dst_dim, i64 dst_off, i64 len, i64 inner) {
  const i64 n = outer * len * inner;
  MEMRA_GRID_STRIDE(i, n) {
    const i64 c = i % inner, r = i / inner, j = r % len, o = r / len;
    dst[(o * dst_dim + dst_off + j) * inner + c] = src[(o * src_dim + src_off + j) * inner + c];
  }
}

// pos[t] = counter + t (t < n_tok); advance: counter += n_tok.
extern "C" __global__ void positions(const int* counter, int* pos, int n_tok) {
  MEMRA_GRID_STRIDE(t, n_tok) pos[t] = counter[0] + (int)t;
}
extern "C" __global__ void advance_positions(int* counter, int n_tok) {
  if (blockIdx.x == 0 && threadIdx.x == 0) counter[0] += n_tok;
}

#ifdef QG_HEADS
// q[t, h, d] = qg[t, h*2*D + d]; gate[t, h, d] = qg[t, h*2*D + D + d].
extern "C" __global__ void q_gate_split(const float* qg, float* q, float* gate, int n_tok) {
  const i64 n = (i64)n_tok * QG_HEADS * QG_DIM;
  MEMRA_GRID_STRIDE(i, n) {
    const i64 d = i % QG_DIM, th = i / QG_DIM;
    q[i] = qg[th * 2 * QG_DIM + d];
    gate[i] = qg[th * 2 * QG_DIM + QG_DIM + d];
  }
}
#endif

#ifdef GATE_HEADS
// beta = sigmoid(b); g = ssm_a[h] * softplus(a + dt_bias[h]); [n_tok, GATE_HEADS].
extern "C" __global__ void delta_net_gates(const float* b, const float* a, const float* dt_bias,
                                           const float* ssm_a, float* beta, float* g, int n_tok) {
  const i64 n = (i64)n_tok * GATE_HEADS;
  MEMRA_GRID_STRIDE(i, n) {
    const int h = (int)(i % GATE_HEADS);
    beta[i] = sigmoidf_(b[i]);
    g[i] = softplusf_(a[i] + dt_bias[h]) * ssm_a[h];
  }
}
#endif

#ifdef EMBED_DIM
// y[t, :] = table[ids[t], :] (table stored as EMBED_TYPE: 0 f32, 1 f16, 2 bf16). Ids are
// checked on the host before the launch.
extern "C" __global__ void embed(const int* ids, const void* table, float* y, int n_tok) {
  const i64 n = (i64)n_tok * EMBED_DIM;
  MEMRA_GRID_STRIDE(i, n) {
    const i64 t = i / EMBED_DIM, e = i % EMBED_DIM;
    y[i] = load_as_f32<EMBED_TYPE>(table, (i64)ids[t] * EMBED_DIM + e);
  }
}
#endif

#ifdef KV_WIDTH
// k_cache[pos[t]] = k[t], v_cache[pos[t]] = v[t]; rows of KV_WIDTH (= Hkv * D) floats.
extern "C" __global__ void kv_append(const float* k, const float* v, float* k_cache,
                                     float* v_cache, const int* pos, int n_tok) {
  const i64 n = (i64)n_tok * KV_WIDTH;
  MEMRA_GRID_STRIDE(i, n) {
    const i64 t = i / KV_WIDTH, c = i % KV_WIDTH;
    const i64 dst = (i64)pos[t] * KV_WIDTH + c;
    k_cache[dst] = k[i];
    v_cache[dst] = v[i];
  }
}
#endif
