// Op kinds and their static description (arity, operand roles, attribute schema, flags), all
// generated from ir/Ops.def.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "ir/Attribute.h"

namespace memra::ir {

enum class OpKind : uint16_t {
#define MEMRA_OP(id, mnemonic, operands, results, attrs, flags) k##id,
#include "ir/Ops.def"
#undef MEMRA_OP
};

namespace op_flags {
inline constexpr uint32_t kPure = 0;
inline constexpr uint32_t kReadsState = 1u << 0;
inline constexpr uint32_t kWritesState = 1u << 1;
inline constexpr uint32_t kTerminator = 1u << 2;
inline constexpr uint32_t kRegion = 1u << 3;
inline constexpr uint32_t kExplicitType = 1u << 4;
inline constexpr uint32_t kCommutative = 1u << 5;
inline constexpr uint32_t kFused = 1u << 6;
inline constexpr uint32_t kUnary = 1u << 7;  // y = f(x) elementwise, x a float type, y like x
}  // namespace op_flags

// What an operand is (Ops.def's `name:role`): kAct an op result or a function argument; kWeight a
// module weight read as values (norm weights, biases, conv kernels); kMatrix a module weight read
// as a matrix (a GEMM operand, an embedding table); kState a module state; kValue either an
// activation or a weight read as values (fused_rows' inputs).
enum class OperandRole : uint8_t { kAct, kWeight, kMatrix, kState, kValue };
// "activation", "weight", "matrix weight", "state", "activation or weight"
absl::string_view OperandRoleName(OperandRole r);
// kWeight or kMatrix: the operand is a module weight `@name`.
inline bool IsWeightRole(OperandRole r) { return r == OperandRole::kWeight || r == OperandRole::kMatrix; }

struct OperandSpec {
  std::string name;
  OperandRole role = OperandRole::kAct;
  bool optional = false;
  bool variadic = false;  // last operand only; `optional` then means "zero or more"
};

struct AttrSpec {
  std::string name;
  AttrKind kind;
  bool optional = false;
};

struct OpInfo {
  OpKind kind;
  absl::string_view mnemonic;
  std::vector<OperandSpec> operands;
  std::vector<std::string> results;
  bool variadic_results = false;
  std::vector<AttrSpec> attrs;
  uint32_t flags = 0;

  bool HasFlag(uint32_t f) const { return (flags & f) != 0; }
  bool IsPure() const {
    return !HasFlag(op_flags::kReadsState | op_flags::kWritesState | op_flags::kTerminator | op_flags::kRegion);
  }
  bool variadic_operands() const { return !operands.empty() && operands.back().variadic; }
  // Operand count bounds (max = -1 for variadic).
  int min_operands() const;
  int max_operands() const;
  // The spec of operand i (the variadic tail maps to the last spec).
  const OperandSpec* operand_spec(size_t i) const;
  const AttrSpec* attr_spec(absl::string_view name) const;
};

const OpInfo& InfoOf(OpKind kind);
// Whether operand `operand_index` of a `kind` op is read as a weight matrix (role `matrix`: GEMM
// weights, embedding tables) rather than as values or an activation. The one answer every layer
// (executors, kernel selection, weight upload) uses; ir/Op.h has the same query on an Op.
bool IsMatrixOperand(OpKind kind, unsigned operand_index);
absl::string_view Mnemonic(OpKind kind);
std::optional<OpKind> LookupOpKind(absl::string_view mnemonic);
int NumOpKinds();

}  // namespace memra::ir
