// fuse-matmul-group: matmuls of one input become one matmul_group,
//
//   %q = matmul(%h, @wq)
//   %k = matmul(%h, @wk)            ->    %q, %k, %v = matmul_group(%h, @wq, @wk, @wv)
//   %v = matmul(%h, @wv)
//
// (attention q/k/v, the delta-net qkv/gate/beta/alpha in-projections, FFN gate/up when
// fuse-swiglu did not take them). A backend runs the group as one GEMM over weights concatenated
// once at load, or as one grouped launch; the CPU executor runs the products one by one, exactly
// as the separate matmuls (bit-identical). The group sits where the first matmul was (the input
// dominates it; each product's users follow their matmul). Results keep their names and order.
// Options: max-group (largest group, 0 = no limit); same-dtype (only weights of one dtype per
// group, which a concatenated-weight GEMM needs).
#include <algorithm>

#include "ir/Builder.h"
#include "ir/Module.h"
#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

class FuseMatmulGroupPass : public Pass {
 public:
  absl::string_view name() const override { return "fuse-matmul-group"; }
  absl::string_view description() const override {
    return "Groups matmuls sharing one input into matmul_group";
  }

  absl::StatusOr<bool> Run(ir::Module& m) override {
    bool changed = false;
    for (const auto& f : m.functions()) {
      auto order = ProgramOrder(*f);
      // Inputs in program order of their first matmul user.
      std::vector<ir::Value*> inputs;
      absl::flat_hash_map<ir::Value*, std::vector<Op*>> users;
      for (Op* op : f->Ops()) {
        if (!op->is(OpKind::kMatMul)) continue;
        auto [it, inserted] = users.try_emplace(op->operand(0));
        if (inserted) inputs.push_back(op->operand(0));
        it->second.push_back(op);
      }
      for (ir::Value* x : inputs) {
        std::vector<Op*>& mms = users[x];
        // One group per (block[, dtype]) among the users, in program order.
        while (mms.size() >= 2) {
          std::vector<Op*> group{mms.front()};
          std::vector<Op*> rest;
          for (size_t i = 1; i < mms.size(); ++i) {
            Op* mm = mms[i];
            bool fits = mm->parent_block() == group.front()->parent_block() &&
                        (*max_group_ <= 0 || static_cast<int64_t>(group.size()) < *max_group_) &&
                        (!*same_dtype_ || mm->operand(1)->dtype() == group.front()->operand(1)->dtype());
            (fits ? group : rest).push_back(mm);
          }
          if (group.size() >= 2) {
            MEMRA_RETURN_IF_ERROR(Group(group, order));
            changed = true;
          }
          mms = std::move(rest);
        }
      }
    }
    return changed;
  }

 private:
  absl::Status Group(std::vector<Op*>& group, const absl::flat_hash_map<const Op*, int64_t>& order) {
    std::sort(group.begin(), group.end(), [&](Op* a, Op* b) { return order.at(a) < order.at(b); });
    llvm::SmallVector<ir::Value*, 8> operands{group.front()->operand(0)};
    for (Op* mm : group) operands.push_back(mm->operand(1));
    ir::OpBuilder b(group.front()->parent_block(), ir::Block::iterator(*group.front()));
    auto fused = b.Create(OpKind::kMatMulGroup, operands);
    if (!fused.ok()) return fused.status();
    for (size_t i = 0; i < group.size(); ++i) {
      ReplaceValue(group[i]->result(0), (*fused)->result(i));
      group[i]->Erase();
    }
    ++groups_;
    grouped_ += static_cast<int64_t>(group.size());
    return absl::OkStatus();
  }

  Option<int64_t> max_group_{this, "max-group", "largest group (0 = no limit)", 0};
  Option<bool> same_dtype_{this, "same-dtype", "group only weights of one dtype", false};
  Statistic groups_{this, "groups", "matmul_group ops formed"};
  Statistic grouped_{this, "grouped-matmuls", "matmuls folded into groups"};
};

}  // namespace

std::unique_ptr<Pass> CreateFuseMatmulGroupPass() { return std::make_unique<FuseMatmulGroupPass>(); }

}  // namespace memra::passes
