// The CPU executor's products and embedding lookup on block-format weights (iq4_nl, iq4_xs and,
// as controls, q4_0 and q4_K): matmul, matmul_group, matmul_swiglu and embed on a module whose
// weights are blocks give bit for bit what the same module computes from f32 weights holding the
// dequantized values (each row is decoded, then the f32 kernel runs), and the products are within
// rounding of a float64 product of the dequantized weights.
#include <cmath>
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
#include "kernels/formats/Quant.h"
#include "runtime/cpu/CpuExecutor.h"

namespace memra::runtime {
namespace {

using formats::GgmlType;
using ir::Dim;
using ir::DType;
using ir::Shape;
using ir::TensorType;
using ir::Value;

constexpr int64_t K = 512;  // row length (two iq4_xs super-blocks)

// A weight's values: quantized once (bytes) and those bytes dequantized (values).
struct BlockWeight {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

BlockWeight MakeWeight(GgmlType type, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> x(rows * K);
  for (float& v : x) v = normal(rng);
  BlockWeight w;
  w.bytes.resize(static_cast<size_t>(rows * *formats::RowBytes(type, K)));
  EXPECT_TRUE(formats::Quantize(type, x, absl::MakeSpan(w.bytes)).ok());
  w.values.resize(x.size());
  EXPECT_TRUE(formats::Dequantize(type, w.bytes, absl::MakeSpan(w.values)).ok());
  return w;
}

// One module: y0 = matmul(x, a); y1, y2 = matmul_group(x, a, b); y3 = matmul_swiglu(x, g, u);
// y4 = embed(ids, a). Weights stored as `type`, or (type == f32) as the dequantized values of
// the `type_of_values` blocks.
struct Program {
  std::unique_ptr<ir::Module> m = std::make_unique<ir::Module>();
  std::unique_ptr<gguf::GgufFile> file;
};

absl::StatusOr<Program> Build(GgmlType stored, const std::vector<std::pair<std::string, BlockWeight>>& weights,
                              const std::vector<int64_t>& rows) {
  Program p;
  gguf::GgufWriter writer;
  ir::Function* fn = p.m->AddFunction("f");
  ir::OpBuilder b(fn);
  Value* x = fn->AddArgument("x", TensorType(DType::kF32, Shape({Dim::Symbol("T"), Dim(K)})));
  Value* ids = fn->AddArgument("ids", TensorType(DType::kI32, Shape({Dim::Symbol("T")})));
  std::vector<Value*> w;
  for (size_t i = 0; i < weights.size(); ++i) {
    const std::vector<int64_t> ne = {K, rows[i]};
    if (stored == GgmlType::kF32) {
      std::vector<uint8_t> bytes(weights[i].second.values.size() * sizeof(float));
      std::memcpy(bytes.data(), weights[i].second.values.data(), bytes.size());
      MEMRA_RETURN_IF_ERROR(writer.AddTensorBytes(weights[i].first, stored, ne, bytes));
    } else {
      MEMRA_RETURN_IF_ERROR(writer.AddTensorBytes(weights[i].first, stored, ne, weights[i].second.bytes));
    }
    w.push_back(p.m->AddWeightNe(weights[i].first, *ir::DTypeFromGgmlId(static_cast<uint32_t>(stored)), ne));
  }
  std::vector<Value*> results;
  results.push_back(b.MatMul(x, w[0]));
  for (Value* v : b.Build(ir::OpKind::kMatMulGroup, {x, w[0], w[1]})) results.push_back(v);
  results.push_back(b.Build1(ir::OpKind::kMatMulSwiglu, {x, w[2], w[3]}));
  results.push_back(b.Embed(ids, w[0]));
  if (!b.ok()) return b.status();
  b.Return(results);
  std::vector<TensorType> types;
  for (Value* r : results) types.push_back(r->type());
  fn->set_result_types(types);
  MEMRA_RETURN_IF_ERROR(ir::VerifyModule(*p.m));
  MEMRA_ASSIGN_OR_RETURN(auto bytes, writer.WriteToBytes());
  MEMRA_ASSIGN_OR_RETURN(p.file, gguf::GgufFile::FromBytes(bytes, "blocks.gguf"));
  return p;
}

// y[t][n] = sum_k x[t][k] w[n][k] in double.
std::vector<double> RefProduct(const std::vector<float>& x, const std::vector<float>& w, int64_t T, int64_t N) {
  std::vector<double> y(T * N);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(x[t * K + k]) * w[n * K + k];
      y[t * N + n] = s;
    }
  return y;
}

double Nmse(const float* y, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (y[i] - ref[i]) * (y[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return num / den;
}

class CpuBlockWeights : public ::testing::TestWithParam<GgmlType> {};

TEST_P(CpuBlockWeights, ProductsAndEmbedEqualTheDequantizedF32Weights) {
  const GgmlType type = GetParam();
  const std::vector<int64_t> rows = {96, 40, 64, 64};
  std::vector<std::pair<std::string, BlockWeight>> weights;
  for (size_t i = 0; i < rows.size(); ++i)
    weights.emplace_back(absl::StrCat("w", i), MakeWeight(type, rows[i], 100 + static_cast<uint32_t>(i)));
  auto blocks = Build(type, weights, rows);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  auto dense = Build(GgmlType::kF32, weights, rows);
  ASSERT_TRUE(dense.ok()) << dense.status();
  auto cb = CpuExecutor::Create(*blocks->m, *blocks->file);
  ASSERT_TRUE(cb.ok()) << cb.status();
  auto cd = CpuExecutor::Create(*dense->m, *dense->file);
  ASSERT_TRUE(cd.ok()) << cd.status();

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t T : {1, 5, 77}) {
    SCOPED_TRACE(absl::StrCat("T=", T));
    std::vector<float> x(T * K);
    for (float& v : x) v = u(rng);
    std::vector<int32_t> ids(T);
    for (int64_t t = 0; t < T; ++t) ids[t] = static_cast<int32_t>((t * 37 + 11) % rows[0]);
    std::vector<HostTensor> args = {HostTensor::FromF32(x, {T, K}), HostTensor::FromI32(ids, {T})};
    auto yb = (*cb)->Run("f", args);
    ASSERT_TRUE(yb.ok()) << yb.status();
    auto yd = (*cd)->Run("f", args);
    ASSERT_TRUE(yd.ok()) << yd.status();
    ASSERT_EQ(yb->size(), 5u);
    ASSERT_EQ(yd->size(), 5u);
    for (size_t i = 0; i < yb->size(); ++i) {
      ASSERT_EQ((*yb)[i].shape(), (*yd)[i].shape()) << "result " << i;
      EXPECT_EQ(0, std::memcmp((*yb)[i].f32(), (*yd)[i].f32(), (*yb)[i].numel() * sizeof(float))) << "result " << i;
    }
    // The products against float64 (f32 accumulation: ~1e-13 nmse); the embedding is the rows.
    EXPECT_LT(Nmse((*yb)[0].f32(), RefProduct(x, weights[0].second.values, T, rows[0])), 1e-10);
    EXPECT_LT(Nmse((*yb)[2].f32(), RefProduct(x, weights[1].second.values, T, rows[1])), 1e-10);
    const auto g = RefProduct(x, weights[2].second.values, T, rows[2]);
    const auto up = RefProduct(x, weights[3].second.values, T, rows[3]);
    std::vector<double> sw(g.size());
    for (size_t i = 0; i < g.size(); ++i) sw[i] = g[i] / (1.0 + std::exp(-g[i])) * up[i];
    EXPECT_LT(Nmse((*yb)[3].f32(), sw), 1e-10);
    for (int64_t t = 0; t < T; ++t)
      ASSERT_EQ(0, std::memcmp((*yb)[4].f32() + t * K, weights[0].second.values.data() + ids[t] * K, K * 4));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CpuBlockWeights,
                         ::testing::Values(GgmlType::kIQ4_NL, GgmlType::kIQ4_XS, GgmlType::kQ4_0, GgmlType::kQ4_K),
                         [](const auto& info) { return std::string(formats::GgmlTypeName(info.param)); });

}  // namespace
}  // namespace memra::runtime
