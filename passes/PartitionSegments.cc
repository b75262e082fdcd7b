// partition-segments (piecewise capture): every maximal run of capturable ops of a function
// becomes a `segment {capturable = 1}` (replayed as one CUDA graph); every run of
// non-capturable ops becomes a `segment {capturable = 0}` (run eagerly) whose `reason` says why.
// Capturability per op: passes/Capture.h. Each segment records why it ends (`ends`): the reason
// of the op after it, or the function's return (results copied to the host). Attributes:
//
//   segment {bucket = 64, capturable = 1, ends = "host sync: the results are copied to the host",
//            kv_rung = 1, ops = 187} { ... }
//
// bucket: the function's bucket; kv_rung = 1: the segment holds attention, so its graph is
// captured per KV-length rung; ops: ops in the body. Existing segments are dissolved first (the
// pass is idempotent). Options: eager-ops (op mnemonics kept out of graphs, ':'-separated, e.g.
// "matmul:matmul_group"; reason "eager by option"), require-arena (ops without arena offsets are
// allocations; default true), min-ops (capturable runs shorter than this run eagerly, reason
// "short run"; default 1).
#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/Module.h"
#include "ir/Printer.h"
#include "passes/Capture.h"
#include "passes/FunctionPass.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

class PartitionSegmentsPass : public FunctionPass {
 public:
  absl::string_view name() const override { return "partition-segments"; }
  absl::string_view description() const override {
    return "Groups maximal runs of capturable ops into segments (piecewise CUDA-graph capture)";
  }

  absl::StatusOr<bool> RunOnFunction(ir::Function& f, ir::Module&) override {
    absl::flat_hash_set<std::string> eager;
    for (const std::string& s : SplitListOption(*eager_ops_)) eager.insert(s);
    const std::string before = ir::ToText(f);
    Dissolve(f);
    struct Item {
      Op* op;
      CaptureVerdict v;
    };
    std::vector<Item> items;
    for (Op& op : *f.body()) {
      if (op.is(OpKind::kReturn)) continue;
      CaptureVerdict v = ClassifyForCapture(op, *require_arena_);
      if (v.capturable && eager.contains(op.mnemonic()))
        v = {false, absl::StrCat("eager by option: ", op.mnemonic(), " (partition-segments eager-ops)")};
      items.push_back({&op, v});
    }
    // Runs of equal capturability.
    std::vector<std::pair<size_t, size_t>> runs;
    for (size_t i = 0; i < items.size();) {
      size_t j = i + 1;
      while (j < items.size() && items[j].v.capturable == items[i].v.capturable) ++j;
      runs.emplace_back(i, j);
      i = j;
    }
    // Short capturable runs run eagerly.
    for (auto& [i, j] : runs)
      if (items[i].v.capturable && static_cast<int64_t>(j - i) < *min_ops_)
        for (size_t k = i; k < j; ++k)
          items[k].v = {false, absl::StrCat("short run: fewer than ", *min_ops_, " capturable ops (min-ops)")};
    runs.clear();
    for (size_t i = 0; i < items.size();) {
      size_t j = i + 1;
      while (j < items.size() && items[j].v.capturable == items[i].v.capturable) ++j;
      runs.emplace_back(i, j);
      i = j;
    }
    std::optional<int64_t> bucket = f.attrs().GetI64("bucket");
    for (size_t r = 0; r < runs.size(); ++r) {
      auto [i, j] = runs[r];
      const bool cap = items[i].v.capturable;
      ir::AttrDict attrs{{"capturable", int64_t{cap ? 1 : 0}}, {"ops", static_cast<int64_t>(j - i)}};
      if (bucket) attrs.Set("bucket", *bucket);
      if (cap) {
        bool rung = false;
        for (size_t k = i; k < j; ++k) rung |= items[k].v.kv_rung;
        if (rung) attrs.Set("kv_rung", int64_t{1});
        attrs.Set("ends", j < items.size() ? items[j].v.reason : "host sync: the results are copied to the host");
        ++capturable_;
        captured_ops_ += static_cast<int64_t>(j - i);
      } else {
        std::vector<std::string> reasons;
        for (size_t k = i; k < j; ++k)
          if (std::find(reasons.begin(), reasons.end(), items[k].v.reason) == reasons.end())
            reasons.push_back(items[k].v.reason);
        attrs.Set("reason", absl::StrJoin(reasons, "; "));
        ++eager_;
        eager_ops_count_ += static_cast<int64_t>(j - i);
      }
      std::unique_ptr<Op> seg = Op::Create(OpKind::kSegment, {}, {}, std::move(attrs));
      Op* placed = f.body()->Insert(ir::Block::iterator(*items[i].op), std::move(seg));
      for (size_t k = i; k < j; ++k) placed->body()->PushBack(items[k].op->Remove());
    }
    return ir::ToText(f) != before;
  }

 private:
  // Moves the bodies of existing segments out, in place, and erases the segments.
  static void Dissolve(ir::Function& f) {
    std::vector<Op*> segs;
    for (Op& op : *f.body())
      if (op.is(OpKind::kSegment)) segs.push_back(&op);
    for (Op* seg : segs) {
      while (!seg->body()->empty()) {
        Op& inner = seg->body()->front();
        std::unique_ptr<Op> moved = inner.Remove();
        f.body()->Insert(ir::Block::iterator(*seg), std::move(moved));
      }
      seg->Erase();
    }
  }

  Option<std::string> eager_ops_{this, "eager-ops", "op mnemonics kept out of graphs (a:b:c)", ""};
  Option<bool> require_arena_{this, "require-arena", "ops without arena offsets are allocations", true};
  Option<int64_t> min_ops_{this, "min-ops", "shortest capturable run worth a graph", 1, 1, 1 << 20};
  Statistic capturable_{this, "capturable-segments", "segments replayed as graphs"};
  Statistic eager_{this, "eager-segments", "segments run eagerly"};
  Statistic captured_ops_{this, "captured-ops", "ops inside capturable segments"};
  Statistic eager_ops_count_{this, "eager-op-count", "ops inside eager segments"};
};

}  // namespace

std::unique_ptr<Pass> CreatePartitionSegmentsPass() { return std::make_unique<PartitionSegmentsPass>(); }

}  // namespace memra::passes
