// fuse-qk-norm-rope-append on the CPU executor: a decode step's q/k norm and rope, KV append (v
// normed or not, a ring or a full cache, every cache type) and attention give bit for bit the same
// outputs and caches after the pass as before it, over enough steps that a ring wraps. The tiny
// fixtures' sliding heads (32 wide, 32 rotated) are outside the fused op's domain; their full layers
// (64 wide, rotated by freq factors) are the only ones the end-to-end tests fuse. This test covers
// the other forms.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufWriter.h"
#include "gtest/gtest.h"
#include "ir/Builder.h"
#include "ir/Function.h"
#include "ir/StatusMacros.h"
#include "ir/Verifier.h"
#include "runtime/cpu/CpuExecutor.h"
#include "tests/TestUtil.h"

namespace memra::runtime {
namespace {

using formats::GgmlType;
using ir::Dim;
using ir::DType;
using ir::Shape;
using ir::TensorType;
using ir::Value;

struct Geometry {
  int64_t hq, hkv, d, n_rot;
  DType cache;
  bool v_norm;
  int64_t ring;     // 0: a full cache of kRows rows
  bool ff = false;  // rope's freq_factors (Gemma 4's full layers: some pairs unrotated)
};
constexpr int64_t kRows = 64;

struct Program {
  std::unique_ptr<ir::Module> m = std::make_unique<ir::Module>();
  std::unique_ptr<gguf::GgufFile> file;
};

// @step(q [1, Hq, D], k, v [1, Hkv, D]) -> attention over the caches after the append.
absl::StatusOr<Program> Build(const Geometry& g) {
  Program p;
  gguf::GgufWriter writer;
  std::vector<Value*> w;
  for (const char* name : {"qw", "kw", "ff"}) {
    std::vector<float> values = memra::testing::RandomNormal(g.d, name[0], 0.3f);
    if (name[0] == 'f') {
      if (!g.ff) break;
      for (int64_t i = 0; i < g.d; ++i) values[i] = i >= g.n_rot / 4 ? 1e30f : 1.0f + float(i) / float(g.d);
    }
    std::vector<uint8_t> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    MEMRA_RETURN_IF_ERROR(writer.AddTensorBytes(name, GgmlType::kF32, {g.d}, bytes));
    w.push_back(p.m->AddWeightNe(name, DType::kF32, {g.d}));
  }
  const int64_t rows = g.ring > 0 ? g.ring : kRows;
  Value* ctr = p.m->AddState(ir::StateKind::kPosition, "pos", TensorType(DType::kI32, Shape({})));
  Value* kc = p.m->AddState(ir::StateKind::kKv, "k_cache", TensorType(g.cache, Shape({rows, g.hkv, g.d})));
  Value* vc = p.m->AddState(ir::StateKind::kKv, "v_cache", TensorType(g.cache, Shape({rows, g.hkv, g.d})));
  ir::Function* fn = p.m->AddFunction("step");
  ir::OpBuilder b(fn);
  Value* q = fn->AddArgument("q", TensorType(DType::kF32, Shape({Dim(1), Dim(g.hq), Dim(g.d)})));
  Value* k = fn->AddArgument("k", TensorType(DType::kF32, Shape({Dim(1), Dim(g.hkv), Dim(g.d)})));
  Value* v = fn->AddArgument("v", TensorType(DType::kF32, Shape({Dim(1), Dim(g.hkv), Dim(g.d)})));
  Value* pos = b.Positions(ctr, k);
  std::vector<Value*> operands = {q, k, w[0], w[1], pos};
  if (g.ff) operands.push_back(w[2]);
  auto qk = b.Build(ir::OpKind::kQkNormRope, operands, {{"eps", 1e-6}, {"n_rot", g.n_rot}, {"base", 10000.0}});
  if (!b.ok()) return b.status();
  ir::Op* append = b.KvAppend(qk[1], v, kc, vc, pos, g.ring);
  if (append != nullptr && g.v_norm) append->attrs().Set("v_norm_eps", 1e-6);
  Value* o = b.Attention(qk[0], kc, vc, pos, 0.125, g.ring, g.ring);
  b.AdvancePositions(ctr, k);
  if (!b.ok()) return b.status();
  b.Return({o});
  fn->set_result_types({o->type()});
  MEMRA_RETURN_IF_ERROR(ir::VerifyModule(*p.m));
  MEMRA_ASSIGN_OR_RETURN(auto bytes, writer.WriteToBytes());
  MEMRA_ASSIGN_OR_RETURN(p.file, gguf::GgufFile::FromBytes(bytes, "qk-norm-rope-append.gguf"));
  return p;
}

class QkNormRopeAppendExecution : public ::testing::TestWithParam<Geometry> {};

TEST_P(QkNormRopeAppendExecution, FusedStepIsBitIdenticalToTheTwoOps) {
  const Geometry& g = GetParam();
  auto plain = Build(g);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto fused = Build(g);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(memra::testing::CompileModule(*fused->m, "fuse-qk-norm-rope-append").ok());
  ASSERT_EQ(memra::testing::CountOpsOfKind(*fused->m, ir::OpKind::kQkNormRopeAppend), 1);
  ASSERT_EQ(memra::testing::CountOpsOfKind(*fused->m, ir::OpKind::kKvAppend), 0);
  auto a = CpuExecutor::Create(*plain->m, *plain->file);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = CpuExecutor::Create(*fused->m, *fused->file);
  ASSERT_TRUE(b.ok()) << b.status();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  auto arg = [&](int64_t h) {
    std::vector<float> x(h * g.d);
    for (float& e : x) e = u(rng);
    return HostTensor::FromF32(x, {1, h, g.d});
  };
  const int steps = g.ring > 0 ? 2 * static_cast<int>(g.ring) + 5 : 40;  // a ring wraps twice
  for (int s = 0; s < steps; ++s) {
    std::vector<HostTensor> args = {arg(g.hq), arg(g.hkv), arg(g.hkv)};
    auto ya = (*a)->Run("step", args);
    auto yb = (*b)->Run("step", args);
    ASSERT_TRUE(ya.ok() && yb.ok()) << ya.status() << yb.status();
    ASSERT_TRUE(memra::testing::SameBytes((*ya)[0], (*yb)[0])) << "step " << s;
  }
  for (const char* cache : {"k_cache", "v_cache"}) {
    ASSERT_NE((*a)->state(cache), nullptr);
    EXPECT_TRUE(memra::testing::SameBytes(*(*a)->state(cache), *(*b)->state(cache))) << cache;
  }
}

INSTANTIATE_TEST_SUITE_P(Geometries, QkNormRopeAppendExecution,
                         ::testing::Values(Geometry{8, 4, 256, 256, DType::kF32, true, 0},
                                           Geometry{8, 2, 128, 64, DType::kF16, false, 0},
                                           Geometry{4, 2, 64, 64, DType::kQ8_0, true, 0},
                                           Geometry{4, 1, 512, 512, DType::kBF16, true, 16},
                                           Geometry{8, 1, 512, 512, DType::kF32, true, 0, /*ff=*/true}),
                         [](const ::testing::TestParamInfo<Geometry>& i) {
                           const Geometry& g = i.param;
                           return absl::StrCat(g.hq, "q", g.hkv, "kv", g.d, "rot", g.n_rot, "_", ir::DTypeName(g.cache),
                                               g.v_norm ? "_vnorm" : "", g.ring > 0 ? "_ring" : "", g.ff ? "_ff" : "");
                         });

}  // namespace
}  // namespace memra::runtime
