#include "kernels/cpu/FusedRows.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/Elementwise.h"
#include "kernels/cpu/Norm.h"

namespace memra::kernels::cpu {

absl::Status FusedRows(const ir::RowProgram& program, llvm::ArrayRef<RowOperand> inputs, int64_t rows, int64_t cols,
                       llvm::ArrayRef<float*> outputs, ThreadPool* pool) {
  using ir::RowOpcode;
  using ir::RowRef;
  const int64_t n = rows * cols;
  if (outputs.size() != program.yields.size())
    return absl::InvalidArgumentError(
        absl::StrCat("fused_rows: ", outputs.size(), " outputs for ", program.yields.size(), " yields"));
  std::vector<std::vector<float>> temps(program.instrs.size());
  auto bad = [&](size_t k, absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("fused_rows: instruction t", k, " (", ir::RowOpcodeName(program.instrs[k].opcode), "): ", why));
  };
  // A row operand (an activation or an earlier result), or nullptr.
  auto rows_of = [&](const RowRef& r) -> const float* {
    if (r.kind == RowRef::kTemp) return temps[r.index].data();
    if (r.kind == RowRef::kInput && r.index < static_cast<int>(inputs.size()) && !inputs[r.index].weight &&
        inputs[r.index].n == n)
      return inputs[r.index].data;
    return nullptr;
  };
  for (size_t k = 0; k < program.instrs.size(); ++k) {
    const ir::RowInstr& in = program.instrs[k];
    const float* a = rows_of(in.a);
    if (a == nullptr) return bad(k, "its first argument is not a row of this op");
    std::vector<float>& y = temps[k];
    y.resize(n);
    const float* w = nullptr;
    int64_t wn = 0;
    if (in.opcode == RowOpcode::kRmsNorm || in.opcode == RowOpcode::kMulWeight) {
      if (in.b.kind == RowRef::kInput) {
        const RowOperand& o = inputs[in.b.index];
        if (!o.weight || (o.n != cols && !(o.n == 1 && in.opcode == RowOpcode::kMulWeight)))
          return bad(k, "its weight is not a weight of the row width");
        w = o.data, wn = o.n;
      } else if (in.opcode == RowOpcode::kMulWeight) {
        return bad(k, "mul_weight without a weight");
      }
    }
    switch (in.opcode) {
      case RowOpcode::kRmsNorm:
        RmsNorm(a, w, rows, cols, static_cast<float>(in.constant), y.data(), pool);
        break;
      case RowOpcode::kAdd:
      case RowOpcode::kMul: {
        const float* b = rows_of(in.b);
        if (b == nullptr) return bad(k, "its second argument is not a row of this op");
        (in.opcode == RowOpcode::kAdd ? Add : Mul)(a, b, n, y.data());
        break;
      }
      case RowOpcode::kMulWeight:
        for (int64_t i = 0; i < n; ++i) y[i] = a[i] * w[wn == 1 ? 0 : i % cols];
        break;
      case RowOpcode::kScale: {
        const float f = static_cast<float>(in.constant);
        for (int64_t i = 0; i < n; ++i) y[i] = a[i] * f;
        break;
      }
      case RowOpcode::kTanh:
        Tanh(a, n, y.data());
        break;
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const float* src = rows_of(program.yields[i]);
    if (src == nullptr) return absl::InvalidArgumentError(absl::StrCat("fused_rows: yield ", i, " is not a row"));
    std::memcpy(outputs[i], src, static_cast<size_t>(n) * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace memra::kernels::cpu
