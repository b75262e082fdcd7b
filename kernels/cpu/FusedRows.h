// The CPU reference of fused_rows (ir/Ops.def, ir/RowProgram.h): each instruction over all rows
// with the kernel its unfused op runs on the CPU executor, so the results equal the unfused ops'
// bit for bit (what fuse-rows' execution tests check).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "ir/RowProgram.h"
#include "kernels/cpu/ThreadPool.h"
#include "llvm/ADT/ArrayRef.h"

namespace memra::kernels::cpu {

// An operand of the program: rows x cols activations, or a weight of `n` values (cols, or 1).
struct RowOperand {
  const float* data = nullptr;
  int64_t n = 0;
  bool weight = false;
};

// outputs[i] (rows x cols) receives yield i. Errors name the instruction whose operand does not
// fit (the verifier's rules, checked again because the executor may run unverified modules).
absl::Status FusedRows(const ir::RowProgram& program, llvm::ArrayRef<RowOperand> inputs, int64_t rows, int64_t cols,
                       llvm::ArrayRef<float*> outputs, ThreadPool* pool);

}  // namespace memra::kernels::cpu
