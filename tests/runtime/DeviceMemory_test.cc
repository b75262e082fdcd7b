// The CUDA executor's device memory plan without a GPU (runtime/DeviceMemory.h): every weight's
// layout and bytes (blocks: the GGUF's tensor bytes; --weights bf16: 2 per weight), the units'
// workspace, the state, and the check against free memory with every figure in the error; a matrix
// whose type has no GPU layout refused naming the tensor, its type and --weights bf16.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufWriter.h"
#include "gtest/gtest.h"
#include "ir/Parser.h"
#include "kernels/cuda/Target.h"
#include "runtime/DeviceMemory.h"

namespace memra::runtime {
namespace {

using kernels::cuda::WeightMode;

// A module with a q4_K matrix (also an embedding table), an f32 norm and a q8_0 matrix, and a GGUF
// holding zero-filled blocks of those types.
struct Fixture {
  std::unique_ptr<ir::Module> module;
  std::unique_ptr<gguf::GgufFile> file;
};
Fixture Make(formats::GgmlType big = formats::GgmlType::kQ4_K, const char* big_name = "q4_K") {
  Fixture f;
  const std::string text = absl::StrCat(R"(weight @tab : )", big_name, R"([64, 256]
weight @norm : f32[256]
weight @w : q8_0[32, 256]
state kv @kc : f32[16, 2, 64]
func @f(%ids: i32[T]) -> (f32[T, 64], f32[T, 32]) {
  %x = embed(%ids, @tab) : f32[T, 256]
  %n = rms_norm(%x, @norm) {eps = 1e-06} : f32[T, 256]
  %y = matmul(%n, @tab) : f32[T, 64]
  %z = matmul(%n, @w) : f32[T, 32]
  return %y, %z
}
)");
  auto m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status();
  f.module = std::move(*m);
  gguf::GgufWriter w;
  auto add = [&](const std::string& name, formats::GgmlType t, std::vector<int64_t> ne) {
    const auto bytes = *formats::RowBytes(t, ne[0]) * (ne.size() > 1 ? ne[1] : 1);
    EXPECT_TRUE(w.AddTensorBytes(name, t, ne, std::vector<uint8_t>(bytes, 0)).ok());
  };
  add("tab", big, {256, 64});
  add("norm", formats::GgmlType::kF32, {256});
  add("w", formats::GgmlType::kQ8_0, {256, 32});
  auto bytes = w.WriteToBytes();
  EXPECT_TRUE(bytes.ok());
  auto file = gguf::GgufFile::FromBytes(*bytes, "dm.gguf");
  EXPECT_TRUE(file.ok()) << file.status();
  f.file = std::move(*file);
  return f;
}

TEST(DeviceMemory, BlocksHoldTheTensorBytes) {
  Fixture f = Make();
  const auto target = *kernels::cuda::TargetPreset("sm_90");
  auto blocks = PlanWeights(*f.module, *f.file, WeightMode::kBlocks);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  uint64_t tensor_bytes = 0;
  for (const auto& t : f.file->tensors()) tensor_bytes += t.data.size();
  auto need = PlannedDeviceMemory(*f.module, *blocks, target, WeightMode::kBlocks);
  ASSERT_TRUE(need.ok()) << need.status();
  EXPECT_EQ(need->weights, tensor_bytes);
  EXPECT_EQ(need->workspace, 64u * 256 * 2);  // the larger matrix in blocks, as bf16
  EXPECT_EQ(need->kv_cache, 16u * 2 * 64 * 4);
  auto bf16 = PlanWeights(*f.module, *f.file, WeightMode::kBf16);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  auto need16 = PlannedDeviceMemory(*f.module, *bf16, target, WeightMode::kBf16);
  ASSERT_TRUE(need16.ok());
  EXPECT_EQ(need16->weights, (64u * 256 + 32 * 256) * 2 + 256 * 4);
  EXPECT_EQ(need16->workspace, 0u);
  const std::string text = DescribeDeviceMemory(*need);
  EXPECT_NE(text.find("weights 0.0 MiB, KV cache 0.0 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("workspace"), std::string::npos) << text;
}

TEST(DeviceMemory, AModelThatDoesNotFitIsOneErrorWithTheNumbers) {
  DeviceMemoryBytes need;
  need.weights = uint64_t{20} << 30;
  need.kv_cache = uint64_t{1} << 30;
  need.workspace = uint64_t{2} << 30;
  EXPECT_TRUE(CheckDeviceMemoryFits(need, uint64_t{40} << 30, "NVIDIA H200").ok());
  absl::Status st = CheckDeviceMemoryFits(need, uint64_t{16} << 30, "NVIDIA H200");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(st.message());
  for (const char* part : {"needs 23.00 GiB", "weights 20.00 GiB", "KV cache 1.00 GiB", "workspace 2.00 GiB",
                           "16.00 GiB free on NVIDIA H200", "smaller model"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " in: " << msg;
  need.weights = 1;
  need.kv_cache = uint64_t{30} << 30;  // the context is the problem
  st = CheckDeviceMemoryFits(need, uint64_t{16} << 30, "GPU");
  EXPECT_NE(st.message().find("lower --ctx-size"), std::string::npos) << st;
}

TEST(DeviceMemory, AMatrixWithoutAGpuLayoutIsRefusedBeforeAnyUpload) {
  Fixture f = Make(formats::GgmlType::kNVFP4, "nvfp4");
  auto blocks = PlanWeights(*f.module, *f.file, WeightMode::kBlocks);
  ASSERT_FALSE(blocks.ok());
  const std::string msg(blocks.status().message());
  EXPECT_NE(msg.find("tensor \"tab\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("type nvfp4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--weights bf16"), std::string::npos) << msg;
  auto bf16 = PlanWeights(*f.module, *f.file, WeightMode::kBf16);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ((*bf16)[0].layout->kind, kernels::cuda::WeightLayoutKind::kBf16Dequantized);
}

TEST(DeviceMemory, AMissingOrMistypedTensorIsNamed) {
  Fixture f = Make();
  auto m = ir::ParseModule(R"(weight @gone : q8_0[32, 256]
func @f(%x: f32[1, 256]) -> (f32[1, 32]) {
  %y = matmul(%x, @gone) : f32[1, 32]
  return %y
}
)");
  ASSERT_TRUE(m.ok());
  auto p = PlanWeights(**m, *f.file, WeightMode::kBlocks);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("tensor \"gone\""), std::string::npos) << p.status();
  auto m2 = ir::ParseModule(R"(weight @w : q4_K[32, 256]
func @f(%x: f32[1, 256]) -> (f32[1, 32]) {
  %y = matmul(%x, @w) : f32[1, 32]
  return %y
}
)");
  ASSERT_TRUE(m2.ok());
  auto p2 = PlanWeights(**m2, *f.file, WeightMode::kBlocks);
  ASSERT_FALSE(p2.ok());
  EXPECT_NE(p2.status().message().find("has type q8_0, the module declares q4_K"), std::string::npos) << p2.status();
}

}  // namespace
}  // namespace memra::runtime
