// The program of a `fused_rows` op (ir/Ops.def; made by passes/FuseRows): straight-line math over
// rows of one width, each instruction one of the row ops it replaced, in their order.
//
//   "t0 = rms_norm(a0, a3, 1e-06); t1 = add(t0, a1); t2 = scale(t1, 0.0625); yield t1, t2"
//
// `aK` is the op's operand K (an activation row, or a weight read as values), `tI` the result of
// instruction I, `yield` lists the values the op returns, in result order. Instructions:
//
//   rms_norm(x, w, eps)   x / sqrt(mean(x^2) + eps) * w   (w a weight [N], or `_`: no weight)
//   add(x, y), mul(x, y)  elementwise over two rows
//   mul_weight(x, w)      x * w[n], or x * w[0] for a weight [1]
//   scale(x, factor)      x * factor
//   tanh(x)
//
// Each computes exactly what the op of the same name computes (ir/Ops.def), so a program's
// results equal the unfused ops' (the CPU executor runs each instruction with that op's kernel).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memra::ir {

// A program's bounds (the CUDA kernel's parameter block holds that many addresses).
inline constexpr int kMaxRowInputs = 11;
inline constexpr int kMaxRowYields = 8;
inline constexpr int kMaxRowInstrs = 24;

enum class RowOpcode : uint8_t { kRmsNorm, kAdd, kMul, kMulWeight, kScale, kTanh };
absl::string_view RowOpcodeName(RowOpcode op);

// A value of the program: operand `index` (kInput) or instruction `index`'s result (kTemp);
// kNone only for rms_norm's absent weight.
struct RowRef {
  enum Kind : uint8_t { kNone, kInput, kTemp } kind = kNone;
  int index = 0;
  bool operator==(const RowRef& o) const { return kind == o.kind && index == o.index; }
  static RowRef Input(int i) { return {kInput, i}; }
  static RowRef Temp(int i) { return {kTemp, i}; }
};

struct RowInstr {
  RowOpcode opcode = RowOpcode::kAdd;
  RowRef a, b;          // b: rms_norm's weight, the second row of add / mul, mul_weight's weight
  double constant = 0;  // rms_norm's eps, scale's factor
};

struct RowProgram {
  std::vector<RowInstr> instrs;
  std::vector<RowRef> yields;

  std::string ToString() const;
  // Structure only (references in range, arities, at least one yield, the bounds above); the
  // operands' types are ir/TypeInference's to check. `num_inputs`: the op's operand count.
  static absl::StatusOr<RowProgram> Parse(absl::string_view text, int num_inputs);
};

}  // namespace memra::ir
