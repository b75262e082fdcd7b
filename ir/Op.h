// Ops and the blocks that hold them. An Op has a kind (ir/Ops.def), operands (values it uses),
// results (values it owns), attributes, a source location when parsed, and, for `segment`, a
// body block. A Block is an ordered list of ops (a function body or a segment body).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ir/Attribute.h"
#include "ir/OpKind.h"
#include "ir/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/ilist_node.h"
#include "llvm/ADT/simple_ilist.h"

namespace memra::ir {

class Block;
class Function;

// Where an op came from in a .mir file (line and column start at 1; 0 = built in memory).
struct Loc {
  int line = 0;
  int col = 0;
  bool known() const { return line > 0; }
  std::string ToString() const;  // "12:3" or "" when unknown
};

class Op : public llvm::ilist_node<Op> {
 public:
  // A detached op; result values are created with `result_types`.
  static std::unique_ptr<Op> Create(OpKind kind, llvm::ArrayRef<Value*> operands,
                                    llvm::ArrayRef<TensorType> result_types, AttrDict attrs = {});
  ~Op();
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  OpKind kind() const { return kind_; }
  const OpInfo& info() const { return InfoOf(kind_); }
  absl::string_view mnemonic() const { return Mnemonic(kind_); }
  bool is(OpKind k) const { return kind_ == k; }

  // Operands.
  unsigned num_operands() const { return operands_.size(); }
  Value* operand(unsigned i) const { return operands_[i]; }
  llvm::ArrayRef<Value*> operands() const { return operands_; }
  void SetOperand(unsigned i, Value* v);
  void SetOperands(llvm::ArrayRef<Value*> values);
  void AppendOperand(Value* v);
  void DropAllOperands();

  // Results (owned by the op).
  unsigned num_results() const { return results_.size(); }
  Value* result(unsigned i = 0) const { return results_[i].get(); }
  llvm::SmallVector<Value*, 2> results() const;
  bool HasUsedResults() const;

  AttrDict& attrs() { return attrs_; }
  const AttrDict& attrs() const { return attrs_; }

  Loc loc() const { return loc_; }
  void set_loc(Loc l) { loc_ = l; }

  // The body of a region op (segment), created on demand by body().
  bool has_body() const { return body_ != nullptr; }
  Block* body();
  const Block* body() const { return body_.get(); }

  // Where the op lives.
  Block* parent_block() const { return parent_; }
  Op* parent_op() const;       // the enclosing segment, or nullptr
  Function* function() const;  // the function whose body (transitively) holds the op

  bool reads_state() const { return info().HasFlag(op_flags::kReadsState); }
  bool writes_state() const { return info().HasFlag(op_flags::kWritesState); }
  // Free of side effects: may be removed when unused, merged with an equal op, moved.
  bool is_pure() const { return info().IsPure(); }
  // No result is used and removing the op changes nothing else (it writes no state, is not a
  // terminator or region). Ops that only read state qualify.
  bool is_trivially_dead() const {
    return !HasUsedResults() && !writes_state() && !info().HasFlag(op_flags::kTerminator | op_flags::kRegion);
  }

  // Unlinks from the parent block and destroys the op (results must be unused).
  void Erase();
  // Unlinks from the parent block without destroying; the caller takes ownership.
  std::unique_ptr<Op> Remove();
  // Moves this op right before `other` (possibly into another block).
  void MoveBefore(Op* other);

  // A one-line rendering for messages: `%y = rms_norm(%x, @w) {eps = 1e-06}` (names as stored).
  std::string Summary() const;

 private:
  friend class Block;
  Op(OpKind kind) : kind_(kind) {}

  OpKind kind_;
  llvm::SmallVector<Value*, 4> operands_;
  llvm::SmallVector<std::unique_ptr<Value>, 1> results_;
  AttrDict attrs_;
  Loc loc_;
  std::unique_ptr<Block> body_;
  Block* parent_ = nullptr;
};

// Whether operand `operand_index` of `op` is read as a weight matrix (a GEMM weight or an
// embedding table: role `matrix` in ir/Ops.def) rather than as values (norm weights, biases,
// conv kernels: role `weight`) or an activation.
inline bool IsMatrixOperand(const Op& op, unsigned operand_index) { return IsMatrixOperand(op.kind(), operand_index); }

class Block {
 public:
  using OpList = llvm::simple_ilist<Op>;
  using iterator = OpList::iterator;
  using const_iterator = OpList::const_iterator;

  Block(Function* function, Op* parent_op) : function_(function), parent_op_(parent_op) {}
  ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  iterator begin() { return ops_.begin(); }
  iterator end() { return ops_.end(); }
  const_iterator begin() const { return ops_.begin(); }
  const_iterator end() const { return ops_.end(); }
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  Op& front() { return ops_.front(); }
  Op& back() { return ops_.back(); }
  const Op& back() const { return ops_.back(); }

  // Takes ownership; inserts before `pos`.
  Op* Insert(iterator pos, std::unique_ptr<Op> op);
  Op* PushBack(std::unique_ptr<Op> op) { return Insert(end(), std::move(op)); }

  Function* function() const;
  Op* parent_op() const { return parent_op_; }

  // Ops in program order, descending into segment bodies (a segment comes before its body).
  // The snapshot stays valid while ops are erased (erase only ops not yet visited, or the
  // current one).
  void CollectOps(std::vector<Op*>& out) const;

 private:
  friend class Op;
  friend class Function;
  OpList ops_;
  Function* function_;
  Op* parent_op_;
};

}  // namespace memra::ir
