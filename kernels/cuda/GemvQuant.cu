// Decode GEMV straight from GGUF blocks: y[t, n] = sum_k dequant(W)[n, k] * x[t, k] for T <= 8
// tokens, W [N, GQ_K] stored as the file stores it (row r = the bytes at w + r * row_bytes,
// row_bytes = GQ_K / QK * block_bytes), f32 accumulation. Dequantization follows ggml's
// dequantize_row_* (kernels/formats/Quant*.cc, bit-exact ports): every element is a * v + c with v
// a small integer taken from the block's bits and (a, c) that element's scale and offset as ggml
// computes them (q4_K: a = d * sc, c = -(dmin * m); q6_K: a = d * sc, v = q - 32; ...).
//
// Geometry. A warp owns tiles of GQ_R consecutive rows (gemv_q_swiglu: GQ_R gate rows and the same
// GQ_R up rows); warps are independent (no block barrier) and loop over tiles (gw, gw + warps, ...)
// so the grid can be capped. (gemv_q_moe_down's GQ_SPLIT is the exception: a block shares each
// tile, its warps with work meeting at two named barriers a tile; GQ_PACK puts several of its sub-tiles in
// one chunk, each in 32 / GQ_PACK lanes.) A warp streams its tile's rows chunk by chunk: a chunk is 32 / LPB
// blocks of every row of the tile (LPB = lanes per block), copied global -> shared by one bulk copy
// per row (cp.async.bulk on an mbarrier) into a GQ_ST-stage ring per warp, so GQ_ST - 1 chunks of
// every warp are in flight while it decodes one: the bytes in flight per SM come from the ring, not
// from registers, and the copies cost the warp a few instructions a chunk (16-byte cp.async pieces
// cost ~20 instructions each: a third of the q4_K loop).
// Lane l decodes block l / LPB, part l % LPB of every row of the chunk from shared memory into
// "runs" of 16 elements (4 words of 4 byte-sized values + a, c), reads x for those 16 elements
// once and applies it to every row of the tile and every token; a recursive-halving warp
// reduction ends a tile (V = R*T values, rounded up to a power of 2: V - 1 + 5 - log2 V shuffles).
//
// x: GQ_XQ = 0 reads x as f32 through the read-only cache, values converted exactly (byte into the
// mantissa of 2^23, one subtraction that also removes the format's offset), FMA per element per
// token: the exact path. GQ_XQ = 1 is llama.cpp's mmvq way: gemv_q_quantize_x first writes x as
// int8 per 32 elements (scale amax / 127) plus per-16 sums of the quantized values, and runs are
// dotted with dp4a (4 MACs per instruction, x 1 byte per element), the offset term from the sums.
// GQ_XQ = 2 is the same arithmetic without the extra launch: every block quantizes x into its own
// shared memory (after issuing its first weight copies, so they overlap) and the grid is capped at
// GQ_MINB resident blocks per SM (__launch_bounds__ guarantees them), so x is read ~2x per SM.
//
// Layouts as read (offsets within a block; "part" = the lane's share):
//   q8_0  34 B: f16 d | i8 qs[32].                 LPB 1: the block (2-byte aligned: 9 words + shifts)
//   q4_0  18 B: f16 d | qs[16] (j: lo nibble, j+16: hi). LPB 1 (2-byte aligned)
//   q4_1  20 B: f16 d, m | qs[16].                 LPB 1 (4-byte aligned)
//   q5_0  22 B: f16 d | u32 qh (bit j: 5th bit of j) | qs[16].  LPB 1 (2-byte aligned)
//   q5_1  24 B: f16 d, m | u32 qh | qs[16].        LPB 1 (8-byte aligned)
//   mxfp4 17 B: u8 e (E8M0) | qs[16] (E2M1 codes, table of doubled values). LPB 1 (byte aligned)
//   q2_K  84 B: scales[16] | qs[64] | f16 d, dmin. LPB 4: 16 qs bytes = 64 elements, 4 scales
//   q3_K 110 B: hmask[32] | qs[64] | scales[12] (6-bit, packed) | f16 d. LPB 4 (2-byte aligned)
//   q4_K 144 B: f16 d, dmin | scales[12] | qs[128]. LPB 4: header (16 B) + 32 qs bytes = 64 elements
//   q5_K 176 B: f16 d, dmin | scales[12] | qh[32] | qs[128]. LPB 4: header + 32 qh + 32 qs bytes
//   q6_K 210 B: ql[128] | qh[64] | i8 scales[16] | f16 d. LPB 4: 3 x 16 bytes + 4 scales (2-byte aligned)
//   iq4_nl 18 B: f16 d | qs[16] (4-bit indices into the 16 int8 levels of kvalues_iq4nl, j lo, j+16
//              hi; the levels looked up with __byte_perm, SIGNED). LPB 1 (2-byte aligned)
//   iq4_xs 136 B: f16 d | u16 scales_h | scales_l[4] | qs[128] (8 iq4_nl nibble blocks, 6-bit scales
//              biased by 32). LPB 8: header (8 B) + the 16 qs bytes of one sub-block = 32 elements
// What should limit each format at T = 1 (4.6 TB/s over 132 SMs at ~1.75 GHz: ~20 weight bytes
// per SM clock; an SM issues 128 lane-instructions per clock):
//   q8 x (GQ_XQ 1, 2): ~1.1-1.5 instructions per weight (shared-memory reads + unpack + dp4a), so
//   HBM for every format; GQ_XQ = 1 pays the quantization's launch (~1.5-2 us in a graph: ~50 % of
//   a 4096 x 4096 q4_K, ~5 % of the 9B gate/up), GQ_XQ = 2 reads x (4 B/element) twice per SM
//   from L2 (+45 % L2 reads at 4096 x 4096 and 4096 x 12288, +7 % at gate/up, ~0 at the head).
//   f32 x (GQ_XQ 0): ~3 instructions per element per row (byte permute, subtract, FMA) plus the
//   Sigma x of the formats with a float offset: ~3.9 per weight for q8_0 (~50 % of the issue rate
//   at 85 % of the roofline: HBM-bound), ~4.5 for q6_K (~65 % at 75 %), ~4.7 for q5_K / q4_K (80 %
//   / ~100 % at 75 %): the 4- and 5-bit formats become issue-bound (expect ~55-70 %), and their x
//   reads (8-10 bytes per weight byte, halved by GQ_R = 2) load L1.
//   iq4: 3 byte permutes per 4 values (two table halves and the select, as mxfp4): ~the mxfp4 cost.
//   All: the 2-byte aligned formats (q8_0, q6_K, q3_K, q4_0, q5_0) cost a funnel shift per word and
//   ~2-way bank conflicts, mxfp4 4 byte permutes per 8 values; small matrices (4096 x 4096 q4_K =
//   9.4 MB, 2 us at the roofline) are bounded by the ~1 us the first bytes take to arrive and by
//   what the 48 KiB rings can keep in flight (~35-60 KB per SM).
//   T > 1: x is read once per tile and token (x traffic grows as T / GQ_R) and the dp4a and FMA
//   counts grow with T: past T ~ 4 the 4-bit formats are issue-bound (a tensor-core m16n8k32 int8
//   form would be the way for T = 8).
#include "Common.cuh"
#include "GemvQuantParams.h"

#ifndef GQ_FMT
#define GQ_FMT \
  12  // ggml type id: 2 q4_0, 3 q4_1, 6 q5_0, 7 q5_1, 8 q8_0, 10..14 q2_K..q6_K, 20 iq4_nl,
      // 23 iq4_xs, 39 mxfp4
#endif
#ifndef GQ_K
#define GQ_K 4096
#endif
#ifndef GQ_T
#define GQ_T 1  // tokens per launch the module is specialized for (n_tok <= GQ_T at run time)
#endif
#ifndef GQ_R
#define GQ_R 2  // rows per warp tile
#endif
#ifndef GQ_WARPS
#define GQ_WARPS 4
#endif
#ifndef GQ_ST
#define GQ_ST 3  // ring stages per warp
#endif
#ifndef GQ_XQ
#define GQ_XQ 0  // 0: f32 x; 1: q8 x (global, gemv_q_quantize_x) + dp4a; 2: q8 x staged per block + dp4a
#endif
#ifndef GQ_MINB
#define GQ_MINB 1  // __launch_bounds__' minimum resident blocks per SM
#endif
#ifndef GQ_REALIGN
// 0: every chunk of a row starts on a 16-byte boundary (row and chunk bytes multiples of 16) and
// is copied as it is. 1: rows whose bytes are not a multiple of 16 (q6_K's 210-byte blocks, q8_0
// rows of an odd block count): each chunk is copied from the 16-byte boundary below it, its length
// rounded up to 16; the readers add the chunk's offset from it (`shift`: a multiple of the
// alignment every block start of the row already has, which the readers handle, down to mxfp4's
// 17-byte blocks at any byte). The last copy of a matrix reads up to 15 bytes past it (the
// executor allocates block matrices with 16 spare bytes).
#define GQ_REALIGN 0
#endif
#ifndef GQ_GELU
#define GQ_GELU 0  // the swiglu forms' gate activation: 0 silu, 1 gelu (Gemma 4's MLPs and experts)
#endif
#ifndef GQ_SWIGLU
#define GQ_SWIGLU 0  // the module's product entry: 0 gemv_q, 1 gemv_q_swiglu (rings of 2 GQ_R rows)
#endif
#ifndef GQ_MOE
#define GQ_MOE 0  // 1: gemv_q_moe(_swiglu) (GemvQuantMoeParams: tiles of routed slots); 2: gemv_q_moe_down
#endif
#if GQ_MOE == 2 && GQ_SWIGLU
#error "gemv_q_moe_down is a plain product"
#endif
#ifndef GQ_XROWS
#define GQ_XROWS GQ_T  // rows of the q8 x layout (gemv_q_quantize_x's output; MoE: slots + shared rows)
#endif
#ifndef GQ_SPLIT
// gemv_q_moe_down: 1 = the block's warps share each tile (token, GQ_R output rows), warp w taking
// the tile's sub-tile groups w, w + GQ_WARPS, ..., and the block adds the warps' sums in shared
// memory: a tile's k + 1 sub-tiles run side by side rather than one after another in one warp.
#define GQ_SPLIT 0
#endif
#ifndef GQ_STREAM
// The dense products (gemv_q, gemv_q_swiglu): 1 = the launch's tiles x chunks spread evenly over
// its warps (warp w: items [w I / W, (w + 1) I / W)), so a warp may start or end inside a tile;
// such a tile's warps each store their partial sums and, after their last item (one fence a warp),
// count their arrival; the last to arrive adds the parts in warp order (deterministic) and writes
// the rows. For launches whose tiles do not
// divide evenly over the SMs (GemvQuantOptions::stream; off by default: measured slower end to end,
// bench/RESULTS.md session 28). The launch needs I >= W (every warp has items).
#define GQ_STREAM 0
#endif
#ifndef GQ_XPRE
// 1 = at T = 1 with q8 x (GQ_XQ 1 or 2), a lane loads its x for a chunk before it waits for the
// chunk's weights (GemvQuantOptions::x_early; off by default until measured on its own: session 28
// measured it only together with GQ_STREAM, which was the loss, bench/RESULTS.md session 29).
#define GQ_XPRE 0
#endif
#if GQ_XPRE && (GQ_T != 1 || GQ_XQ == 0)
#error "GQ_XPRE needs one token and q8 x"
#endif
#ifndef GQ_PACK
// gemv_q_moe_down: sub-tiles (choices) a chunk holds side by side, each in 32 / GQ_PACK lanes, when a
// row of the down (F columns) takes fewer lanes than a warp has: Qwen3.5-35B-A3B's F = 512 is 2
// q4_K blocks (8 lanes), so 4 choices share a chunk instead of one using a quarter of the warp.
#define GQ_PACK 1
#endif

// Format traits: QK elements and BB bytes per block, LPB lanes per block, NR runs of 16 elements
// per lane, SIGNED (values are int8), VOFF (integer offset: v - VOFF), HASMIN (a float offset c).
#if GQ_FMT == 8
#define GQ_QK 32
#define GQ_BB 34
#define GQ_LPB 1
#define GQ_NR 2
#define GQ_SIGNED 1
#define GQ_VOFF 0
#define GQ_HASMIN 0
#elif GQ_FMT == 2
#define GQ_QK 32
#define GQ_BB 18
#define GQ_LPB 1
#define GQ_NR 2
#define GQ_SIGNED 0
#define GQ_VOFF 8
#define GQ_HASMIN 0
#elif GQ_FMT == 3
#define GQ_QK 32
#define GQ_BB 20
#define GQ_LPB 1
#define GQ_NR 2
#define GQ_SIGNED 0
#define GQ_VOFF 0
#define GQ_HASMIN 1
#elif GQ_FMT == 6
#define GQ_QK 32
#define GQ_BB 22
#define GQ_LPB 1
#define GQ_NR 2
#define GQ_SIGNED 0
#define GQ_VOFF 16
#define GQ_HASMIN 0
#elif GQ_FMT == 7
#define GQ_QK 32
#define GQ_BB 24
#define GQ_LPB 1
#define GQ_NR 2
#define GQ_SIGNED 0
#define GQ_VOFF 0
#define GQ_HASMIN 1
#elif GQ_FMT == 39
#define GQ_QK 32
#define GQ_BB 17
#define GQ_LPB 1
#define GQ_NR 2
#define GQ_SIGNED 1
#define GQ_VOFF 0
#define GQ_HASMIN 0
#elif GQ_FMT == 10
#define GQ_QK 256
#define GQ_BB 84
#define GQ_LPB 4
#define GQ_NR 4
#define GQ_SIGNED 0
#define GQ_VOFF 0
#define GQ_HASMIN 1
#elif GQ_FMT == 11
#define GQ_QK 256
#define GQ_BB 110
#define GQ_LPB 4
#define GQ_NR 4
#define GQ_SIGNED 0
#define GQ_VOFF 4
#define GQ_HASMIN 0
#elif GQ_FMT == 12
#define GQ_QK 256
#define GQ_BB 144
#define GQ_LPB 4
#define GQ_NR 4
#define GQ_SIGNED 0
#define GQ_VOFF 0
#define GQ_HASMIN 1
#elif GQ_FMT == 13
#define GQ_QK 256
#define GQ_BB 176
#define GQ_LPB 4
#define GQ_NR 4
#define GQ_SIGNED 0
#define GQ_VOFF 0
#define GQ_HASMIN 1
#elif GQ_FMT == 14
#define GQ_QK 256
#define GQ_BB 210
#define GQ_LPB 4
#define GQ_NR 4
#define GQ_SIGNED 0
#define GQ_VOFF 32
#define GQ_HASMIN 0
#elif GQ_FMT == 20
#define GQ_QK 32
#define GQ_BB 18
#define GQ_LPB 1
#define GQ_NR 2
#define GQ_SIGNED 1
#define GQ_VOFF 0
#define GQ_HASMIN 0
#elif GQ_FMT == 23
#define GQ_QK 256
#define GQ_BB 136
#define GQ_LPB 8
#define GQ_NR 2
#define GQ_SIGNED 1
#define GQ_VOFF 0
#define GQ_HASMIN 0
#else
#error "GQ_FMT: no GemvQuant.cu reader for this ggml type"
#endif

#ifndef GQ_SCALES
// q4_K / q5_K's 6-bit scales and mins of a lane's part: 0 = by the part's half (the high half's bits
// from two bytes, each value selected), 1 = one form whose sources and shifts the part picks: the same
// values. nvcc 13.0 gives the 31B down (K = 21,504, 4 rows) 72 registers with 1 against 116 with 0,
// for 13 more instructions a chunk (bench/sass_loop.sh): room for 6 blocks an SM without spilling
// (GemvQuantOptions::one_scale_form, the kernel bench's "one scale form" rows; not the default).
#define GQ_SCALES 0
#endif
#ifndef GQ_PAIR_DOT
// 1 (the default): q8 x on q4_K / q5_K dots by sub-block pairs (GQ_PAIRS) and q4_K's high nibbles in
// place (GQ_HI16); 0: run by run, the nibbles shifted (the form before session 42;
// select-kernels{gemv-q-pair-dot=false}, the dense products).
#define GQ_PAIR_DOT 1
#endif
// q8 x on q4_K: a block's high nibbles are read in place (bytes 16 v, no shift), dotted with the
// unsigned-by-signed dp4a and scaled by a / 16.
#define GQ_HI16 (GQ_PAIR_DOT && GQ_FMT == 12 && GQ_XQ != 0)
// q8 x on q4_K / q5_K: runs 2h and 2h + 1 (one 32-element sub-block: one scale, one min, one x
// scale) are dotted into one integer and scaled once (GQ_PAIRS; the offset term from their x sums'
// sum). Integer sums are exact, so this only moves where the float rounding falls.
#define GQ_PAIRS (GQ_PAIR_DOT && (GQ_FMT == 12 || GQ_FMT == 13) && GQ_XQ != 0)

constexpr int kNB = GQ_K / GQ_QK;                  // blocks per row
constexpr long long kRB = (long long)kNB * GQ_BB;  // row bytes
constexpr int kLPG = 32 / GQ_PACK;                 // lanes per packed sub-tile (all 32 unpacked)
constexpr int kBPC = kLPG / GQ_LPB;                // blocks per chunk (one per lane group)
constexpr int kCHB = kBPC * GQ_BB;                 // chunk bytes of one row
constexpr int kNC = (kNB + kBPC - 1) / kBPC;       // chunks per row
constexpr int kTail = kNB - (kNC - 1) * kBPC;      // blocks in the last chunk
// A row's slot in a stage (+16: readers' overrun; realigned: +16 more for the shift).
constexpr int kCHP = (kCHB + 15) / 16 * 16 + (GQ_REALIGN ? 32 : 16);
#if GQ_XQ
constexpr bool kOffsetTerm = GQ_HASMIN || GQ_VOFF != 0;  // the q8 paths need the x sums
#endif
static_assert(GQ_K % GQ_QK == 0, "GQ_K must be a multiple of the block size");
static_assert(GQ_REALIGN || (kCHB % 16 == 0 && kRB % 16 == 0), "rows of 16-byte chunks, or GQ_REALIGN");
static_assert(GQ_T >= 1 && GQ_T <= 8 && GQ_R >= 1 && GQ_R <= 4, "GQ_T in 1..8, GQ_R in 1..4");
static_assert(GQ_XROWS >= GQ_T, "the q8 x layout holds at least GQ_T rows");
static_assert(!GQ_MOE || (GQ_T == 1 && GQ_XQ != 2), "MoE tiles read one x row each, from global memory");
static_assert(!GQ_SPLIT || GQ_MOE == 2, "split tiles: the down form only");
static_assert(!GQ_STREAM || !GQ_MOE, "streamed items: the dense products only");
static_assert(GQ_PACK == 1 || (GQ_MOE == 2 && kNC == 1 && (GQ_PACK & (GQ_PACK - 1)) == 0 && kBPC >= 1),
              "packed sub-tiles: the down form, a row in one chunk of 32 / GQ_PACK lanes");

// ---- shared-memory readers (offsets into a 16-byte aligned stage) ----

__device__ __forceinline__ unsigned lds32(const unsigned char* s, int off) {
  return reinterpret_cast<const unsigned*>(s)[off >> 2];
}
__device__ __forceinline__ unsigned lds16(const unsigned char* s, int off) {
  return reinterpret_cast<const unsigned short*>(s)[off >> 1];
}
__device__ __forceinline__ uint4 lds128(const unsigned char* s, int off) {
  return reinterpret_cast<const uint4*>(s)[off >> 4];
}
// N little-endian words starting at any byte offset: N + 1 aligned loads and funnel shifts.
template <int N>
__device__ __forceinline__ void lds_words(const unsigned char* s, int off, unsigned (&out)[N]) {
  const unsigned* w = reinterpret_cast<const unsigned*>(s) + (off >> 2);
  const unsigned sh = (unsigned)(off & 3) * 8;
  unsigned v[N + 1];
#pragma unroll
  for (int i = 0; i <= N; ++i) v[i] = w[i];
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = __funnelshift_r(v[i], v[i + 1], sh);
}
__device__ __forceinline__ float half_lo(unsigned w) { return f16_to_f32((u16)(w & 0xffffu)); }
__device__ __forceinline__ float half_hi(unsigned w) { return f16_to_f32((u16)(w >> 16)); }
// Bits 0..3 of n spread to bit 0 of each byte (no carries: the partial products do not overlap).
__device__ __forceinline__ unsigned spread4(unsigned n) { return (n * 0x00204081u) & 0x01010101u; }

// dp4a with unsigned bytes in a (0..255: q4_K's high nibbles in place) and signed ones in b.
__device__ __forceinline__ int dp4a_u8(unsigned a, int b, int c) {
#if defined(GQ_HOST_EMULATION)
  for (int i = 0; i < 4; ++i) c += (int)((a >> (8 * i)) & 0xffu) * (int)(signed char)(b >> (8 * i));
  return c;
#else
  asm("dp4a.u32.s32 %0, %1, %2, %0;" : "+r"(c) : "r"(a), "r"(b));
  return c;
#endif
}

// 16 elements of one row: 4 words of byte values v (element e in byte e % 4 of word e / 4) and the
// element value a * (v - GQ_VOFF) + c.
struct Run {
  unsigned q[4];
  float a, c;
};

// A 16-entry byte table (entries 0..7 in t0, t1, 8..15 in t2, t3) looked up for the 8 4-bit codes
// of q (byte j: the code of element j in the low nibble, of element j + 16 in the high one): two
// 8-entry byte_perm lookups, then bit 3 of each code picks its byte; lo = elements 0..3, hi =
// elements 16..19. mxfp4's E2M1 values and iq4's levels are two such tables.
__device__ __forceinline__ void nibble_values(unsigned q, unsigned t0, unsigned t1, unsigned t2, unsigned t3,
                                              unsigned& lo, unsigned& hi) {
  unsigned r[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const unsigned sel = (q >> (16 * h)) & 0xffffu;  // 4 codes: element j, j + 16, j + 1, j + 17
    const unsigned a = __byte_perm(t0, t1, sel & 0x7777u), b = __byte_perm(t2, t3, sel & 0x7777u);
    r[h] = __byte_perm(a, b, 0x3210u | ((sel & 0x8888u) >> 1));
  }
  lo = __byte_perm(r[0], r[1], 0x6420u);
  hi = __byte_perm(r[0], r[1], 0x7531u);
}

// ---- per-format block readers: block at byte `o` of stage `s`, part `sub` of GQ_LPB ----
// run_k(j, sub): the element offset of run j within the block.

#if GQ_FMT == 8  // q8_0
__device__ __forceinline__ int run_k(int j, int) { return 16 * j; }
__device__ __forceinline__ void read_block(const unsigned char* s, int o, int, Run (&r)[GQ_NR]) {
  const float d = f16_to_f32((u16)lds16(s, o));
  unsigned q[8];
  lds_words<8>(s, o + 2, q);
#pragma unroll
  for (int i = 0; i < 4; ++i) r[0].q[i] = q[i], r[1].q[i] = q[4 + i];
  r[0].a = r[1].a = d;
  r[0].c = r[1].c = 0.0f;
}
#elif GQ_FMT == 2  // q4_0
__device__ __forceinline__ int run_k(int j, int) { return 16 * j; }
__device__ __forceinline__ void read_block(const unsigned char* s, int o, int, Run (&r)[GQ_NR]) {
  const float d = f16_to_f32((u16)lds16(s, o));
  unsigned q[4];
  lds_words<4>(s, o + 2, q);
#pragma unroll
  for (int i = 0; i < 4; ++i) r[0].q[i] = q[i] & 0x0f0f0f0fu, r[1].q[i] = (q[i] >> 4) & 0x0f0f0f0fu;
  r[0].a = r[1].a = d;
  r[0].c = r[1].c = 0.0f;
}
#elif GQ_FMT == 3  // q4_1
__device__ __forceinline__ int run_k(int j, int) { return 16 * j; }
__device__ __forceinline__ void read_block(const unsigned char* s, int o, int, Run (&r)[GQ_NR]) {
  const unsigned dm = lds32(s, o);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const unsigned q = lds32(s, o + 4 + 4 * i);
    r[0].q[i] = q & 0x0f0f0f0fu, r[1].q[i] = (q >> 4) & 0x0f0f0f0fu;
  }
  r[0].a = r[1].a = half_lo(dm);
  r[0].c = r[1].c = half_hi(dm);
}
#elif GQ_FMT == 6  // q5_0
__device__ __forceinline__ int run_k(int j, int) { return 16 * j; }
__device__ __forceinline__ void read_block(const unsigned char* s, int o, int, Run (&r)[GQ_NR]) {
  const float d = f16_to_f32((u16)lds16(s, o));
  unsigned v[5];  // qh, qs[0..15]
  lds_words<5>(s, o + 2, v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    r[0].q[i] = (v[1 + i] & 0x0f0f0f0fu) | (spread4((v[0] >> (4 * i)) & 0xfu) << 4);
    r[1].q[i] = ((v[1 + i] >> 4) & 0x0f0f0f0fu) | (spread4((v[0] >> (16 + 4 * i)) & 0xfu) << 4);
  }
  r[0].a = r[1].a = d;
  r[0].c = r[1].c = 0.0f;
}
#elif GQ_FMT == 7  // q5_1
__device__ __forceinline__ int run_k(int j, int) { return 16 * j; }
__device__ __forceinline__ void read_block(const unsigned char* s, int o, int, Run (&r)[GQ_NR]) {
  const unsigned dm = lds32(s, o), qh = lds32(s, o + 4);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const unsigned q = lds32(s, o + 8 + 4 * i);
    r[0].q[i] = (q & 0x0f0f0f0fu) | (spread4((qh >> (4 * i)) & 0xfu) << 4);
    r[1].q[i] = ((q >> 4) & 0x0f0f0f0fu) | (spread4((qh >> (16 + 4 * i)) & 0xfu) << 4);
  }
  r[0].a = r[1].a = half_lo(dm);
  r[0].c = r[1].c = half_hi(dm);
}
#elif GQ_FMT == 39  // mxfp4
__device__ __forceinline__ int run_k(int j, int) { return 16 * j; }
// The doubled E2M1 values of the 8 codes of q (byte j: code of element j in the low nibble, of
// element j + 16 in the high one): lo = elements 0..3, hi = elements 16..19 (as int8).
__device__ __forceinline__ void fp4_values(unsigned q, unsigned& lo, unsigned& hi) {
  nibble_values(q, 0x03020100u, 0x0c080604u, 0xfdfeff00u, 0xf4f8fafcu, lo, hi);  // 0..12, -0..-12
}
__device__ __forceinline__ void read_block(const unsigned char* s, int o, int, Run (&r)[GQ_NR]) {
  const unsigned e = s[o];
  unsigned q[4];
  lds_words<4>(s, o + 1, q);
#pragma unroll
  for (int i = 0; i < 4; ++i) fp4_values(q[i], r[0].q[i], r[1].q[i]);
  // ggml_e8m0_to_fp32_half: 2^(e - 128) (subnormal for e < 2).
  r[0].a = r[1].a = __uint_as_float(e < 2 ? (0x00200000u << e) : ((e - 1) << 23));
  r[0].c = r[1].c = 0.0f;
}
#elif GQ_FMT == 10  // q2_K
// part sub: half = sub / 2 (128 elements), p = sub % 2; run j: elements 128 half + 32 j + 16 p + [0, 16).
__device__ __forceinline__ int run_k(int j, int sub) { return 128 * (sub >> 1) + 32 * j + 16 * (sub & 1); }
__device__ __forceinline__ void read_block(const unsigned char* s, int o, int sub, Run (&r)[GQ_NR]) {
  const int half = sub >> 1, p = sub & 1;
  unsigned q[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) q[i] = lds32(s, o + 16 + 32 * half + 16 * p + 4 * i);
  const unsigned sc[2] = {lds32(s, o + 8 * half), lds32(s, o + 8 * half + 4)};  // scales[8 half ..]
  const unsigned dd = lds32(s, o + 80);
  const float d = half_lo(dd), dmin = half_hi(dd);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) r[j].q[i] = (q[i] >> (2 * j)) & 0x03030303u;
    const unsigned b = (sc[j >> 1] >> (8 * (2 * (j & 1) + p))) & 0xffu;  // scales[8 half + 2 j + p]
    r[j].a = d * (float)(b & 0xfu);
    r[j].c = -(dmin * (float)(b >> 4));
  }
}
#elif GQ_FMT == 11  // q3_K
__device__ __forceinline__ int run_k(int j, int sub) { return 128 * (sub >> 1) + 32 * j + 16 * (sub & 1); }
__device__ __forceinline__ void read_block(const unsigned char* s, int o, int sub, Run (&r)[GQ_NR]) {
  const int half = sub >> 1, p = sub & 1;
  unsigned q[4], hm[4], pk[3];
  lds_words<4>(s, o + 32 + 32 * half + 16 * p, q);
  lds_words<4>(s, o + 16 * p, hm);
  lds_words<3>(s, o + 96, pk);
  const float d = f16_to_f32((u16)lds16(s, o + 108));
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    // Scale is = 8 half + 2 j + p: low 4 bits from packed[is % 8] (high nibble when is >= 8), top
    // 2 bits from packed[8 + is % 4] >> (2 * (is / 4)); biased by 32.
    const int lo_byte = 2 * j + p;
    const unsigned low = (pk[lo_byte >> 2] >> (8 * (lo_byte & 3) + 4 * half)) & 0xfu;
    const unsigned high = (pk[2] >> (8 * (2 * (j & 1) + p) + 2 * (2 * half + (j >> 1)))) & 3u;
    r[j].a = d * (float)((int)(low | (high << 4)) - 32);
    r[j].c = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      r[j].q[i] = ((q[i] >> (2 * j)) & 0x03030303u) | (((hm[i] >> (4 * half + j)) & 0x01010101u) << 2);
  }
}
#elif GQ_FMT == 12 || GQ_FMT == 13  // q4_K, q5_K
// part sub = the block's 64-element group g: runs 0, 1 are elements 64 g + [0, 32) (the low nibbles
// of qs[32 g, 32 g + 32), scale pair 2 g), runs 2, 3 are 64 g + 32 + [0, 32) (the high nibbles,
// pair 2 g + 1); q5_K's fifth bits are bits 2 g, 2 g + 1 of qh[0, 32).
__device__ __forceinline__ int run_k(int j, int sub) { return 64 * sub + 16 * j; }
__device__ __forceinline__ void read_block(const unsigned char* s, int o, int sub, Run (&r)[GQ_NR]) {
  const uint4 h = lds128(s, o);
#if GQ_FMT == 12
  const uint4 qa = lds128(s, o + 16 + 32 * sub), qb = lds128(s, o + 32 + 32 * sub);
#else
  const uint4 qa = lds128(s, o + 48 + 32 * sub), qb = lds128(s, o + 64 + 32 * sub);
  const uint4 ha = lds128(s, o + 16), hb = lds128(s, o + 32);
  const unsigned qh[2][4] = {{ha.x, ha.y, ha.z, ha.w}, {hb.x, hb.y, hb.z, hb.w}};
#endif
  const unsigned qs[2][4] = {{qa.x, qa.y, qa.z, qa.w}, {qb.x, qb.y, qb.z, qb.w}};
  // ggml's get_scale_min_k4 for pairs 2 g and 2 g + 1 at once, without branches: the 12 packed
  // bytes as three groups of 4 (h.y, h.z, h.w), of which pairs g % 2 are the ones this part needs.
  const unsigned sh = 16u * (unsigned)(sub & 1);
  const bool high = sub >= 2;
#if GQ_SCALES
  // Low 4 bits from h.y / h.z (pairs 0..3) or h.w (4..7); the top 2 from the same bytes (0..3) or
  // from h.y / h.z's top bits (4..7): (b & 0x3f3f) = (b & 0x0f0f) | (b & 0x3030).
  const unsigned top = sh + (high ? 2u : 0u);
  const unsigned sc = (((high ? h.w : h.y) >> sh) & 0x0f0fu) | ((h.y >> top) & 0x3030u);
  const unsigned m = (((high ? h.w : h.z) >> (sh + (high ? 4u : 0u))) & 0x0f0fu) | ((h.z >> top) & 0x3030u);
#else
  const unsigned b0 = (h.y >> sh) & 0xffffu, b1 = (h.z >> sh) & 0xffffu, b2 = (h.w >> sh) & 0xffffu;
  const unsigned sc = high ? (b2 & 0x0f0fu) | ((b0 & 0xc0c0u) >> 2) : b0 & 0x3f3fu;
  const unsigned m = high ? ((b2 >> 4) & 0x0f0fu) | ((b1 & 0xc0c0u) >> 2) : b1 & 0x3f3fu;
#endif
  const float d = half_lo(h.x), dmin = half_hi(h.x);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#if GQ_HI16
      // The high nibbles stay where they are: bytes 16 v, dotted unsigned (dp4a_u8), their scale a / 16.
      r[j].q[i] = qs[j & 1][i] & (j >> 1 ? 0xf0f0f0f0u : 0x0f0f0f0fu);
#else
      r[j].q[i] = (qs[j & 1][i] >> (4 * (j >> 1))) & 0x0f0f0f0fu;
#endif
#if GQ_FMT == 13
      r[j].q[i] |= ((qh[j & 1][i] >> (2 * sub + (j >> 1))) & 0x01010101u) << 4;
#endif
    }
    // a / 16 is exact (a power of two; d is an f16, far above float's subnormals), and so is the
    // product of the dot by it: the sums are those of the shifted nibbles bit for bit.
    r[j].a = (GQ_HI16 && (j >> 1) ? d * 0.0625f : d) * (float)((sc >> (8 * (j >> 1))) & 0xffu);
    r[j].c = -(dmin * (float)((m >> (8 * (j >> 1))) & 0xffu));
  }
}
#elif GQ_FMT == 14  // q6_K
// part sub: half = sub / 2 (128 elements), g = sub % 2; run j: elements 128 half + 32 j + 16 g +
// [0, 16), from ql[64 half + 16 g + l] (j = 0 low nibble, 2 high) or ql[64 half + 32 + 16 g + l]
// (j = 1, 3) and bits 2j of qh[32 half + 16 g + l]; scale scales[8 half + g + 2 j].
__device__ __forceinline__ int run_k(int j, int sub) { return 128 * (sub >> 1) + 32 * j + 16 * (sub & 1); }
__device__ __forceinline__ void read_block(const unsigned char* s, int o, int sub, Run (&r)[GQ_NR]) {
  const int half = sub >> 1, g = sub & 1;
  unsigned qa[4], qb[4], qh[4], sc[2];
  lds_words<4>(s, o + 64 * half + 16 * g, qa);
  lds_words<4>(s, o + 64 * half + 32 + 16 * g, qb);
  lds_words<4>(s, o + 128 + 32 * half + 16 * g, qh);
  lds_words<2>(s, o + 192 + 8 * half, sc);
  const float d = f16_to_f32((u16)lds16(s, o + 208));
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const unsigned* ql = (j & 1) ? qb : qa;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      r[j].q[i] = ((ql[i] >> (4 * (j >> 1))) & 0x0f0f0f0fu) | (((qh[i] >> (2 * j)) & 0x03030303u) << 4);
    const int scale = (int)(signed char)((sc[j >> 1] >> (8 * (g + 2 * (j & 1)))) & 0xffu);
    r[j].a = d * (float)scale;
    r[j].c = 0.0f;
  }
}
#elif GQ_FMT == 20 || GQ_FMT == 23  // iq4_nl, iq4_xs
// The int8 levels of the 8 codes of q (byte j: element j's code in the low nibble, j + 16's in the
// high one): lo = elements 0..3, hi = elements 16..19, from kvalues_iq4nl.
__device__ __forceinline__ void iq4_values(unsigned q, unsigned& lo, unsigned& hi) {
  nibble_values(q, 0xbfad9881u, 0xf6eaddcfu, 0x26190d01u, 0x71594535u, lo, hi);  // -127 .. 113
}
#if GQ_FMT == 20
__device__ __forceinline__ int run_k(int j, int) { return 16 * j; }
__device__ __forceinline__ void read_block(const unsigned char* s, int o, int, Run (&r)[GQ_NR]) {
  const float d = f16_to_f32((u16)lds16(s, o));
  unsigned q[4];
  lds_words<4>(s, o + 2, q);
#pragma unroll
  for (int i = 0; i < 4; ++i) iq4_values(q[i], r[0].q[i], r[1].q[i]);
  r[0].a = r[1].a = d;
  r[0].c = r[1].c = 0.0f;
}
#else
// part sub = sub-block (32 elements): run j = elements 32 sub + 16 j + [0, 16) (j = 0 low nibbles).
__device__ __forceinline__ int run_k(int j, int sub) { return 32 * sub + 16 * j; }
__device__ __forceinline__ void read_block(const unsigned char* s, int o, int sub, Run (&r)[GQ_NR]) {
  const unsigned h = lds32(s, o), sl = lds32(s, o + 4);  // d | scales_h; scales_l[0..3]
  const int ls = (int)(((sl >> (8 * (sub >> 1) + 4 * (sub & 1))) & 0xfu) | (((h >> (16 + 2 * sub)) & 3u) << 4));
#pragma unroll
  for (int i = 0; i < 4; ++i) iq4_values(lds32(s, o + 8 + 16 * sub + 4 * i), r[0].q[i], r[1].q[i]);
  r[0].a = r[1].a = half_lo(h) * (float)(ls - 32);
  r[0].c = r[1].c = 0.0f;
}
#endif
#endif

// ---- copies into the ring ----
// A stage is filled by one bulk copy per row slot (cp.async.bulk: the copy engine moves the whole
// chunk, so a warp issues a few instructions per chunk, not one per 16 bytes), completing on the
// stage's mbarrier: the slots' lanes add their bytes to its expected count, lane 0 arrives once,
// and the stage's phase completes when the bytes have landed. Stage i % GQ_ST holds item i, so the
// wait for item i is on phase parity (i / GQ_ST) & 1.

#if defined(GQ_HOST_EMULATION)
// A host emulation of these kernels (a development aid; it supplies the three gq_emu_* calls): a
// stage's copies are one group of deferred copies, performed by the wait that covers the group.
struct StageBars {
  int issued = 0;  // items whose copies were committed (in item order)
};
__device__ __forceinline__ void stage_bars_init(StageBars&, int) {}
__device__ __forceinline__ void stage_expect_copy(StageBars&, int, unsigned char* dst, const unsigned char* src,
                                                  int n) {
  gq_emu_copy(dst, src, n);
}
__device__ __forceinline__ void stage_arrive(StageBars& b, int) {
  gq_emu_commit();
  ++b.issued;
}
__device__ __forceinline__ void stage_wait(StageBars& b, int item) { gq_emu_wait(b.issued - item - 1); }
__device__ __forceinline__ void stages_drain() { gq_emu_wait(0); }
#else
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
struct StageBars {
  unsigned base;  // the warp's GQ_ST mbarriers (shared addresses, 8 bytes apart)
};
__device__ __forceinline__ void stage_bars_init(StageBars& b, int lane) {
  if (lane == 0)
#pragma unroll
    for (int i = 0; i < GQ_ST; ++i) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b.base + 8 * i));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncwarp();
}
// n bytes (a multiple of 16, both addresses 16-byte aligned) from global src into shared dst,
// counted on stage `st`'s barrier.
__device__ __forceinline__ void stage_expect_copy(StageBars& b, int st, unsigned char* dst, const unsigned char* src,
                                                  int n) {
  const unsigned bar = b.base + 8 * st;
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(n) : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
      "l"(src), "r"(n), "r"(bar)
      : "memory");
}
// After every lane's stage_expect_copy for the stage (a __syncwarp between): lane 0 arrives.
__device__ __forceinline__ void stage_arrive(StageBars& b, int st) {
  if ((threadIdx.x & 31) == 0)
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(b.base + 8 * st) : "memory");
}
__device__ __forceinline__ void stage_wait(StageBars& b, int item) {
  const unsigned bar = b.base + 8 * (item % GQ_ST), parity = (unsigned)(item / GQ_ST) & 1u;
  unsigned done = 0;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}
__device__ __forceinline__ void stages_drain() {}  // every issued stage was waited for
#endif

// ---- the reduction: V (a power of two <= 32) values summed over the warp ----
// Recursive halving: N values at offset O (16 first) are halved to N / 2 per lane, the upper
// lanes keeping the upper half; after it, lane l holds the warp total of value l >> (5 - log2 V).
template <int N, int O>
__device__ __forceinline__ void reduce_step(float* v, int lane) {
  if constexpr (N > 1) {
    const bool upper = (lane & O) != 0;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const float send = upper ? v[i] : v[i + N / 2];
      const float keep = upper ? v[i + N / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
    }
    reduce_step<N / 2, O / 2>(v, lane);
  } else if constexpr (O > 0) {
    v[0] += __shfl_xor_sync(0xffffffffu, v[0], O);
    reduce_step<1, O / 2>(v, lane);
  }
}

// ---- x as q8 (GQ_XQ 1 and 2) ----

#if GQ_XQ == 2
// The block's warps quantize x into shared memory, 8 independent loads per lane in flight.
__device__ __forceinline__ void stage_x(const float* __restrict__ x, int n_tok, signed char* xq, float* xd, float* xs) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n = n_tok * (GQ_K / 32);
  constexpr int kBatch = 8;
  for (int base = warp; base < n; base += GQ_WARPS * kBatch) {
    float v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int b = base + j * GQ_WARPS;
      v[j] = b < n ? __ldg(x + b * 32 + lane) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int b = base + j * GQ_WARPS;
      if (b < n) q8x_quantize_block(v[j], b, lane, xq, xd, xs);  // warp-uniform
    }
  }
}
#endif
#if GQ_XQ == 1
__device__ __forceinline__ int4 ld_xq(const signed char* p) { return __ldg(reinterpret_cast<const int4*>(p)); }
__device__ __forceinline__ float ld_xf(const float* p) { return __ldg(p); }
__device__ __forceinline__ float2 ld_xf2(const float* p) { return __ldg(reinterpret_cast<const float2*>(p)); }
__device__ __forceinline__ float4 ld_xf4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
#else
__device__ __forceinline__ int4 ld_xq(const signed char* p) { return *reinterpret_cast<const int4*>(p); }
__device__ __forceinline__ float ld_xf(const float* p) { return *p; }
__device__ __forceinline__ float2 ld_xf2(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float4 ld_xf4(const float* p) { return *reinterpret_cast<const float4*>(p); }
#endif

#if GQ_XQ
// One token's x for a lane's part of a block: the q8 values of its GQ_NR runs, their per-32
// scales and per-16 sums (xt: the row in the q8 layout; staged x holds the call's rows only).
// q4_K / q5_K parts are 64 consecutive elements: their 2 scales and 4 sums are one 8- and one
// 16-byte load (K is a multiple of 256, so both are aligned).
struct XRun {
  int4 w[GQ_NR];
  float d[GQ_NR], s[GQ_NR];
};
__device__ __forceinline__ void load_x_runs(const signed char* xq, const float* xd, const float* xs, int xt, int k0,
                                            int sub, XRun& x) {
  if constexpr (GQ_FMT == 12 || GQ_FMT == 13) {
    const int kb = k0 + run_k(0, sub);
    const float2 d2 = ld_xf2(xd + xt * (GQ_K / 32) + (kb >> 5));
    const float4 s4 = ld_xf4(xs + xt * (GQ_K / 16) + (kb >> 4));
    x.d[0] = x.d[1] = d2.x, x.d[2] = x.d[3] = d2.y;
    x.s[0] = s4.x, x.s[1] = s4.y, x.s[2] = s4.z, x.s[3] = s4.w;
  } else {
#pragma unroll
    for (int j = 0; j < GQ_NR; ++j) {
      const int k = k0 + run_k(j, sub);
      x.d[j] = ld_xf(xd + xt * (GQ_K / 32) + (k >> 5));
      x.s[j] = kOffsetTerm ? ld_xf(xs + xt * (GQ_K / 16) + (k >> 4)) : 0.0f;
    }
  }
#pragma unroll
  for (int j = 0; j < GQ_NR; ++j) x.w[j] = ld_xq(xq + xt * GQ_K + k0 + run_k(j, sub));
}
#endif

// ---- the body ----

struct Tile {
  const unsigned char* w0;  // the tile's weight (swiglu: the gate)
  const unsigned char* w1;  // swiglu: the up projection
  float* y;
  int r0, nr, n;  // first row, rows in this tile, the weight's rows (y's row stride)
  int xrow;       // the tile's first x row (MoE: its slot's row; dense: 0, tokens follow)
  int tok;        // gemv_q_moe_down: the tile's token
  bool skip;      // MoE: the slot's expert is not among the weights (another rank's): no copies, no writes
};

// Tiles of a launch and the x rows (tokens) each tile dots.
template <bool kSwiglu>
__device__ __forceinline__ int count_tiles(const GemvQuantParams& p) {
  int tiles = 0;
  if (kSwiglu) {
    tiles = (p.w[0].n_rows + GQ_R - 1) / GQ_R;
  } else {
#pragma unroll
    for (int i = 0; i < MEMRA_GEMV_QUANT_MAX; ++i) tiles += i < p.n_w ? (p.w[i].n_rows + GQ_R - 1) / GQ_R : 0;
  }
  return tiles;
}
__device__ __forceinline__ int tile_tokens(const GemvQuantParams& p) { return p.n_tok; }
// Sub-tiles per tile: gemv_q_moe_down runs a tile over the token's k choices and the shared down.
__device__ __forceinline__ int subtiles(const GemvQuantParams&) { return 1; }
__device__ __forceinline__ const float* params_x(const GemvQuantParams& p) { return p.x; }
__device__ __forceinline__ const void* params_xq(const GemvQuantParams& p) { return p.xq; }

// MoE: the routed slots' tiles (slot-major: ceil(n / GQ_R) per slot), then the shared rows'.
template <bool kSwiglu>
__device__ __forceinline__ int count_tiles(const GemvQuantMoeParams& p) {
#if GQ_MOE == 2
  return p.n_tok * ((p.n + GQ_R - 1) / GQ_R);
#else
  return p.n_slots * ((p.n + GQ_R - 1) / GQ_R) + (p.s0 != nullptr ? p.n_tok * ((p.ns + GQ_R - 1) / GQ_R) : 0);
#endif
}
__device__ __forceinline__ int subtiles(const GemvQuantMoeParams& p) {
  return GQ_MOE == 2 ? p.k + (p.s0 != nullptr ? 1 : 0) : 1;
}
__device__ __forceinline__ int tile_tokens(const GemvQuantMoeParams&) { return 1; }
__device__ __forceinline__ const float* params_x(const GemvQuantMoeParams& p) { return p.x; }
__device__ __forceinline__ const void* params_xq(const GemvQuantMoeParams& p) { return p.xq; }

template <bool kSwiglu>
__device__ __forceinline__ Tile find_tile(const GemvQuantMoeParams& p, int tile, int j = 0) {
  Tile t;
#if GQ_MOE == 2
  {
    const int per_tok = (p.n + GQ_R - 1) / GQ_R;
    t.tok = tile / per_tok;
    t.r0 = (tile - t.tok * per_tok) * GQ_R;
    t.skip = false;
    if (j < p.k) {
      const int s = t.tok * p.k + j;
      const int e = __ldg(p.ids + s) - p.first_expert;
      t.skip = e < 0 || e >= p.n_experts;
      t.w0 = static_cast<const unsigned char*>(p.w0) + (long long)min(max(e, 0), p.n_experts - 1) * p.expert_bytes;
      t.xrow = s;
    } else {
      t.w0 = static_cast<const unsigned char*>(p.s0);
      t.xrow = p.xs0 + t.tok;
    }
    t.w1 = nullptr;
    t.y = p.y + (long long)t.tok * p.n;
    t.n = p.n;
    t.nr = min(GQ_R, t.n - t.r0);
    return t;
  }
#endif
  t.tok = 0;
  t.skip = false;
  const int per_slot = (p.n + GQ_R - 1) / GQ_R;
  const int routed = p.n_slots * per_slot;
  if (tile < routed) {
    const int s = tile / per_slot;
    // Another rank's expert (or a bad id): the tile copies and writes nothing; the address stays
    // inside the matrix all the same.
    const int e = __ldg(p.ids + s) - p.first_expert;
    t.skip = e < 0 || e >= p.n_experts;
    const long long off = (long long)min(max(e, 0), p.n_experts - 1) * p.expert_bytes;
    t.w0 = static_cast<const unsigned char*>(p.w0) + off;
    t.w1 = kSwiglu ? static_cast<const unsigned char*>(p.w1) + off : nullptr;
    t.y = p.y + (long long)s * p.n;
    t.n = p.n;
    t.r0 = (tile - s * per_slot) * GQ_R;
    t.xrow = s / p.k;
  } else {
    const int per_row = (p.ns + GQ_R - 1) / GQ_R;
    const int u = (tile - routed) / per_row;
    t.w0 = static_cast<const unsigned char*>(p.s0);
    t.w1 = kSwiglu ? static_cast<const unsigned char*>(p.s1) : nullptr;
    t.y = p.ys + (long long)u * p.ns;
    t.n = p.ns;
    t.r0 = (tile - routed - u * per_row) * GQ_R;
    t.xrow = p.xs0 + u;
  }
  t.nr = min(GQ_R, t.n - t.r0);
  return t;
}

template <bool kSwiglu>
__device__ __forceinline__ Tile find_tile(const GemvQuantParams& p, int tile, int = 0) {
  Tile t;
  t.w0 = t.w1 = nullptr;
  t.y = nullptr;
  t.r0 = t.nr = t.n = 0;
  t.xrow = t.tok = 0;
  t.skip = false;
  if (kSwiglu) {
    t.w0 = static_cast<const unsigned char*>(p.w[0].w);
    t.w1 = static_cast<const unsigned char*>(p.w[1].w);
    t.y = p.w[0].y;
    t.n = p.w[0].n_rows;
    t.r0 = tile * GQ_R;
  } else {
#pragma unroll
    for (int i = 0; i < MEMRA_GEMV_QUANT_MAX; ++i) {
      const int n = i < p.n_w ? p.w[i].n_rows : 0;
      const int nt = (n + GQ_R - 1) / GQ_R;
      if (tile >= 0 && tile < nt) {
        t.w0 = static_cast<const unsigned char*>(p.w[i].w);
        t.y = p.w[i].y;
        t.n = n;
        t.r0 = tile * GQ_R;
      }
      tile -= nt;
    }
  }
  t.nr = min(GQ_R, t.n - t.r0);
  return t;
}

#ifndef GQ_L2_PREFETCH
#define GQ_L2_PREFETCH 0
#endif
#if GQ_L2_PREFETCH > 0 && !GQ_MOE
// select-kernels{l2-prefetch-bytes}: the first GQ_L2_PREFETCH bytes of the launch's weights, in the
// order their tiles run (gemv_q_swiglu: half from the gate, half from the up), asked of the L2
// before the wait (Common.cuh memra_l2_prefetch), so rows of warps not yet resident stream in while
// the kernel before runs. The sums do not depend on it.
template <bool kSwiglu>
__device__ __forceinline__ void gq_l2_prefetch(const GemvQuantParams& p) {
  long long left = GQ_L2_PREFETCH;
#pragma unroll
  for (int i = 0; i < MEMRA_GEMV_QUANT_MAX; ++i) {
    if (kSwiglu ? i < 2 : i < p.n_w) {
      const long long rows = p.w[kSwiglu ? 0 : i].n_rows;
      const long long bytes = min(kSwiglu ? (long long)(GQ_L2_PREFETCH / 2) : left, rows * kRB);
      if (bytes > 0) memra_l2_prefetch(p.w[i].w, bytes);
      left -= bytes;
    }
  }
}
#endif

template <bool kSwiglu, typename P>
__device__ __forceinline__ void gemv_q_body(const P& p) {
  constexpr int kSlots = kSwiglu ? 2 * GQ_R : GQ_R;
  constexpr int kStage = GQ_PACK * kSlots * kCHP;  // GQ_PACK sub-tiles' kSlots rows
  constexpr int kV = kSlots * GQ_T;
  constexpr int kVP = kV <= 1 ? 1 : kV <= 2 ? 2 : kV <= 4 ? 4 : kV <= 8 ? 8 : kV <= 16 ? 16 : 32;
  constexpr int kShift = kVP == 1 ? 5 : kVP == 2 ? 4 : kVP == 4 ? 3 : kVP == 8 ? 2 : kVP == 16 ? 1 : 0;
  static_assert(kVP <= 32, "rows x tokens per tile exceed a warp");
  __shared__ __align__(16) unsigned char ring[GQ_WARPS][GQ_ST][kStage];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gw = blockIdx.x * GQ_WARPS + warp, n_warps = gridDim.x * GQ_WARPS;
#if GQ_MOE
  // The tiles' experts are the previous kernel's output (moe_route): wait before the first copy.
  memra_grid_dependency();
#endif
#if GQ_MOE == 1
  // The shared expert's gate, sigmoid(x[t] . g), for gemv_q_moe_down (a warp per token).
  if (kSwiglu && p.g != nullptr)
    for (int t = gw; t < p.n_tok; t += n_warps) {
      float d = 0.0f;
      for (int k = lane; k < GQ_K; k += 32) d = fmaf(p.x[(long long)t * GQ_K + k], __ldg(p.g + k), d);
      d = warp_sum(d);
      if (lane == 0) p.gate[t] = sigmoidf_(d);
    }
#endif
  const int tiles = count_tiles<kSwiglu>(p);
  const int n_sub = subtiles(p);
  const int n_grp = (n_sub + GQ_PACK - 1) / GQ_PACK;  // a tile's sub-tile groups (GQ_PACK sub-tiles each)
  // The warp's tiles (tile0, tile0 + tstride, ...) and how many of each tile's groups it runs
  // (split: the block's tiles, groups warp, warp + GQ_WARPS, ...).
  const int tile0 = GQ_SPLIT ? (int)blockIdx.x : gw, tstride = GQ_SPLIT ? (int)gridDim.x : n_warps;
  const int n_mine = GQ_SPLIT ? (n_grp > warp ? (n_grp - 1 - warp) / GQ_WARPS + 1 : 0) : n_grp;
#if GQ_STREAM
  // The warp's items [lo, hi) of the launch's tiles x kNC chunks (n_mine = 1: no sub-tiles).
  const long long n_items = (long long)tiles * kNC;
  const long long lo = (long long)gw * n_items / n_warps, hi = (long long)(gw + 1) * n_items / n_warps;
  const int items = (int)(hi - lo);
#else
  const int my_tiles = tile0 < tiles ? (tiles - 1 - tile0) / tstride + 1 : 0;
  const int items = my_tiles * n_mine * kNC;
#endif
  // Item i of the warp: its tile's index in the launch, (sub-tile group) q and chunk c.
  auto locate = [&](int item, int& tile, int& q, int& c) {
#if GQ_STREAM
    const long long gi = lo + item;
    tile = (int)(gi / kNC);
    c = (int)(gi - (long long)tile * kNC);
    q = 0;
#else
    q = item / kNC;
    c = item - q * kNC;
    tile = tile0 + q / n_mine * tstride;
#endif
  };
  const int n_tok = tile_tokens(p);

  // Item i = chunk i % kNC of the warp's sub-tile group (i / kNC) % n_mine of its tile i / (kNC
  // n_mine), into stage i % GQ_ST; a group is GQ_PACK sub-tiles (one unpacked). Lane s < GQ_PACK kSlots
  // copies slot s % kSlots of sub-tile s / kSlots of the group; its row is found once per tile (at
  // the tile's first chunk).
  __shared__ __align__(8) unsigned long long bars[GQ_WARPS][GQ_ST];
#if GQ_SPLIT
  // Each warp's sums of the tile's rows. At a tile's end every warp with groups stores its sums, and
  // warp 0 adds them in warp order and writes the rows. Only the warps with groups (the first
  // n_active) meet, at a named barrier counting their threads: a warp without groups never reaches
  // it (it used to meet __syncthreads() after its empty loop, at other instructions than the warps
  // in the loop: undefined, and synccheck's "divergent threads in block").
  __shared__ float red[GQ_WARPS][GQ_R];
  const int n_active = min(n_grp, GQ_WARPS);
  auto split_add = [&](int row, float total, const Tile& t) {
    if (row >= 0) red[warp][row] = total;
    memra_named_barrier(1, (unsigned)n_active * 32u);
    if (warp == 0 && lane < GQ_R && lane < t.nr) {
      float y = 0.0f;
#pragma unroll
      for (int w = 0; w < GQ_WARPS; ++w)
        if (w < n_active) y += red[w][lane];
      t.y[t.r0 + lane] = y;
    }
    memra_named_barrier(1, (unsigned)n_active * 32u);
  };
#endif
  StageBars sb{};
#if !defined(GQ_HOST_EMULATION)
  sb.base = smem_addr(&bars[warp][0]);
#endif
  stage_bars_init(sb, lane);
  const unsigned char* crow = nullptr;  // copy lanes: their slot's row in the tile being copied
  auto issue = [&](int item) {
    int tile, q, c;
    locate(item, tile, q, c);
    const int st = item % GQ_ST;
    if (c == 0 || (GQ_STREAM && item == 0)) {  // a tile's first chunk (streamed: or the warp's first item)
      const int m = q / n_mine, jj = q - m * n_mine, jg = GQ_SPLIT ? warp + GQ_WARPS * jj : jj;
      const int j = jg * GQ_PACK + (GQ_PACK > 1 ? lane / kSlots : 0);
      const Tile t = find_tile<kSwiglu>(p, tile, min(j, n_sub - 1));
      const int r = lane % GQ_R;
      const unsigned char* w = (kSwiglu && lane % kSlots >= GQ_R) ? t.w1 : t.w0;
      crow = lane < GQ_PACK * kSlots && j < n_sub && r < t.nr && !t.skip ? w + (long long)(t.r0 + r) * kRB : nullptr;
    }
    if (crow != nullptr) {
      const int cb = c == kNC - 1 ? kTail * GQ_BB : kCHB;
      const unsigned char* src = crow + (long long)c * kCHB;
      const int shift = GQ_REALIGN ? (int)(reinterpret_cast<unsigned long long>(src) & 15) : 0;
      stage_expect_copy(sb, st, ring[warp][st] + lane * kCHP, src - shift, (shift + cb + 15) & ~15);
    }
    __syncwarp();
    stage_arrive(sb, st);
  };

  float acc[kSlots][GQ_T];
#pragma unroll
  for (int s = 0; s < kSlots; ++s)
#pragma unroll
    for (int t = 0; t < GQ_T; ++t) acc[s][t] = 0.0f;

#pragma unroll
  for (int i = 0; i < GQ_ST - 1 && i < items; ++i) issue(i);
#if !GQ_MOE
#if GQ_L2_PREFETCH > 0
  gq_l2_prefetch<kSwiglu>(p);
#endif
  // The weight copies above do not depend on earlier kernels: they are in flight while this waits.
  memra_grid_dependency();
#endif
  const float* x_f32 = params_x(p);
#if GQ_XQ == 1
  const signed char* xq = static_cast<const signed char*>(params_xq(p));
  const float* xd = reinterpret_cast<const float*>(xq + GQ_XROWS * GQ_K);
  const float* xs = xd + GQ_XROWS * (GQ_K / 32);
#elif GQ_XQ == 2
  __shared__ __align__(16) signed char sxq[GQ_T * GQ_K];
  __shared__ float sxd[GQ_T * (GQ_K / 32)], sxs[GQ_T * (GQ_K / 16)];
  stage_x(x_f32, n_tok, sxq, sxd, sxs);  // while the first copies are in flight
  __syncthreads();
  const signed char* xq = sxq;
  const float* xd = sxd;
  const float* xs = sxs;
#endif
  // After a tile's warp reduction, lane l holds the total of value l >> kShift (row, token; swiglu:
  // the gate's, then the up's); the first lane of each value writes it.
  const int idx = lane >> kShift;
  const bool writer = (lane & ((1 << kShift) - 1)) == 0;
#if GQ_MOE != 2
  // A tile's rows from its totals (every lane calls it: swiglu fetches the up total by shuffle).
  auto write_rows = [&](float total, const Tile& t) {
    if (kSwiglu) {
      const float up = __shfl_sync(0xffffffffu, total, ((idx + GQ_R * GQ_T) << kShift) & 31);
      const int row = idx / GQ_T, tok = idx % GQ_T;
      if (writer && !t.skip && idx < GQ_R * GQ_T && row < t.nr && tok < n_tok)
        t.y[(long long)tok * t.n + t.r0 + row] = glu_(GQ_GELU ? geluf_(total) : siluf_(total), up);
    } else {
      const int row = idx / GQ_T, tok = idx % GQ_T;
      if (writer && !t.skip && idx < kV && row < t.nr && tok < n_tok) t.y[(long long)tok * t.n + t.r0 + row] = total;
    }
  };
#endif
#if GQ_STREAM
  int pending0 = -1, pending1 = -1;  // the warp's shared first / last tile whose part it stored
#endif
  Tile rt{};  // the tile being read (found at its first chunk)
  for (int item = 0; item < items; ++item) {
    if (item + GQ_ST - 1 < items) issue(item + GQ_ST - 1);
#if !GQ_XPRE
    stage_wait(sb, item);
    __syncwarp();
#endif

    // This lane's sub-tile j (packed: of its lane group g) and its part of the chunk.
    int tile, q, c;
    locate(item, tile, q, c);
    const int m = q / n_mine, jj = q - m * n_mine;
    const int jg = GQ_SPLIT ? warp + GQ_WARPS * jj : jj;
    const int g = lane / kLPG, lg = lane % kLPG, j = jg * GQ_PACK + g;
    const unsigned char* st = ring[warp][item % GQ_ST] + g * (kSlots * kCHP);
    const int b = lg / GQ_LPB, sub = lg % GQ_LPB;
    if (c == 0 || (GQ_STREAM && item == 0)) rt = find_tile<kSwiglu>(p, tile, min(j, n_sub - 1));
#if GQ_MOE
    const int xrow = rt.xrow;
#else
    constexpr int xrow = 0;
#endif
    const bool reads = b < (c == kNC - 1 ? kTail : kBPC) && j < n_sub;
    const int k0 = (c * kBPC + b) * GQ_QK;
#if GQ_XPRE
    // The chunk's x (q8 values, per-32 scales, per-16 sums) loaded before the wait for its weights:
    // x does not depend on the ring, so the loads' L1 latency overlaps the wait instead of stalling
    // the dp4a chain (ncu, 31B q4_K: half the warps' stalls were those loads).
    XRun xpre;
    if (reads) load_x_runs(xq, xd, xs, GQ_XQ == 2 ? 0 : xrow, k0, sub, xpre);
    stage_wait(sb, item);
    __syncwarp();
#endif
    // Where each slot's chunk starts in its slot (realigned: its offset from the 16-byte boundary).
    int shift[kSlots];
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
#if GQ_REALIGN
      const unsigned char* w = (kSwiglu && s >= GQ_R) ? rt.w1 : rt.w0;
      shift[s] = (int)((reinterpret_cast<unsigned long long>(w) + (unsigned long long)(rt.r0 + s % GQ_R) * kRB +
                        (unsigned long long)c * kCHB) &
                       15);
#else
      shift[s] = 0;
#endif
    }
#if GQ_MOE == 2
    // The down form sums its sub-tiles weighted: each lane scales its partial sums of a chunk by its
    // sub-tile's routing weight (part, below), and one warp reduction ends the tile.
    float part[kSlots][GQ_T];
#pragma unroll
    for (int s = 0; s < kSlots; ++s)
#pragma unroll
      for (int t = 0; t < GQ_T; ++t) part[s][t] = 0.0f;
    float(&dst)[kSlots][GQ_T] = part;
#else
    float(&dst)[kSlots][GQ_T] = acc;
#endif
    if (reads) {
      Run r[kSlots][GQ_NR];
#pragma unroll
      for (int s = 0; s < kSlots; ++s) read_block(st, s * kCHP + shift[s] + b * GQ_BB, sub, r[s]);
#if GQ_XQ
        // Per token, the runs in order (each (row, token) sum adds its runs in j order, as the
        // exact path does).
#pragma unroll
      for (int t = 0; t < GQ_T; ++t) {
        if (t < n_tok) {
#if GQ_XPRE
          const XRun& xr = xpre;
#else
          XRun xr;
          load_x_runs(xq, xd, xs, GQ_XQ == 2 ? t : xrow + t, k0, sub, xr);
#endif
#if GQ_PAIRS
          // Runs 2h, 2h + 1: one sub-block (one a, one c, one x scale). Two dp4a chains (ILP),
          // added as integers; |sum| < 2^20, so the float is exact.
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int4 xa = xr.w[2 * h], xb = xr.w[2 * h + 1];
            const float xs2 = xr.s[2 * h] + xr.s[2 * h + 1];
#pragma unroll
            for (int s = 0; s < kSlots; ++s) {
              const Run &ra = r[s][2 * h], &rb = r[s][2 * h + 1];
              int sa, sb;
              if (GQ_HI16) {
                sa = dp4a_u8(ra.q[0], xa.x, 0), sb = dp4a_u8(rb.q[0], xb.x, 0);
                sa = dp4a_u8(ra.q[1], xa.y, sa), sb = dp4a_u8(rb.q[1], xb.y, sb);
                sa = dp4a_u8(ra.q[2], xa.z, sa), sb = dp4a_u8(rb.q[2], xb.z, sb);
                sa = dp4a_u8(ra.q[3], xa.w, sa), sb = dp4a_u8(rb.q[3], xb.w, sb);
              } else {
                sa = __dp4a((int)ra.q[0], xa.x, 0), sb = __dp4a((int)rb.q[0], xb.x, 0);
                sa = __dp4a((int)ra.q[1], xa.y, sa), sb = __dp4a((int)rb.q[1], xb.y, sb);
                sa = __dp4a((int)ra.q[2], xa.z, sa), sb = __dp4a((int)rb.q[2], xb.z, sb);
                sa = __dp4a((int)ra.q[3], xa.w, sa), sb = __dp4a((int)rb.q[3], xb.w, sb);
              }
              dst[s][t] = fmaf(ra.a * xr.d[2 * h], (float)(sa + sb), dst[s][t]);
              dst[s][t] = fmaf(ra.c, xs2, dst[s][t]);  // q4_K / q5_K: no integer offset
            }
          }
#else
#pragma unroll
          for (int j = 0; j < GQ_NR; ++j) {
            const int4 xw = xr.w[j];
#pragma unroll
            for (int s = 0; s < kSlots; ++s) {
              int si = __dp4a((int)r[s][j].q[0], xw.x, 0);
              si = __dp4a((int)r[s][j].q[1], xw.y, si);
              si = __dp4a((int)r[s][j].q[2], xw.z, si);
              si = __dp4a((int)r[s][j].q[3], xw.w, si);
              dst[s][t] = fmaf(r[s][j].a * xr.d[j], (float)si, dst[s][t]);
              if (kOffsetTerm) dst[s][t] = fmaf(r[s][j].c - r[s][j].a * (float)GQ_VOFF, xr.s[j], dst[s][t]);
            }
          }
#endif
        }
      }
#else
#pragma unroll
      for (int j = 0; j < GQ_NR; ++j) {
        const int k = k0 + run_k(j, sub);
        // Exact values: byte b -> 2^23 + b (b in the mantissa), minus 2^23 (+128 for int8, which
        // were biased by the xor) + the format's integer offset.
        constexpr float kConv = 8388608.0f + (GQ_SIGNED ? 128.0f : 0.0f) + (float)GQ_VOFF;
        float wf[kSlots][16];
#pragma unroll
        for (int s = 0; s < kSlots; ++s)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const unsigned w = GQ_SIGNED ? (r[s][j].q[i] ^ 0x80808080u) : r[s][j].q[i];
            wf[s][4 * i + 0] = __uint_as_float(__byte_perm(w, 0x4b000000u, 0x7650)) - kConv;
            wf[s][4 * i + 1] = __uint_as_float(__byte_perm(w, 0x4b000000u, 0x7651)) - kConv;
            wf[s][4 * i + 2] = __uint_as_float(__byte_perm(w, 0x4b000000u, 0x7652)) - kConv;
            wf[s][4 * i + 3] = __uint_as_float(__byte_perm(w, 0x4b000000u, 0x7653)) - kConv;
          }
#pragma unroll
        for (int t = 0; t < GQ_T; ++t) {
          if (t < n_tok) {
            const float4* xp = reinterpret_cast<const float4*>(x_f32 + (xrow + t) * GQ_K + k);
            float xv[16];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const float4 v = __ldg(xp + i);
              xv[4 * i] = v.x, xv[4 * i + 1] = v.y, xv[4 * i + 2] = v.z, xv[4 * i + 3] = v.w;
            }
            float sx = 0.0f;
            if (GQ_HASMIN) {
#pragma unroll
              for (int e = 0; e < 16; ++e) sx += xv[e];
            }
#pragma unroll
            for (int s = 0; s < kSlots; ++s) {
              float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
              for (int e = 0; e < 16; e += 2) {
                s0 = fmaf(wf[s][e], xv[e], s0);
                s1 = fmaf(wf[s][e + 1], xv[e + 1], s1);
              }
              dst[s][t] = fmaf(r[s][j].a, s0 + s1, dst[s][t]);
              if (GQ_HASMIN) dst[s][t] = fmaf(r[s][j].c, sx, dst[s][t]);
            }
          }
        }
      }
#endif
    }

#if GQ_MOE == 2
    if (j < n_sub) {  // this chunk's partial sums, weighted (acc: the tile's weighted sum so far)
      // The shared down (j = k): sigmoid(x . g) from the gate/up launch, or 1 when ungated (no gate).
      float wj = j < p.k ? p.wts[(long long)rt.tok * p.k + j] : p.gate != nullptr ? p.gate[rt.tok] : 1.0f;
      bool drop = false;  // another rank's expert (expert parallelism): adds nothing, as on the CPU
      if (j < p.k) {      // an id outside [0, n_routed) (not moe_route's): NaN, never a skipped slot's sum
        const int e = __ldg(p.ids + (long long)rt.tok * p.k + j);
        if (e < 0 || e >= (p.n_routed > 0 ? p.n_routed : p.n_experts))
          wj = __int_as_float(0x7fc00000);
        else
          drop = rt.skip;
      }
      if (!drop)
#pragma unroll
        for (int s = 0; s < kSlots; ++s)
#pragma unroll
          for (int t = 0; t < GQ_T; ++t) acc[s][t] = fmaf(wj, part[s][t], acc[s][t]);
    }
    const bool tile_end = c == kNC - 1 && jj == n_mine - 1;  // the warp's last item of the tile
#else
    const bool tile_end =
        c == kNC - 1 || (GQ_STREAM && item == items - 1);  // the tile's (streamed: or the warp's) last
#endif
    if (tile_end) {  // reduce over the warp and write
      float v[kVP];
#pragma unroll
      for (int i = 0; i < kVP; ++i) v[i] = i < kV ? acc[i / GQ_T][i % GQ_T] : 0.0f;
      reduce_step<kVP, 16>(v, lane);
      const float total = v[0];
      [[maybe_unused]] const Tile& t = rt;
#if GQ_STREAM
      const long long t_lo = (long long)tile * kNC, t_hi = t_lo + kNC;
      if (t_lo < lo || t_hi > hi) {
        // A tile shared with other warps: store this warp's part now (record 0: its first tile, 1:
        // its last); its arrival is counted after the warp's last item (below), so the stream is
        // not held up by a fence in the middle.
        const int rec = tile == lo / kNC ? 0 : 1;
        if (writer && idx < kV) p.part[((long long)gw * 2 + rec) * 32 + idx] = total;
        (rec == 0 ? pending0 : pending1) = tile;
      } else {
        write_rows(total, rt);
      }
#elif GQ_MOE == 2 && GQ_SPLIT
      split_add(writer && idx < kV ? idx : -1, total, t);
#elif GQ_MOE == 2
      if (writer && idx < kV && idx < t.nr) t.y[t.r0 + idx] = total;
#else
      write_rows(total, t);
#endif
#pragma unroll
      for (int s = 0; s < kSlots; ++s)
#pragma unroll
        for (int t2 = 0; t2 < GQ_T; ++t2) acc[s][t2] = 0.0f;
    }
    __syncwarp();  // every lane is done with this stage before it is refilled
  }
#if GQ_STREAM
  // The shared tiles' arrivals, after one fence for both parts; the last warp of a tile to arrive
  // adds the parts of its warps w0..w1 in warp order, writes the rows and zeroes the counter.
  if (pending0 >= 0 || pending1 >= 0) {
    __threadfence();
    __syncwarp();
    const auto first_item = [&](long long w) { return w * n_items / n_warps; };
    const auto owner = [&](long long i) { return ((i + 1) * n_warps - 1) / n_items; };
    for (int rec = 0; rec < 2; ++rec) {
      const int tile = rec == 0 ? pending0 : pending1;
      if (tile < 0) continue;
      unsigned before = 0;
      if (lane == 0) before = atomicAdd(p.count + tile, 1u);
      before = __shfl_sync(0xffffffffu, before, 0);
      const long long t_lo = (long long)tile * kNC, w0 = owner(t_lo), w1 = owner(t_lo + kNC - 1);
      if (before != (unsigned)(w1 - w0)) continue;
      __threadfence();
      float sum = 0.0f;
      if (writer && idx < kV)
        for (long long w = w0; w <= w1; ++w)
          sum += __ldcg(p.part + (w * 2 + (tile == first_item(w) / kNC ? 0 : 1)) * 32 + idx);
      write_rows(sum, find_tile<kSwiglu>(p, tile));
      if (lane == 0) p.count[tile] = 0;  // zero again for the next launch
    }
  }
#endif
  stages_drain();
}

#if GQ_MOE == 2
extern "C" __global__ void __launch_bounds__(GQ_WARPS * 32, GQ_MINB) gemv_q_moe_down(const GemvQuantMoeParams p) {
  gemv_q_body<false>(p);
}
#elif GQ_MOE && GQ_SWIGLU
extern "C" __global__ void __launch_bounds__(GQ_WARPS * 32, GQ_MINB) gemv_q_moe_swiglu(const GemvQuantMoeParams p) {
  gemv_q_body<true>(p);
}
#elif GQ_MOE
extern "C" __global__ void __launch_bounds__(GQ_WARPS * 32, GQ_MINB) gemv_q_moe(const GemvQuantMoeParams p) {
  gemv_q_body<false>(p);
}
#elif GQ_SWIGLU
extern "C" __global__ void __launch_bounds__(GQ_WARPS * 32, GQ_MINB) gemv_q_swiglu(const GemvQuantParams p) {
  gemv_q_body<true>(p);
}
#else
extern "C" __global__ void __launch_bounds__(GQ_WARPS * 32, GQ_MINB) gemv_q(const GemvQuantParams p) {
  gemv_q_body<false>(p);
}
#if defined(GQ_NORM_COLS) && GQ_T == 1 && !GQ_STREAM
#include "AddNormTail.cuh"
// matmul_add_rms_norm (one token): gemv_q's product into the op's sum (q.w[0].y), then the
// launch's last block adds b and normalizes the row as Norm.cu's add_rms_norm does
// (AddNormTail.cuh: the same bits as the two launches). Every warp of the block reaches the tail
// (gemv_q_body has no early exit).
extern "C" __global__ void __launch_bounds__(GQ_WARPS * 32, GQ_MINB) gemv_q_add_norm(const GemvQuantAddNormParams p) {
  gemv_q_body<false>(p.q);
  add_norm_tail<GQ_NORM_COLS, GQ_WARPS * 32>(p.q.w[0].y, p.norm);
}
#endif
#endif

// x [n_tok, GQ_K] f32 -> int8 per 32 elements with scale d = amax / 127 (q = round(x / d)), and
// the sum of d * q over each 16 elements. One warp per 32 elements; a NaN in x makes d NaN.
extern "C" __global__ void __launch_bounds__(256) gemv_q_quantize_x(const GemvQuantXParams p) {
  memra_grid_dependency();
  signed char* xq = static_cast<signed char*>(p.xq);
  float* xd = reinterpret_cast<float*>(xq + GQ_XROWS * GQ_K);
  float* xs = xd + GQ_XROWS * (GQ_K / 32);
  const int lane = threadIdx.x & 31;
  const int n = p.n_tok * (GQ_K / 32);
  for (int b = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5); b < n; b += (int)((gridDim.x * blockDim.x) >> 5))
    q8x_quantize_block(p.x[b * 32 + lane], b, lane, xq, xd, xs);
  if (p.zero != nullptr)
    for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < p.n_zero; i += (int)(gridDim.x * blockDim.x))
      p.zero[i] = 0u;
}
