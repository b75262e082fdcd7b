// Parameters of kernels/cuda/MoeGemm.cu (see KernelParams.h for the contract), the prefill
// expert products of a mixture-of-experts FFN: moe_sort groups the (token, choice) slots by
// expert on the device, moe_gemm runs every expert's product over its slots.
//
// moe_sort's scratch (MoeGemm.h MoeSortScratchBytes lays it out; every part 16-byte aligned):
//   header   int[4]:  total m-tiles, slots skipped (an id - first_expert outside [0, E): another
//                     rank's expert under expert parallelism, or an invalid id), valid slots, 0
//   offsets  int[E + 1]: slots of expert e are order[offsets[e] .. offsets[e + 1])
//   tiles    int4[max_tiles]: m-tile i = {expert, first row in order, rows (1..MG_BM), 0}, i < header[0]
//   order    int[max_slots]: the valid slots sorted by expert, ascending slot within an expert
// max_tiles = ceil(max_slots / MG_BM) + min(E, max_slots) bounds sum_e ceil(count_e / MG_BM).
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// moe_sort: ids[n_slots] (i32, slot s = token s / k, choice s % k) -> the scratch above, slot s
// grouped under expert ids[s] - first_expert of the E the weights hold. One block.
struct MoeSortParams {
  MEMRA_DPTR(const int) ids;
  MEMRA_DPTR(int) header;
  MEMRA_DPTR(int) offsets;
  MEMRA_DPTR(int) tiles;  // int4 entries
  MEMRA_DPTR(int) order;
  int n_slots;
  int first_expert;  // expert parallelism: this rank's first expert (0: none)
};
MEMRA_PARAMS_SIZE(MoeSortParams, 48);
MEMRA_PARAMS_OFFSET(MoeSortParams, header, 8);
MEMRA_PARAMS_OFFSET(MoeSortParams, offsets, 16);
MEMRA_PARAMS_OFFSET(MoeSortParams, tiles, 24);
MEMRA_PARAMS_OFFSET(MoeSortParams, order, 32);
MEMRA_PARAMS_OFFSET(MoeSortParams, n_slots, 40);
MEMRA_PARAMS_OFFSET(MoeSortParams, first_expert, 44);

// moe_gemm: for every slot s of expert e (the sorted scratch) y[s, n] = a[s / a_row_div] . W_e[n]
// for n < N; MG_SWIGLU: y[s, n] = silu(a[row] . G_e[n]) * (a[row] . U_e[n]). a is f32 [rows, K],
// row-major; W_e = w0 + e * expert_bytes (G_e; U_e = w1 + e * expert_bytes), N rows of row_bytes
// in the storage MG_TYPE names. header == null: the identity grouping (n_slots rows, expert 0,
// slot = row), for a dense product (the shared expert) through the same kernel.
struct MoeGemmParams {
  MEMRA_DPTR(const float) a;
  MEMRA_DPTR(const unsigned char) w0;
  MEMRA_DPTR(const unsigned char) w1;
  MEMRA_DPTR(float) y;
  MEMRA_DPTR(const int) header;  // moe_sort's scratch, or null
  MEMRA_DPTR(const int) tiles;
  MEMRA_DPTR(const int) order;
  long long a_row_div;
  long long expert_bytes;
  long long row_bytes;
  long long n_slots;  // the identity grouping's rows (unused when grouped)
  long long N;
  long long K;
};
MEMRA_PARAMS_SIZE(MoeGemmParams, 104);
MEMRA_PARAMS_OFFSET(MoeGemmParams, w0, 8);
MEMRA_PARAMS_OFFSET(MoeGemmParams, w1, 16);
MEMRA_PARAMS_OFFSET(MoeGemmParams, y, 24);
MEMRA_PARAMS_OFFSET(MoeGemmParams, header, 32);
MEMRA_PARAMS_OFFSET(MoeGemmParams, tiles, 40);
MEMRA_PARAMS_OFFSET(MoeGemmParams, order, 48);
MEMRA_PARAMS_OFFSET(MoeGemmParams, a_row_div, 56);
MEMRA_PARAMS_OFFSET(MoeGemmParams, expert_bytes, 64);
MEMRA_PARAMS_OFFSET(MoeGemmParams, row_bytes, 72);
MEMRA_PARAMS_OFFSET(MoeGemmParams, n_slots, 80);
MEMRA_PARAMS_OFFSET(MoeGemmParams, N, 88);
MEMRA_PARAMS_OFFSET(MoeGemmParams, K, 96);

MEMRA_PARAMS_END
