// The tile geometry of MoeGemm.cu's moe_gemm and its thread -> element maps, in one place so the
// host test (tests/cuda/MoeGemm_test.cc, MoeGemmFragments) can check them against a naive product
// with a C++ statement of ldmatrix / mma.sync semantics (MEMRA_MG_HOST: plain inline functions).
//
// A block computes a BM x BN tile: BM slot rows x BN weight rows (plain: BN output columns;
// swiglu: BN / 2 gate rows interleaved with their BN / 2 up rows, see mg_w_col), K in steps of
// MG_BK through shared memory. 8 warps as 2 (m) x 4 (n), each a 32 x (BN / 4) tile = 2 m16 x
// MG_NJ n8 mma.sync.m16n8k16 tiles (MG_BN 128: 4; 64, the 256-element block formats: 2). Shared tiles are K-contiguous
// rows of bf16, padded to MG_BKP elements (MG_BK + 8: a row stride of 80 or 144 bytes puts the 8 rows an ldmatrix reads
// in 8 distinct 16-byte bank groups, no conflicts).
#pragma once

#ifdef MEMRA_MG_HOST
#define MG_FN inline
#else
#define MG_FN __device__ __forceinline__
#endif

#define MG_BM 64
#ifndef MG_BN
#define MG_BN 128  // 128 or 64 (MoeGemm.cc picks it per storage)
#endif
#define MG_WN (MG_BN / 4)  // weight rows per warp
#define MG_NJ (MG_WN / 8)  // n8 tiles per warp
#define MG_THREADS 256
#ifndef MG_BK
#define MG_BK 32
#endif
#define MG_BKP (MG_BK + 8)

// ldmatrix.x4 row addresses for an A fragment (16 x 16 at rows r0.., k k0..): lane l points at
// row l % 16, k offset 8 (l / 16), so matrices 0..3 are (rows 0-7, k 0-7), (8-15, 0-7),
// (0-7, 8-15), (8-15, 8-15) = a0, a1, a2, a3 of m16n8k16.
MG_FN int mg_ldm_a_row(int lane) { return lane & 15; }
MG_FN int mg_ldm_a_k(int lane) { return (lane >> 4) << 3; }
// ldmatrix.x4 row addresses for the B fragments of two n8 tiles (W rows n0..n0+15, k k0..):
// matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) = b0, b1 of the
// first n8 tile, then b0, b1 of the second (a W row is a column of B, K-contiguous: "col").
MG_FN int mg_ldm_b_row(int lane) { return ((lane >> 4) << 3) + (lane & 7); }
MG_FN int mg_ldm_b_k(int lane) { return ((lane >> 3) & 1) << 3; }
// Accumulator q (0..3) of an m16n8 tile: rows g, g, g + 8, g + 8; columns 2t, 2t + 1, 2t, 2t + 1.
MG_FN int mg_acc_row(int lane, int q) { return (lane >> 2) + ((q >> 1) << 3); }
MG_FN int mg_acc_col(int lane, int q) { return ((lane & 3) << 1) + (q & 1); }

// Weight tile row r (0..MG_BN-1) -> which matrix and which output column of the block (0..).
// Plain: column r of W. Swiglu: in each warp's MG_WN rows the first half are gate rows and the
// second half the up rows of the same columns, so a lane holds g and u of one output in the same
// accumulator position of n8 tiles j and j + MG_NJ / 2 and the epilogue pairs them in registers.
// bn: the module's MG_BN (warps of bn / 4 rows).
MG_FN int mg_w_col(int r, int swiglu, int bn) { return swiglu ? (r / (bn / 4)) * (bn / 8) + r % (bn / 8) : r; }
MG_FN int mg_w_is_up(int r, int swiglu, int bn) { return swiglu ? (r / (bn / 8)) & 1 : 0; }
// Output columns per block.
MG_FN int mg_cols_per_block(int swiglu, int bn) { return swiglu ? bn / 2 : bn; }

#undef MG_FN
