// Elementwise ops, casts, copies and small per-token ops. Sizes are run-time arguments (the
// valid rows of the bucket); grids cover the bucket and loop (grid-stride).
#include "Common.cuh"
#include "ElementwiseParams.h"

// y = a + b / a * b, b broadcast over a's leading dims (nb divides n).
extern "C" __global__ void add_f32(const BroadcastParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(i, p.n) p.y[i] = p.a[i] + p.b[p.nb == p.n ? i : i % p.nb];
}
extern "C" __global__ void mul_f32(const BroadcastParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(i, p.n) p.y[i] = p.a[i] * p.b[p.nb == p.n ? i : i % p.nb];
}
// mul_rows: one factor per row of p.nb values (Step 3.5's head-wise attention gate).
extern "C" __global__ void mul_rows_f32(const BroadcastParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(i, p.n) p.y[i] = p.a[i] * p.b[i / p.nb];
}
extern "C" __global__ void scale_f32(const ScaleParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(i, p.n) p.y[i] = p.x[i] * p.factor;
}
extern "C" __global__ void sigmoid_f32(const UnaryParams p) {
  memra_grid_dependency();
  const float* x = static_cast<const float*>(p.x);
  float* y = static_cast<float*>(p.y);
  MEMRA_GRID_STRIDE(i, p.n) y[i] = sigmoidf_(x[i]);
}
extern "C" __global__ void silu_f32(const UnaryParams p) {
  memra_grid_dependency();
  const float* x = static_cast<const float*>(p.x);
  float* y = static_cast<float*>(p.y);
  MEMRA_GRID_STRIDE(i, p.n) y[i] = siluf_(x[i]);
}
// GELU, tanh form, as kernels/cpu/Elementwise.cc's GeluScalar computes it.
extern "C" __global__ void gelu_f32(const UnaryParams p) {
  memra_grid_dependency();
  const float* x = static_cast<const float*>(p.x);
  float* y = static_cast<float*>(p.y);
  MEMRA_GRID_STRIDE(i, p.n) { y[i] = geluf_(x[i]); }
}
extern "C" __global__ void tanh_f32(const UnaryParams p) {
  memra_grid_dependency();
  const float* x = static_cast<const float*>(p.x);
  float* y = static_cast<float*>(p.y);
  MEMRA_GRID_STRIDE(i, p.n) y[i] = tanhf(x[i]);
}
extern "C" __global__ void softplus_f32(const UnaryParams p) {
  memra_grid_dependency();
  const float* x = static_cast<const float*>(p.x);
  float* y = static_cast<float*>(p.y);
  MEMRA_GRID_STRIDE(i, p.n) y[i] = softplusf_(x[i]);
}
extern "C" __global__ void exp_f32(const UnaryParams p) {
  memra_grid_dependency();
  const float* x = static_cast<const float*>(p.x);
  float* y = static_cast<float*>(p.y);
  MEMRA_GRID_STRIDE(i, p.n) y[i] = expf(x[i]);
}
// Element-wise kernels over prefill-sized tensors go four elements a thread where their pointers
// are 16-byte aligned (the arena places tensors at 256-byte offsets; scratch parts may not be):
// one 16-byte load per operand and one index step per four elements (the one-element loop ran
// the 9B's pp4096 swiglu and casts at about a third of the bandwidth). The tail, and unaligned
// calls, element by element from `head`.
__device__ __forceinline__ bool aligned16(const void* a, const void* b, const void* c) {
  return ((reinterpret_cast<unsigned long long>(a) | reinterpret_cast<unsigned long long>(b) |
           reinterpret_cast<unsigned long long>(c)) &
          15) == 0;
}

// y = act(a) * b for a pair kernel, act = silu with swiglu's clamp (glu_) or gelu.
template <bool kGelu>
__device__ __forceinline__ float gate_(float a, float b) {
  return kGelu ? geluf_(a) * b : glu_(siluf_(a), b);
}
template <bool kGelu>
__device__ __forceinline__ void glu_body(const PairParams& p) {
  i64 head = 0;
  if (aligned16(p.a, p.b, p.y)) {
    const float4* a4 = reinterpret_cast<const float4*>(static_cast<const float*>(p.a));
    const float4* b4 = reinterpret_cast<const float4*>(static_cast<const float*>(p.b));
    float4* y4 = reinterpret_cast<float4*>(static_cast<float*>(p.y));
    MEMRA_GRID_STRIDE(i, p.n / 4) {
      const float4 a = a4[i], b = b4[i];
      y4[i] =
          make_float4(gate_<kGelu>(a.x, b.x), gate_<kGelu>(a.y, b.y), gate_<kGelu>(a.z, b.z), gate_<kGelu>(a.w, b.w));
    }
    head = p.n / 4 * 4;
  }
  for (i64 i = head + (i64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (i64)gridDim.x * blockDim.x)
    p.y[i] = gate_<kGelu>(p.a[i], p.b[i]);
}
extern "C" __global__ void swiglu_f32(const PairParams p) {
  memra_grid_dependency();
  glu_body<false>(p);
}
// GeGLU's gating (matmul_swiglu activation gelu): gelu(a) * b.
extern "C" __global__ void geglu_f32(const PairParams p) {
  memra_grid_dependency();
  glu_body<true>(p);
}
// attention_gated's output gate: y = a * sigmoid(g) (sigmoid as sigmoid_f32 computes it).
extern "C" __global__ void mul_sigmoid_f32(const PairParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(i, p.n) p.y[i] = p.a[i] * sigmoidf_(p.b[i]);
}
// attention_gated's head-wise gate: y = a * sigmoid(g) with one g per row of p.nb values (a head).
extern "C" __global__ void mul_sigmoid_rows_f32(const BroadcastParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(i, p.n) p.y[i] = p.a[i] * sigmoidf_(p.b[i / p.nb]);
}
extern "C" __global__ void fill_f32(const FillParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(i, p.n) static_cast<float*>(p.y)[i] = p.f32_value;
}
extern "C" __global__ void fill_i32(const FillParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(i, p.n) static_cast<int*>(p.y)[i] = p.i32_value;
}

// Casts between f32 and the 16-bit types (the GEMM operand copies).
template <bool kBf16>
__device__ __forceinline__ u16 to16_(float x) {
  return kBf16 ? f32_to_bf16(x) : f32_to_f16(x);
}
template <bool kBf16>
__device__ __forceinline__ void cast_to16_body(const UnaryParams& p) {
  const float* x = static_cast<const float*>(p.x);
  u16* y = static_cast<u16*>(p.y);
  i64 head = 0;
  if (aligned16(x, x, x) && (reinterpret_cast<unsigned long long>(y) & 7) == 0) {  // y in 8-byte pieces
    const float4* x4 = reinterpret_cast<const float4*>(x);
    uint2* y2 = reinterpret_cast<uint2*>(y);
    MEMRA_GRID_STRIDE(i, p.n / 4) {
      const float4 v = x4[i];
      y2[i] = make_uint2((unsigned)to16_<kBf16>(v.x) | ((unsigned)to16_<kBf16>(v.y) << 16),
                         (unsigned)to16_<kBf16>(v.z) | ((unsigned)to16_<kBf16>(v.w) << 16));
    }
    head = p.n / 4 * 4;
  }
  for (i64 i = head + (i64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (i64)gridDim.x * blockDim.x)
    y[i] = to16_<kBf16>(x[i]);
}
extern "C" __global__ void cast_f32_bf16(const UnaryParams p) {
  memra_grid_dependency();
  cast_to16_body<true>(p);
}
extern "C" __global__ void cast_f32_f16(const UnaryParams p) {
  memra_grid_dependency();
  cast_to16_body<false>(p);
}
extern "C" __global__ void cast_bf16_f32(const UnaryParams p) {
  memra_grid_dependency();
  const u16* x = static_cast<const u16*>(p.x);
  float* y = static_cast<float*>(p.y);
  MEMRA_GRID_STRIDE(i, p.n) y[i] = bf16_to_f32(x[i]);
}
extern "C" __global__ void cast_f16_f32(const UnaryParams p) {
  memra_grid_dependency();
  const u16* x = static_cast<const u16*>(p.x);
  float* y = static_cast<float*>(p.y);
  MEMRA_GRID_STRIDE(i, p.n) y[i] = f16_to_f32(x[i]);
}

// Copies `len` slices of `inner` elements per outer index between two [outer, dim, inner]
// tensors: dst[o, dst_off + j, :] = src[o, src_off + j, :] for j < len (concat, split, view,
// take_last_row). 4-byte elements.
extern "C" __global__ void copy_axis_32(const CopyAxisParams p) {
  memra_grid_dependency();
  const float* src = p.src;
  float* dst = p.dst;
  const i64 outer = p.outer, src_dim = p.src_dim, src_off = p.src_off, dst_dim = p.dst_dim, dst_off = p.dst_off,
            len = p.len, inner = p.inner;
  const i64 n = outer * len * inner;
  MEMRA_GRID_STRIDE(i, n) {
    const i64 c = i % inner, r = i / inner, j = r % len, o = r / len;
    dst[(o * dst_dim + dst_off + j) * inner + c] = src[(o * src_dim + src_off + j) * inner + c];
  }
}

// copy_axis_32 in 16-byte pieces, for slices whose rows (len * inner elements) and row starts are
// multiples of four elements and whose tensors are 16-byte aligned (the unit checks both): one
// index division per four elements instead of two per element (a 4096 x 8192 split ran at a third
// of the bandwidth).
extern "C" __global__ void copy_axis_128(const CopyAxisParams p) {
  memra_grid_dependency();
  const float4* src = reinterpret_cast<const float4*>(p.src);
  float4* dst = reinterpret_cast<float4*>(p.dst);
  const i64 w = p.len * p.inner / 4, n = p.outer * w;
  const i64 sd = p.src_dim * p.inner / 4, so = p.src_off * p.inner / 4;
  const i64 dd = p.dst_dim * p.inner / 4, dof = p.dst_off * p.inner / 4;
  if (n < 0x7fffffff) {  // 32-bit index arithmetic
    const unsigned wu = (unsigned)w;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (unsigned)n; i += gridDim.x * blockDim.x) {
      const unsigned o = i / wu, c = i - o * wu;
      dst[(i64)o * dd + dof + c] = src[(i64)o * sd + so + c];
    }
  } else {
    MEMRA_GRID_STRIDE(i, n) {
      const i64 o = i / w, c = i - o * w;
      dst[o * dd + dof + c] = src[o * sd + so + c];
    }
  }
}

// pos[t] = counter + t (t < n_tok); advance: counter += n_tok.
extern "C" __global__ void positions(const PositionsParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(t, p.n_tok) p.pos[t] = p.counter[0] + (int)t;
}
extern "C" __global__ void advance_positions(const PositionsParams p) {
  memra_grid_dependency();
  if (blockIdx.x == 0 && threadIdx.x == 0) p.counter[0] += p.n_tok;
}

#ifdef QG_HEADS
// q[t, h, d] = qg[t, h*2*D + d]; gate[t, h, d] = qg[t, h*2*D + D + d].
extern "C" __global__ void q_gate_split(const QGateSplitParams p) {
  memra_grid_dependency();
  const float* qg = p.qg;
  float* q = p.q;
  float* gate = p.gate;
  const int n_tok = p.n_tok;
  const i64 n = (i64)n_tok * QG_HEADS * QG_DIM;
#if QG_DIM % 4 == 0
  if (aligned16(qg, q, gate)) {  // four elements a thread (a head's halves are whole 16-byte pieces)
    const float4* qg4 = reinterpret_cast<const float4*>(qg);
    float4* q4 = reinterpret_cast<float4*>(q);
    float4* g4 = reinterpret_cast<float4*>(gate);
    MEMRA_GRID_STRIDE(i, n / 4) {
      const i64 d = i % (QG_DIM / 4), th = i / (QG_DIM / 4);
      q4[i] = qg4[th * 2 * (QG_DIM / 4) + d];
      g4[i] = qg4[th * 2 * (QG_DIM / 4) + QG_DIM / 4 + d];
    }
    return;
  }
#endif
  MEMRA_GRID_STRIDE(i, n) {
    const i64 d = i % QG_DIM, th = i / QG_DIM;
    q[i] = qg[th * 2 * QG_DIM + d];
    gate[i] = qg[th * 2 * QG_DIM + QG_DIM + d];
  }
}
#endif

#ifdef GATE_HEADS
// beta = sigmoid(b); g = ssm_a[h] * softplus(a + dt_bias[h]); [n_tok, GATE_HEADS].
extern "C" __global__ void delta_net_gates(const DeltaNetGatesParams p) {
  memra_grid_dependency();
  const float *b = p.b, *a = p.a, *dt_bias = p.dt_bias, *ssm_a = p.ssm_a;
  float *beta = p.beta, *g = p.g;
  const int n_tok = p.n_tok;
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
extern "C" __global__ void embed(const EmbedParams p) {
  memra_grid_dependency();
  const int* ids = p.ids;
  const void* table = p.table;
  float* y = p.y;
  const int n_tok = p.n_tok;
  const i64 n = (i64)n_tok * EMBED_DIM;
  MEMRA_GRID_STRIDE(i, n) {
    const i64 t = i / EMBED_DIM, e = i % EMBED_DIM;
    y[i] = load_as_f32<EMBED_TYPE>(table, (i64)ids[t] * EMBED_DIM + e);
  }
}
#endif

#ifdef KV_WIDTH
#ifndef KV_RING
#define KV_RING 0
#endif
// k_cache[pos[t]] = k[t], v_cache[pos[t]] = v[t]; rows of KV_WIDTH (= Hkv * D) elements of the
// caches' storage types KV_KT / KV_VT (Common.cuh codes; 16-bit rounded to nearest-even, q8_0
// quantized a block a warp: KV_WIDTH is then a multiple of 32 and the grid's threads come in whole
// warps, so a warp's 32 elements are one block of one row).
extern "C" __global__ void kv_append(const KvAppendParams p) {
  memra_grid_dependency();
  const float *k = p.k, *v = p.v;
  void *k_cache = p.k_cache, *v_cache = p.v_cache;
  const int* pos = p.pos;
  const int n_tok = p.n_tok;
  const i64 n = (i64)n_tok * KV_WIDTH;
  MEMRA_GRID_STRIDE(i, n) {
    const i64 t = i / KV_WIDTH, c = i % KV_WIDTH;
    // KV_RING > 0: a sliding-window ring of that many rows (ir/Ops.def kv_append ring).
    const i64 row = KV_RING > 0 ? (i64)(pos[t] % KV_RING) : (i64)pos[t];
    const i64 dst = row * KV_WIDTH + c;
    kv_store_warp<KV_KT>(k_cache, dst, k[i]);
    kv_store_warp<KV_VT>(v_cache, dst, v[i]);
  }
}

#ifdef KV_HEAD_DIM
// kv_append with v_norm_eps (fuse-kv-append-norm): each value head row of KV_HEAD_DIM (a multiple of
// 32, at most 512) RMS-normalized without a weight before it is stored, by one warp a (token,
// head) row, lane l holding columns l + 32 j: Norm.cu's rms_norm in warp rows (the same sums, the
// same v * s), so the stored values equal the two-launch form's.
extern "C" __global__ void __launch_bounds__(256) kv_append_vnorm(const KvAppendParams p) {
  memra_grid_dependency();
  constexpr int kPer = KV_HEAD_DIM / 32, kHeads = KV_WIDTH / KV_HEAD_DIM;
  const int lane = threadIdx.x & 31;
  const i64 rows = (i64)p.n_tok * kHeads;
  for (i64 r = (i64)blockIdx.x * 8 + (threadIdx.x >> 5); r < rows; r += (i64)gridDim.x * 8) {
    const i64 t = r / kHeads, h = r % kHeads;
    const i64 row = KV_RING > 0 ? (i64)(p.pos[t] % KV_RING) : (i64)p.pos[t];
    const float* kr = p.k + r * KV_HEAD_DIM;
    float v[kPer];
    const float s = warp_row_rms_scale(p.v + r * KV_HEAD_DIM, v, p.v_norm_eps);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const i64 dst = row * KV_WIDTH + h * KV_HEAD_DIM + lane + 32 * j;
      kv_store_warp<KV_KT>(p.k_cache, dst, kr[lane + 32 * j]);
      kv_store_warp<KV_VT>(p.v_cache, dst, (v[j] * s) * 1.0f);
    }
  }
}
#endif
#endif
