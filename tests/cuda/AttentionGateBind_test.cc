// The split-KV decode attention's output gate on the CPU (kernels/cuda/Attention.cc): attention_gated
// at one token selects two launches, the combine carrying the gate (per element: stride D; per
// head, Step 3.5's [1, Hq, 1]: ATT_GATE_HEAD, stride 1), and Bind hands the combine the gate's
// address; a record of the earlier three-launch form (the gate's own launch last) still binds that
// way; a record that disagrees with the op is refused. The arithmetic is checked on the host
// emulation (ctest emulation/AttentionSplitEmu_*gate*) and against the CPU in the GPU op table.
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

// Operand i at 0x1000 * (i + 1), result i at 0x100000 * (i + 1), the scratch at 0x9000000.
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

// Selects (or takes `selection`) and binds the attention op of `m`.
Bound Bind(ir::Module& m, std::optional<OpSelection> selection = std::nullopt) {
  Bound b;
  const ir::Op* op = m.function("decode")->Ops()[1];
  auto shapes = ShapesAt(*op, 1, WeightMode::kBlocks);
  EXPECT_TRUE(shapes.ok()) << shapes.status();
  if (selection) {
    b.selection = *selection;
  } else {
    auto s = SelectGpuOp(*op, *shapes, *TargetPreset("sm_90"));
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

TEST(AttentionGateBind, TheCombineAppliesAnElementGate) {
  auto m = Decode(64);
  ASSERT_NE(m, nullptr);
  const Bound b = Bind(*m);
  ASSERT_TRUE(b.status.ok()) << b.status;
  ASSERT_EQ(b.selection.impl, "attention_split");
  ASSERT_EQ(b.selection.launches.size(), 2u);
  EXPECT_EQ(b.selection.launches[1].kernel.entry, "attention_combine");
  EXPECT_EQ(b.selection.launches[1].kernel.module.Key().find("ATT_GATE_HEAD"), std::string::npos);
  ASSERT_EQ(b.calls.size(), 2u);
  const auto comb = ParamsOf<AttentionCombineParams>(b.calls[1]);
  EXPECT_EQ(comb.gate.addr, 0x1000u * 5);  // operand 4
  EXPECT_EQ(comb.gate_stride, 64);
  EXPECT_EQ(comb.o.addr, 0x100000u);
}

TEST(AttentionGateBind, AHeadGateTakesOneValueAHead) {
  auto m = Decode(1);
  ASSERT_NE(m, nullptr);
  const Bound b = Bind(*m);
  ASSERT_TRUE(b.status.ok()) << b.status;
  ASSERT_EQ(b.selection.launches.size(), 2u);
  EXPECT_NE(b.selection.launches[1].kernel.module.Key().find("ATT_GATE_HEAD=1"), std::string::npos);
  ASSERT_EQ(b.calls.size(), 2u);
  const auto comb = ParamsOf<AttentionCombineParams>(b.calls[1]);
  EXPECT_EQ(comb.gate.addr, 0x1000u * 5);
  EXPECT_EQ(comb.gate_stride, 1);
}

TEST(AttentionGateBind, ARecordOfTheThreeLaunchFormStillBinds) {
  for (int64_t cols : {64, 1}) {
    auto m = Decode(cols);
    ASSERT_NE(m, nullptr);
    Bound now = Bind(*m);
    ASSERT_TRUE(now.status.ok()) << now.status;
    // The earlier record: the combine without the gate, then the gate's own launch.
    OpSelection old = now.selection;
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
    // A record of one launch is not either form.
    OpSelection bad = now.selection;
    bad.launches.resize(1);
    EXPECT_FALSE(Bind(*m, bad).status.ok());
  }
}

}  // namespace
}  // namespace memra::kernels::cuda
