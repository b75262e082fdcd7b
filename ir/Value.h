// SSA values: op results, function arguments, and the module's weights and state, which ops
// reference as operands (printed `@name`). Each value has a tensor type and a list of uses.
#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "ir/Attribute.h"
#include "ir/Shape.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Casting.h"

namespace memra::ir {

class Op;
class Function;
class Module;

struct Use {
  Op* user;
  unsigned operand_index;
};

class Value {
 public:
  enum class Kind : uint8_t { kResult, kArgument, kWeight, kState };

  Value(Kind kind, TensorType type, std::string name) : kind_(kind), type_(std::move(type)), name_(std::move(name)) {}
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;
  virtual ~Value() = default;

  Kind kind() const { return kind_; }
  bool is_global() const { return kind_ == Kind::kWeight || kind_ == Kind::kState; }
  const TensorType& type() const { return type_; }
  void set_type(TensorType t) { type_ = std::move(t); }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  int64_t rank() const { return type_.shape.rank(); }

  // Name without the sigil ("h3" for %h3, "blk.0.attn_norm.weight" for @...). Op results and
  // arguments may be unnamed (the printer numbers them).
  const std::string& name() const { return name_; }
  void set_name(absl::string_view n) { name_ = std::string(n); }
  // Sets the name and returns this (builder chaining: `b.Add(x, y)->Named("h")`).
  Value* Named(absl::string_view n) {
    set_name(n);
    return this;
  }

  // The op defining this result (nullptr for other kinds) and the result/argument index.
  Op* def() const { return def_; }
  unsigned index() const { return index_; }
  // The function of an argument.
  Function* arg_owner() const { return arg_owner_; }

  llvm::ArrayRef<Use> uses() const { return uses_; }
  bool has_uses() const { return !uses_.empty(); }
  size_t num_uses() const { return uses_.size(); }
  // Makes every user use `other` instead.
  void ReplaceAllUsesWith(Value* other);

  // Internal (kept consistent by Op): use-list maintenance.
  void AddUse(Op* user, unsigned index) { uses_.push_back({user, index}); }
  void RemoveUse(Op* user, unsigned index);
  void SetDef(Op* op, unsigned index) {
    def_ = op;
    index_ = index;
  }
  void SetArgOwner(Function* f, unsigned index) {
    arg_owner_ = f;
    index_ = index;
  }

 private:
  Kind kind_;
  TensorType type_;
  std::string name_;
  Op* def_ = nullptr;
  Function* arg_owner_ = nullptr;
  unsigned index_ = 0;
  llvm::SmallVector<Use, 2> uses_;
};

// A tensor stored in the GGUF (never its data): name, dtype (the ggml type) and shape
// (ggml ne reversed). `attrs` is free-form (passes record derived weights there).
class Weight : public Value {
 public:
  Weight(std::string name, TensorType type) : Value(Kind::kWeight, std::move(type), std::move(name)) {}
  static bool classof(const Value* v) { return v->kind() == Kind::kWeight; }
  AttrDict& attrs() { return attrs_; }
  const AttrDict& attrs() const { return attrs_; }

 private:
  AttrDict attrs_;
};

// What a state buffer holds.
enum class StateKind : uint8_t {
  kKv,        // one KV cache tensor (K or V) of an attention layer: [C, Hkv, D]
  kConv,      // conv ring of a linear-attention layer: [C, K-1]
  kDelta,     // delta-net recurrent state: [Hv, Dv, Dk]
  kPosition,  // position counter (= tokens seen; the KV length): i32[]
  kBlocks,    // KV block table of a paged cache: i32[S, MB] (slot s's j-th block, -1 = none)
};
absl::string_view StateKindName(StateKind k);  // "kv", "conv", "delta", "position", "blocks"
std::optional<StateKind> ParseStateKind(absl::string_view s);

// Mutable memory that persists across calls (owned by the executor). Written only by ops with
// kWritesState, in program order.
class StateVar : public Value {
 public:
  StateVar(StateKind sk, std::string name, TensorType type)
      : Value(Kind::kState, std::move(type), std::move(name)), state_kind_(sk) {}
  static bool classof(const Value* v) { return v->kind() == Kind::kState; }
  StateKind state_kind() const { return state_kind_; }
  AttrDict& attrs() { return attrs_; }
  const AttrDict& attrs() const { return attrs_; }

 private:
  StateKind state_kind_;
  AttrDict attrs_;
};

}  // namespace memra::ir
