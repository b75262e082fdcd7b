// The split-KV decode attention's output gate on the CPU (kernels/cuda/Attention.cc): attention_gated
// at one token selects one launch, the split merging its ranges in each head chunk's last block
// (ATT_MERGE, one ticket word a head chunk) and applying the gate (per element: stride D; per
// head, Step 3.5's [1, Hq, 1]: ATT_GATE_HEAD, stride 1); Bind hands the split the gate's, the
// output's, the scratch's and the tickets' addresses. Records of the earlier forms (split +
// combine carrying the gate; split + combine + the gate's own launch) still bind that way; a
// record that disagrees with the op is refused. The arithmetic is checked on the host emulation
// (ctest emulation/AttentionSplitEmu_*) and against the CPU in the GPU op table.
#include <cstring>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/Function.h"
#include "ir/Module.h"
#include "ir/Parser.h"
#include "kernels/cuda/AttentionParams.h"
#include "kernels/cuda/ElementwiseParams.h"
#include "kernels/cuda/GpuOpRegistry.h"

namespace memra::kernels::cuda {
namespace {

// Operand i at 0x1000 * (i + 1), result i at 0x100000 * (i + 1), the scratch at 0x9000000, the
// tickets (when the selection asks for some) at 0xA000000.
class AddressContext : public BindContext {
 public:
  using BindContext::BindContext;
  absl::StatusOr<llvm::SmallVector<int64_t, 4>> Shape(const ir::Value* v) const override {
    llvm::SmallVector<int64_t, 4> s;
    for (const ir::Dim& d : v->shape().dims()) s.push_back(d.value());
    return s;
  }
  uint64_t In(unsigned i) const override { return 0x1000u * (i + 1); }
  absl::StatusOr<DeviceMatrix> Matrix(unsigned) const override { return absl::InvalidArgumentError("no matrices"); }
  uint64_t Out(unsigned i) const override { return 0x100000u * (i + 1); }
  uint64_t Scratch() const override { return 0x9000000u; }
  uint64_t Workspace() const override { return 0; }
  uint64_t Tickets() const override { return selection().ticket_words > 0 ? 0xA000000u : 0; }
};

struct Bound {
  OpSelection selection;
  std::vector<KernelCall> calls;
  absl::Status status;
};

std::unique_ptr<ir::Module> Decode(int64_t gate_cols) {
  auto m = ir::ParseModule(absl::StrCat(R"(state kv @kc : f32[128, 2, 64]
state kv @vc : f32[128, 2, 64]
func @decode(%q: f32[1, 8, 64], %k: f32[1, 2, 64], %v: f32[1, 2, 64], %p: i32[1], %g: f32[1, 8, )",
                                        gate_cols, R"(]) -> (f32[1, 8, 64]) attributes {bucket = 1} {
  kv_append(%k, %v, @kc, @vc, %p)
  %o = attention_gated(%q, @kc, @vc, %p, %g) {scale = 0.125} : f32[1, 8, 64]
  return %o
}
)"));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

// Selects (select-kernels{last-block-merge=true}'s form unless `merge` is false; or takes
// `selection`) and binds the attention op of `m`.
Bound Bind(ir::Module& m, std::optional<OpSelection> selection = std::nullopt, bool merge = true) {
  Bound b;
  const ir::Op* op = m.function("decode")->Ops()[1];
  auto shapes = ShapesAt(*op, 1, WeightMode::kBlocks);
  EXPECT_TRUE(shapes.ok()) << shapes.status();
  if (selection) {
    b.selection = *selection;
  } else {
    auto s = SelectGpuOp(*op, *shapes, *TargetPreset("sm_90"), {DecodeClass::kBucket, merge});
    EXPECT_TRUE(s.ok()) << s.status();
    b.selection = *s;
  }
  AddressContext c(*op, b.selection, *shapes);
  DeviceWork w;
  b.status = FindGpuOpImpl(b.selection.impl)->Bind(c, w);
  for (const DeviceAction& a : w.actions())
    if (const KernelCall* k = std::get_if<KernelCall>(&a)) b.calls.push_back(*k);
  return b;
}

template <typename P>
P ParamsOf(const KernelCall& k) {
  P p;
  std::memcpy(&p, k.params.bytes.data(), sizeof(P));
  return p;
}

// The selection's earlier two-launch form: the split without ATT_MERGE, then attention_combine.
OpSelection TwoLaunchForm(const OpSelection& now) {
  OpSelection old = now;
  Defines d;
  for (const auto& kv : old.launches[0].kernel.module.defines)
    if (kv.first != "ATT_MERGE") d.push_back(kv);
  old.launches[0].kernel.module.defines = d;
  Launch combine = old.launches[0];
  combine.kernel.entry = "attention_combine";
  old.launches.push_back(combine);
  old.ticket_words = 0;
  return old;
}

TEST(AttentionGateBind, TheSplitMergesAndAppliesAnElementGate) {
  auto m = Decode(64);
  ASSERT_NE(m, nullptr);
  const Bound b = Bind(*m);
  ASSERT_TRUE(b.status.ok()) << b.status;
  ASSERT_EQ(b.selection.impl, "attention_split");
  ASSERT_EQ(b.selection.launches.size(), 1u);
  EXPECT_EQ(b.selection.launches[0].kernel.entry, "attention_split");
  const std::string key = b.selection.launches[0].kernel.module.Key();
  EXPECT_NE(key.find("ATT_MERGE=1"), std::string::npos) << key;
  EXPECT_EQ(key.find("ATT_GATE_HEAD"), std::string::npos) << key;
  // 8 query heads over 2 KV heads, D = 64: all 4 of a group in one block, so 2 head chunks.
  EXPECT_EQ(b.selection.ticket_words, 2);
  ASSERT_EQ(b.calls.size(), 1u);
  const auto p = ParamsOf<AttentionParams>(b.calls[0]);
  EXPECT_EQ(p.gate.addr, 0x1000u * 5);  // operand 4
  EXPECT_EQ(p.gate_stride, 64);
  EXPECT_EQ(p.o.addr, 0x100000u);
  EXPECT_EQ(p.part.addr, 0x9000000u);
  EXPECT_EQ(p.tickets.addr, 0xA000000u);
  EXPECT_EQ(p.q.addr, 0x1000u);
}

// The default selection (select-kernels{last-block-merge=false}): the split, then the combine,
// which applies the gate and reads the ranges the split's positions and window give keys.
TEST(AttentionGateBind, TheDefaultIsTheSplitThenTheCombine) {
  for (int64_t cols : {64, 1}) {
    auto m = Decode(cols);
    ASSERT_NE(m, nullptr);
    const Bound b = Bind(*m, std::nullopt, /*merge=*/false);
    ASSERT_TRUE(b.status.ok()) << b.status;
    ASSERT_EQ(b.selection.launches.size(), 2u);
    EXPECT_EQ(b.selection.launches[1].kernel.entry, "attention_combine");
    EXPECT_EQ(b.selection.launches[0].kernel.module.Key().find("ATT_MERGE="), std::string::npos);
    EXPECT_EQ(b.selection.ticket_words, 0);
    ASSERT_EQ(b.calls.size(), 2u);
    const auto split = ParamsOf<AttentionParams>(b.calls[0]);
    const auto comb = ParamsOf<AttentionCombineParams>(b.calls[1]);
    EXPECT_EQ(comb.gate.addr, 0x1000u * 5);
    EXPECT_EQ(comb.gate_stride, cols);
    EXPECT_EQ(comb.pos.addr, split.pos.addr);
    EXPECT_NE(comb.pos.addr, 0u);
    EXPECT_EQ(comb.window, split.window);
  }
}

TEST(AttentionGateBind, AHeadGateTakesOneValueAHead) {
  auto m = Decode(1);
  ASSERT_NE(m, nullptr);
  const Bound b = Bind(*m);
  ASSERT_TRUE(b.status.ok()) << b.status;
  ASSERT_EQ(b.selection.launches.size(), 1u);
  EXPECT_NE(b.selection.launches[0].kernel.module.Key().find("ATT_GATE_HEAD=1"), std::string::npos);
  ASSERT_EQ(b.calls.size(), 1u);
  const auto p = ParamsOf<AttentionParams>(b.calls[0]);
  EXPECT_EQ(p.gate.addr, 0x1000u * 5);
  EXPECT_EQ(p.gate_stride, 1);
}

TEST(AttentionGateBind, ARecordOfTheTwoLaunchFormStillBinds) {
  for (int64_t cols : {64, 1}) {
    auto m = Decode(cols);
    ASSERT_NE(m, nullptr);
    Bound now = Bind(*m);
    ASSERT_TRUE(now.status.ok()) << now.status;
    const Bound b = Bind(*m, TwoLaunchForm(now.selection));
    ASSERT_TRUE(b.status.ok()) << b.status;
    ASSERT_EQ(b.calls.size(), 2u) << cols;
    const auto split = ParamsOf<AttentionParams>(b.calls[0]);
    EXPECT_EQ(split.part.addr, 0x9000000u);
    EXPECT_EQ(split.tickets.addr, 0u);
    const auto comb = ParamsOf<AttentionCombineParams>(b.calls[1]);
    EXPECT_EQ(b.calls[1].launch, 1u);
    EXPECT_EQ(comb.part.addr, 0x9000000u);
    EXPECT_EQ(comb.gate.addr, 0x1000u * 5);
    EXPECT_EQ(comb.gate_stride, cols);
    EXPECT_EQ(comb.o.addr, 0x100000u);
    // The combine reads only the ranges with keys: the split's positions and window.
    EXPECT_EQ(comb.pos.addr, split.pos.addr);
    EXPECT_EQ(comb.window, split.window);
  }
}

TEST(AttentionGateBind, ARecordOfTheThreeLaunchFormStillBinds) {
  for (int64_t cols : {64, 1}) {
    auto m = Decode(cols);
    ASSERT_NE(m, nullptr);
    Bound now = Bind(*m);
    ASSERT_TRUE(now.status.ok()) << now.status;
    // The earliest record: the combine without the gate, then the gate's own launch.
    OpSelection old = TwoLaunchForm(now.selection);
    for (Launch& l : old.launches) {
      Defines d;
      for (const auto& kv : l.kernel.module.defines)
        if (kv.first != "ATT_GATE_HEAD") d.push_back(kv);
      l.kernel.module.defines = d;
    }
    Launch gate;
    gate.kernel.module.file = "Elementwise.cu";
    gate.kernel.entry = cols == 1 ? "mul_sigmoid_rows_f32" : "mul_sigmoid_f32";
    old.launches.push_back(gate);
    const Bound b = Bind(*m, old);
    ASSERT_TRUE(b.status.ok()) << b.status;
    ASSERT_EQ(b.calls.size(), 3u) << cols;
    EXPECT_EQ(ParamsOf<AttentionCombineParams>(b.calls[1]).gate.addr, 0u);
    EXPECT_EQ(b.calls[2].launch, 2u);
    if (cols == 1) {
      const auto g = ParamsOf<BroadcastParams>(b.calls[2]);
      EXPECT_EQ(g.b.addr, 0x1000u * 5);
      EXPECT_EQ(g.nb, 64);
    } else {
      const auto g = ParamsOf<PairParams>(b.calls[2]);
      EXPECT_EQ(g.b.addr, 0x1000u * 5);
      EXPECT_EQ(g.y.addr, 0x100000u);
    }
  }
}

TEST(AttentionGateBind, RecordsOfNoFormAreRefused) {
  auto m = Decode(64);
  ASSERT_NE(m, nullptr);
  Bound now = Bind(*m);
  ASSERT_TRUE(now.status.ok()) << now.status;
  // One launch without tickets: its blocks could not tell which is last.
  OpSelection no_tickets = now.selection;
  no_tickets.ticket_words = 0;
  EXPECT_FALSE(Bind(*m, no_tickets).status.ok());
  // One launch that does not merge: nothing would write the output.
  OpSelection no_merge = TwoLaunchForm(now.selection);
  no_merge.launches.resize(1);
  no_merge.ticket_words = 2;
  const Bound b = Bind(*m, no_merge);
  EXPECT_FALSE(b.status.ok());
  EXPECT_NE(b.status.message().find("stale selection"), std::string::npos) << b.status;
  // Four launches.
  OpSelection four = TwoLaunchForm(now.selection);
  four.launches.push_back(four.launches[1]);
  four.launches.push_back(four.launches[1]);
  EXPECT_FALSE(Bind(*m, four).status.ok());
}

}  // namespace
}  // namespace memra::kernels::cuda
