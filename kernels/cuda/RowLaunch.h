// The launch of a Norm.cu row kernel: one block per row (grid-stride past 2^20 rows), the block a
// power of two >= 32 covering the row up to max_block threads. Shared by the row units and the
// fused ops built on them (qk_norm_rope).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cuda/KernelSpec.h"

namespace memra::kernels::cuda {

Launch RowLaunch(const std::string& entry, int64_t rows, int64_t cols, int64_t max_block);

}  // namespace memra::kernels::cuda
