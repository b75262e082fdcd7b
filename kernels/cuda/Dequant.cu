// Dequantization of the ggml block formats on the device, as the blocks sit in the GGUF
// (DequantParams.h describes the layout). DEQ_TYPE is the ggml type id (2 q4_0, 3 q4_1, 6 q5_0,
// 7 q5_1, 8 q8_0, 10 q2_K, 11 q3_K, 12 q4_K, 13 q5_K, 14 q6_K, 20 iq4_nl, 23 iq4_xs, 39 mxfp4); one
// module per format.
// The per-format decoders are DequantBlocks.cuh's (bit-exact with ggml's dequantize_row_*, checked
// on the host by tests/kernels/DequantBlocks_test.cc), so dequant_rows_f32 gives exactly the CPU's
// f32 values and dequant_bf16 those values rounded to nearest even (as formats::FloatToBf16).
// Exact for blocks with finite scales; a NaN scale gives NaN, not necessarily the host's NaN bits.
//
// A thread produces 8 consecutive elements of one block (a group): one 16-byte store of bf16, two
// of f32. Blocks are read with byte loads (they start at any byte).
#include "Common.cuh"
#include "DequantBlocks.cuh"
#include "DequantParams.h"

__device__ __forceinline__ u32 pack_bf16(float a, float b) { return (u32)f32_to_bf16(a) | ((u32)f32_to_bf16(b) << 16); }

// Groups of 8 elements per block: group gr of a row is group gr % DEQ_GROUPS_PER_BLOCK of block
// gr / DEQ_GROUPS_PER_BLOCK.
#define DEQ_GROUPS_PER_BLOCK (DEQ_QK / 8)

extern "C" __global__ void dequant_bf16(const DequantParams p) {
  memra_grid_dependency();
  const i64 groups_per_row = p.cols >> 3;
  const i64 n = p.n_rows * groups_per_row;
  uint4* y = reinterpret_cast<uint4*>(p.y);
  MEMRA_GRID_STRIDE(i, n) {
    const i64 r = i / groups_per_row, gr = i - r * groups_per_row;
    const u8* b = p.w + (p.row0 + r) * p.row_bytes + (gr / DEQ_GROUPS_PER_BLOCK) * DEQ_BYTES;
    float v[8];
    dequant8(b, (int)(gr % DEQ_GROUPS_PER_BLOCK), v);
    uint4 o;
    o.x = pack_bf16(v[0], v[1]);
    o.y = pack_bf16(v[2], v[3]);
    o.z = pack_bf16(v[4], v[5]);
    o.w = pack_bf16(v[6], v[7]);
    y[i] = o;
  }
}

extern "C" __global__ void dequant_rows_f32(const DequantRowsParams p) {
  memra_grid_dependency();
  const i64 groups_per_row = p.cols >> 3;
  const i64 n = (i64)p.n_tok * groups_per_row;
  float4* y = reinterpret_cast<float4*>(p.y);
  MEMRA_GRID_STRIDE(i, n) {
    const i64 t = i / groups_per_row, gr = i - t * groups_per_row;
    const u8* b = p.w + (i64)p.ids[t] * p.row_bytes + (gr / DEQ_GROUPS_PER_BLOCK) * DEQ_BYTES;
    float v[8];
    dequant8(b, (int)(gr % DEQ_GROUPS_PER_BLOCK), v);
    y[2 * i] = make_float4(v[0], v[1], v[2], v[3]);
    y[2 * i + 1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}
