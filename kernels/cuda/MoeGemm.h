// Host side of kernels/cuda/MoeGemm.cu, the prefill (T > 8) expert products of a MoE FFN, for
// the moe_ffn unit (kernels/cuda/Moe.cc) and tests/cuda/MoeGemm_test. Not a unit itself.
//
// A step's products, with n_slots = T * k (token, choice) slots and ids[n_slots] (i32, device;
// slot s = token s / k, choice s % k), h = the swiglu rows [max_slots, F], y = [max_slots, n_embd]:
//
//   scratch: MoeSortScratchBytes(E, max_slots) bytes (the op's step scratch)
//   launches: [0] MoeSortLaunch(t, E, max_slots)
//             [1] MoeGemmLaunch(t, w_gate_up, n_embd, F, E, max_slots, /*swiglu=*/true, /*grouped=*/true)
//             [2] MoeGemmLaunch(t, w_down, F, n_embd, E, max_slots, false, true)
//   BindMoeSort(work, 0, ids, n_slots, E, max_slots, scratch);
//   BindMoeGemm(work, 1, {a = x [T, n_embd], a_row_div = k, w0 = gate, w1 = up, expert_bytes, row_bytes,
//                         y = h, n_slots, max_slots, N = F, K = n_embd, E, sort_scratch = scratch});
//   BindMoeGemm(work, 2, {a = h, a_row_div = 1, w0 = down, w1 = 0, ..., y, N = n_embd, K = F, ...});
//   then the weighted sum over each token's k rows of y (the caller's).
// The shared expert: MoeGemmLaunch(..., E = 1, max_slots = T, swiglu, /*grouped=*/false) and
// sort_scratch = 0 (a dense [T, K] x [N, K] product, same numerics).
//
// moe_gemm: for each slot s of expert e = ids[s], y[s, n] = a[s / a_row_div] . W_e[n] (n < N),
// or with w1 (MoeGemmLaunch swiglu) y[s, n] = silu(a[row] . G_e[n]) * (a[row] . U_e[n]); W_e =
// w0 + e * expert_bytes (U_e = w1 + e * expert_bytes): N rows of row_bytes = K / block_elems *
// block_bytes in the weights' storage (a fused gate_up [E, 2F, K] tensor: w1 = w0 + F * row_bytes,
// expert_bytes = 2F * row_bytes). a is f32 [rows, K] row-major, y f32 [n_slots, N] (rows = slots).
// Numerics: memra's dense prefill (weights dequantized exactly and rounded to bf16, activations
// rounded to bf16, f32 accumulation). sort_scratch == 0: the identity grouping (y[s] = a[s /
// a_row_div] . W_0 for s < n_slots), a dense product (the shared expert) through the same kernel.
// Slots whose id - first_expert is outside [0, E) are skipped (their rows of y are not written) and counted in
// the scratch header's word 1 (MoeGemmParams.h), which nothing reads synchronously.
//
// Requirements (MoeGemmLaunch checks the static ones): K a multiple of 32 and of the format's
// block; w0 / w1 / a 16-byte aligned for f32 / f16 / bf16 weights and for a (a float4 per load);
// n_slots <= max_slots; the same E and max_slots in the launches and both binds. Block-format
// weights are staged with cp.async pieces of up to 16 bytes: w0 / w1 aligned to 16 (any GGUF
// tensor) get them; other addresses work through plain byte copies, much slower.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/DType.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/Target.h"

namespace memra::kernels::cuda {

// Whether MoeGemm.cu reads weights stored as `w`: every block format DequantBlocks.cuh decodes
// (q4_0, q4_1, q5_0, q5_1, q8_0, q2_K .. q6_K, iq4_nl, iq4_xs, mxfp4) and f32 / f16 / bf16.
bool MoeGemmReads(ir::DType w);

// Rows of slots per m-tile (MoeGemmTile.cuh MG_BM), the granularity of the tile list.
inline constexpr int64_t kMoeGemmTileRows = 64;

// Upper bound of m-tiles over any assignment of max_slots slots to E experts:
// ceil(max_slots / 64) + min(E, max_slots).
int64_t MoeGemmMaxTiles(int64_t E, int64_t max_slots);

// Byte offsets of moe_sort's outputs in its scratch (each 16-byte aligned; MoeGemmParams.h).
struct MoeSortScratchLayout {
  int64_t header = 0, offsets = 0, tiles = 0, order = 0;
  int64_t bytes = 0;  // the whole scratch (a multiple of 256)
};
MoeSortScratchLayout MoeSortLayout(int64_t E, int64_t max_slots);
inline int64_t MoeSortScratchBytes(int64_t E, int64_t max_slots) { return MoeSortLayout(E, max_slots).bytes; }

// moe_sort's launch: one block of min(32, 8192 / E) warps. Errors: E outside [1, 1024],
// max_slots outside [0, 2^31 - 1].
absl::StatusOr<Launch> MoeSortLaunch(const Target& t, int64_t E, int64_t max_slots);

// moe_gemm's launch for weights stored as `w` ([E, N, K]; grouped = false: the identity grouping,
// E is then unused): a 1-D grid over the upper bound of m-tiles x ceil(N / BN) (swiglu:
// ceil(N / (BN / 2))) blocks of 256 threads, BN = 128 weight rows per block (64 for the
// 256-element block formats), static shared memory only (<= 48 KiB: the weight ring's stages). Errors: a storage
// MoeGemm.cu does not read, K not a multiple of 32 and of its block, N < 1, sizes out of range.
absl::StatusOr<Launch> MoeGemmLaunch(const Target& t, ir::DType w, int64_t K, int64_t N, int64_t E, int64_t max_slots,
                                     bool swiglu, bool grouped);

// The calls, appended to `work` as kernel `launch` of the selection. first_expert: expert
// parallelism, the weights hold experts [first_expert, first_expert + E) of the router's (slot s
// goes to expert ids[s] - first_expert; others are skipped).
void BindMoeSort(DeviceWork& work, uint32_t launch, uint64_t ids, int64_t n_slots, int64_t E, int64_t max_slots,
                 uint64_t scratch, int64_t first_expert = 0);

struct MoeGemmArgs {
  uint64_t a = 0;            // f32 [rows, K]
  int64_t a_row_div = 1;     // slot s reads row s / a_row_div (k for the gate/up of top-k slots)
  uint64_t w0 = 0;           // W (swiglu: G), expert 0
  uint64_t w1 = 0;           // swiglu: U, expert 0; else 0
  int64_t expert_bytes = 0;  // from one expert's matrix to the next
  int64_t row_bytes = 0;     // bytes of one weight row (K / block_elems * block_bytes)
  uint64_t y = 0;            // f32 [n_slots, N]
  int64_t n_slots = 0;       // this call's slots (<= max_slots)
  int64_t max_slots = 0;     // as given to MoeSortLaunch / MoeGemmLaunch (the scratch layout)
  int64_t N = 0, K = 0, E = 1;
  uint64_t sort_scratch = 0;  // moe_sort's scratch; 0: the identity grouping
};
// Also counts the FLOPs (2 n_slots N K per matrix) and, as weight bytes, the matrices of at most
// min(E, n_slots) experts (DeviceWork::Count, for --profile).
void BindMoeGemm(DeviceWork& work, uint32_t launch, const MoeGemmArgs& args);

}  // namespace memra::kernels::cuda
