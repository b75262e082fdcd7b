// The launch of a Norm.cu row kernel: one block per row (grid-stride past 2^20 rows), the block a
// power of two >= 32 covering the row up to max_block threads. Shared by the row units and the
// fused ops built on them (qk_norm_rope).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cuda/KernelSpec.h"

namespace memra::kernels::cuda {

Launch RowLaunch(const std::string& entry, int64_t rows, int64_t cols, int64_t max_block);

// The launch of a Norm.cu normalization (rms_norm, l2_norm, gated_rms_norm, add_rms_norm): rows of
// at most kWarpRowMaxCols columns one warp each (NORM_WARP_ROWS, eight a block), longer rows one
// block each (RowLaunch, up to 256 threads).
inline constexpr int64_t kWarpRowMaxCols = 512;
Launch NormRowLaunch(const std::string& entry, int64_t rows, int64_t cols);

}  // namespace memra::kernels::cuda
