// The host side of kernels/cuda/GemvQuant.cu that its units (GemvQuant.cc), its GPU test
// (tests/cuda/GemvQuant_test.cc) and memra-kernel-bench share: the formats it reads and the
// selection (kernels, geometry, scratch) for one matmul / matmul_group / matmul_swiglu.
#pragma once

#include <optional>

#include "ir/DType.h"
#include "ir/Op.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/NormParams.h"
#include "kernels/cuda/Target.h"
#include "kernels/cuda/WeightLayout.h"

namespace memra::kernels::cuda {

// Spare bytes after a block matrix on the device: GemvQuant.cu's realigned 16-byte copies
// (GQ_REALIGN) read up to 15 bytes past a matrix's last row.
inline constexpr size_t kGemvQuantMatrixTailBytes = 16;

// Whether GemvQuant.cu reads matrices stored as `dtype`: q8_0, q4_0, q4_1, q5_0, q5_1, q2_K,
// q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, mxfp4.
bool GemvQuantReads(ir::DType dtype);

// Whether a matrix stored as `dtype` with device layout `layout` (OpShapes::layout: the weight
// mode's choice) is on the device as its GGUF blocks (kBlocks: row r at data + r * row_bytes),
// which is what GemvQuant.cu reads. The units apply only then (not under --weights bf16).
bool GemvQuantBlocksOnDevice(ir::DType dtype, const WeightLayout* layout);

// The activations the products read (GemvQuant.cu GQ_XQ).
enum class GemvQuantX {
  kF32 = 0,      // x as f32, exact conversions, FMA
  kQ8 = 1,       // x as int8 per 32, written by gemv_q_quantize_x into the step's scratch; dp4a
  kQ8Block = 2,  // the same, quantized by every block into its shared memory (no extra launch, a
                 // grid of 2 resident blocks per SM); kQ8 where x and the ring do not fit
};
// What the units select (GemvQuant.cc).
GemvQuantX DefaultGemvQuantX(ir::DType dtype);

// Overrides for memra-kernel-bench and the test (0 / nullopt: the units' choice).
struct GemvQuantOptions {
  std::optional<GemvQuantX> x;
  int rows = 0;          // rows per warp tile (GQ_R, 1..4)
  int stages = 0;        // ring stages per warp (GQ_ST, 2..8)
  int warps = 0;         // warps per block (GQ_WARPS)
  int max_blocks = 0;    // grid cap (warps loop over the tiles past it)
  int pack = 0;          // gemv_q_moe_down: sub-tiles a chunk holds side by side (GQ_PACK), at most what fits
  int split = 0;         // gemv_q_moe_down: 1 a warp a tile, 2 the block's warps share a tile (GQ_SPLIT); 0 the
                         // units' choice
  int min_blocks = 0;    // __launch_bounds__' minimum resident blocks per SM (GQ_MINB: caps the registers); the
                         // dense forms (select-kernels{gemv-q-blocks-per-sm}) at most what their rings' shared
                         // memory lets an SM hold, and a grid capped at resident blocks (the K-quants') takes
                         // that many an SM; 0 the units' choice
  int stream = 0;        // the dense products with x quantized by their own launch, chunks spread evenly over
                         // the warps (GQ_STREAM): 0 never (the units' choice: measured slower, bench/RESULTS.md
                         // session 28), 1 where the tiles do not divide evenly over the SMs, 2 wherever it can run
  bool x_early = false;  // the dense products at T = 1 with q8 x: a chunk's x loaded before the wait for its
                         // weights (GQ_XPRE; not the units' choice until measured alone)
  bool one_scale_form = false;    // the dense q4_K / q5_K products: their 6-bit scales unpacked by one form
                                  // (GQ_SCALES=1: the same values, far fewer registers; the kernel bench's rows)
  bool pair_dot = true;           // the dense q4_K / q5_K products with q8 x: a sub-block's two runs dotted as one,
                                  // q4_K's high nibbles in place (GQ_PAIR_DOT; false: the form before, GQ_PAIR_DOT=0)
  int64_t l2_prefetch_bytes = 0;  // the dense products: bytes of their weights asked of the L2 before the wait
                                  // (GQ_L2_PREFETCH, select-kernels{l2-prefetch-bytes}; at most the target's L2)
};

// The selection for `op` at `shapes` when it is a matmul (one weight; or a matmul_add_rms_norm's
// product), a matmul_group (any number: one launch per format and 4 weights) or a matmul_swiglu
// (gate and up of one format) whose matrices are all in formats GemvQuant.cu reads, K is a multiple
// of their block size and the activation has T <= 8 rows; nullopt otherwise. The device layout is not checked here (the
// units add GemvQuantBlocksOnDevice). Launches: gemv_q_quantize_x first when x is q8 (unless x's producer writes it as
// q8, Q8Companion.h: the products then read that), then one gemv_q (gemv_q_swiglu) per format group, in the order of
// the weights.
std::optional<OpSelection> SelectGemvQuant(const ir::Op& op, const OpShapes& shapes, const Target& target,
                                           const GemvQuantOptions& options = {});

// Binds a selection of SelectGemvQuant for the op of `c` (the units' Bind); with `tail`, its last
// launch is gemv_q_add_norm (matmul_add_rms_norm: the norm as the product launch's tail), the
// product going to the op's first result (the sum).
absl::Status BindGemvQuant(const BindContext& c, DeviceWork& w, const AddNormTailParams* tail = nullptr);

// The static shared memory a GemvQuant.cu product launch (gemv_q, gemv_q_swiglu, the MoE forms)
// declares, from its defines: every warp's ring stages with their mbarriers, and x staged per block
// (GQ_XQ = 2), and gemv_q_add_norm's tail (in 16-byte units). Equal to ptxas's count (checked on
// every module the host emulation builds, none of which has the tail); every selection keeps it
// within the target's smem_per_block. -1 when the launch is not one.
int64_t GemvQuantSmemBytes(const Launch& launch);

// The MoE forms (kernels/cuda/Moe.cc's decode unit builds on them). gemv_q_quantize_x for up to
// `rows` rows of K values (its output: GemvQuantXBytes(rows, K) bytes of scratch, 256-aligned).
Launch GemvQuantXLaunch(const Target& target, int64_t K, int64_t rows);
int64_t GemvQuantXBytes(int64_t rows, int64_t K);
// gemv_q_moe(_swiglu) (GemvQuantMoeParams) over matrices stored as `dtype` with K columns, x
// quantized (q8, GQ_XQ = 1) in a layout of x_rows rows, for up to `slots` routed slots of n rows
// and `shared_rows` shared rows of ns rows (the grid's bound); nullopt
// when GemvQuant.cu does not read `dtype` or K is not a multiple of its block.
// gemv_q_moe_down (GQ_MOE = 2): for up to `tokens` tokens, each tile GQ_R of the n output rows
// of one token, over its k choices and the shared down, the weighted sum written once.
// `options` overrides the geometry (rows, stages, warps, grid cap; memra-kernel-bench --section moe
// sweeps them); x is always q8 here.
std::optional<Launch> GemvQuantMoeDownLaunch(const Target& target, ir::DType dtype, int64_t K, int64_t x_rows,
                                             int64_t tokens, int64_t n, const GemvQuantOptions& options = {});
std::optional<Launch> GemvQuantMoeLaunch(const Target& target, ir::DType dtype, int64_t K, int64_t x_rows, bool swiglu,
                                         int64_t slots, int64_t n, int64_t shared_rows, int64_t ns,
                                         const GemvQuantOptions& options = {});

}  // namespace memra::kernels::cuda
