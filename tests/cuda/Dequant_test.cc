// kernels/cuda/Dequant.cu on the GPU, bit for bit: for every format the GPU reads as blocks,
// dequant_bf16 over a row range must equal formats::FloatToBf16 of the host reference
// (formats::Dequantize, bit-exact with ggml) and dequant_rows_f32 (the embedding lookup) the
// reference itself, on random blocks with finite scales and on reference-quantized rows. The
// kernels are launched directly with the units' launch geometry (Dequant.cc). Skips without a GPU.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/KernelCompiler.h"
#include "gtest/gtest.h"
#include "ir/DType.h"
#include "kernels/cuda/DequantParams.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/WeightLayout.h"
#include "kernels/formats/Quant.h"
#include "runtime/cuda/CudaDevice.h"

namespace memra::runtime {
namespace {

namespace kcu = memra::kernels::cuda;
using cuda::CuCheck;

formats::GgmlType GgmlOf(ir::DType d) { return static_cast<formats::GgmlType>(ir::InfoOf(d).ggml_id); }

// Byte offsets of each format's f16 fields (kept finite: NaN bits may differ on a GPU).
std::vector<int> F16Fields(ir::DType d) {
  switch (d) {
    case ir::DType::kQ4_1:
    case ir::DType::kQ5_1:
    case ir::DType::kQ4_K:
    case ir::DType::kQ5_K:
      return {0, 2};
    case ir::DType::kQ2_K:
      return {80, 82};
    case ir::DType::kQ3_K:
      return {108};
    case ir::DType::kQ6_K:
      return {208};
    case ir::DType::kMXFP4:
      return {};
    default:
      return {0};
  }
}

class DequantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = cuda::CudaDevice::Open(0);
    if (!dev.ok()) GTEST_SKIP() << "no GPU: " << dev.status().message();
    dev_ = std::move(*dev);
    codegen::CompileOptions co;
    co.arch = dev_->arch();
    co.cache_dir = ::testing::TempDir() + "/memra-dequant-test-cache";
    auto c = codegen::KernelCompiler::Create(co);
    ASSERT_TRUE(c.ok()) << c.status();
    compiler_ = std::move(*c);
  }

  // Runs both kernels of `d`'s module over `blocks` ([rows, cols]) and compares every element.
  void CheckMatrix(ir::DType d, const std::vector<uint8_t>& blocks, int64_t rows, int64_t cols, const char* what) {
    const auto& drv = dev_->driver();
    const int64_t row_bytes = *ir::StorageBytes(d, cols);
    ASSERT_EQ(static_cast<int64_t>(blocks.size()), rows * row_bytes);
    std::vector<float> want(static_cast<size_t>(rows * cols));
    ASSERT_TRUE(formats::Dequantize(GgmlOf(d), blocks, absl::MakeSpan(want)).ok());
    const kcu::Target target = dev_->target();
    // dequant_bf16 over rows [row0, rows): the GEMM units' launch for that many rows.
    const int64_t row0 = 3, n = rows - row0;
    const kcu::Launch bf = kcu::DequantBf16Launch(target, d, n, cols);
    auto cubins = compiler_->CompileAll({bf.kernel.module});
    ASSERT_TRUE(cubins.ok()) << cubins.status();
    auto mod = cuda::LoadedModule::Load(*dev_, *(*cubins)[0], bf.kernel.module.Key());
    ASSERT_TRUE(mod.ok()) << mod.status();
    auto f_bf16 = (*mod)->Function("dequant_bf16");
    auto f_rows = (*mod)->Function("dequant_rows_f32");
    ASSERT_TRUE(f_bf16.ok() && f_rows.ok());
    auto w = dev_->Alloc(blocks.size(), "blocks");
    auto y = dev_->Alloc(static_cast<size_t>(rows * cols) * 4, "y");
    const int n_ids = 19;
    auto ids = dev_->Alloc(n_ids * 4, "ids");
    ASSERT_TRUE(w.ok() && y.ok() && ids.ok());
    ASSERT_TRUE(dev_->Upload(w->ptr(), blocks.data(), blocks.size()).ok());

    ASSERT_TRUE(CuCheck(drv.cuMemsetD8Async(y->ptr(), 0xff, y->bytes(), dev_->stream()), "poison").ok());
    kcu::DequantParams p;
    p.w = w->ptr();
    p.y = y->ptr();
    p.row_bytes = row_bytes;
    p.row0 = row0;
    p.n_rows = n;
    p.cols = cols;
    void* args[] = {&p};
    ASSERT_TRUE(CuCheck(drv.cuLaunchKernel(*f_bf16, bf.grid, 1, 1, bf.block, 1, 1, 0, dev_->stream(), args, nullptr),
                        "dequant_bf16")
                    .ok());
    std::vector<uint16_t> got16(static_cast<size_t>(n * cols));
    ASSERT_TRUE(dev_->Download(got16.data(), y->ptr(), got16.size() * 2).ok());
    int64_t bad = 0;
    for (int64_t i = 0; i < n * cols; ++i) {
      const uint16_t ref = formats::FloatToBf16(want[static_cast<size_t>(row0 * cols + i)]);
      if (got16[static_cast<size_t>(i)] != ref && bad++ < 5)
        ADD_FAILURE() << ir::DTypeName(d) << " " << what << " dequant_bf16 element " << i << ": 0x" << std::hex
                      << got16[static_cast<size_t>(i)] << " want 0x" << ref;
    }
    EXPECT_EQ(bad, 0) << ir::DTypeName(d) << " " << what;

    // dequant_rows_f32: gathered rows (repeats included), as the embed_blocks unit launches it.
    std::vector<int32_t> id(n_ids);
    std::mt19937 rng(3);
    for (int32_t& x : id) x = static_cast<int32_t>(rng() % rows);
    ASSERT_TRUE(dev_->Upload(ids->ptr(), id.data(), id.size() * 4).ok());
    ASSERT_TRUE(CuCheck(drv.cuMemsetD8Async(y->ptr(), 0xff, y->bytes(), dev_->stream()), "poison").ok());
    const kcu::Launch rl =
        kcu::GridStrideLaunch(target, "Dequant.cu", "dequant_rows_f32", n_ids * cols / 8, bf.kernel.module.defines);
    kcu::DequantRowsParams r;
    r.w = w->ptr();
    r.ids = ids->ptr();
    r.y = y->ptr();
    r.row_bytes = row_bytes;
    r.cols = cols;
    r.n_tok = n_ids;
    void* rargs[] = {&r};
    ASSERT_TRUE(CuCheck(drv.cuLaunchKernel(*f_rows, rl.grid, 1, 1, rl.block, 1, 1, 0, dev_->stream(), rargs, nullptr),
                        "dequant_rows_f32")
                    .ok());
    std::vector<float> got(static_cast<size_t>(n_ids * cols));
    ASSERT_TRUE(dev_->Download(got.data(), y->ptr(), got.size() * 4).ok());
    bad = 0;
    for (int t = 0; t < n_ids; ++t)
      if (std::memcmp(&got[static_cast<size_t>(t * cols)], &want[static_cast<size_t>(id[t] * cols)], cols * 4) != 0 &&
          bad++ < 5)
        ADD_FAILURE() << ir::DTypeName(d) << " " << what << " dequant_rows_f32 token " << t << " (row " << id[t] << ")";
    EXPECT_EQ(bad, 0) << ir::DTypeName(d) << " " << what;
  }

  std::unique_ptr<cuda::CudaDevice> dev_;
  std::unique_ptr<codegen::KernelCompiler> compiler_;
};

TEST_F(DequantTest, RandomBlocksBitExact) {
  std::mt19937 rng(11);
  for (ir::DType d : kcu::GpuBlockFormats()) {
    const int64_t rows = 41, cols = 4 * 256;  // 4 super-blocks or 32 blocks per row
    const int64_t bb = ir::InfoOf(d).block_bytes, nb = rows * cols / ir::InfoOf(d).block_elems;
    std::vector<uint8_t> blocks(static_cast<size_t>(nb * bb));
    for (uint8_t& b : blocks) b = static_cast<uint8_t>(rng());
    for (int64_t k = 0; k < nb; ++k)
      for (int off : F16Fields(d)) {
        uint16_t h = static_cast<uint16_t>(rng());
        if (((h >> 10) & 0x1f) == 0x1f) h = static_cast<uint16_t>(h & ~(1u << 14));
        std::memcpy(&blocks[static_cast<size_t>(k * bb + off)], &h, 2);
      }
    CheckMatrix(d, blocks, rows, cols, "random blocks");
  }
}

TEST_F(DequantTest, QuantizedRowsBitExact) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (ir::DType d : kcu::GpuBlockFormats()) {
    const int64_t rows = 24, cols = 2 * 256;
    std::vector<float> x(static_cast<size_t>(rows * cols));
    for (float& v : x) v = normal(rng);
    std::vector<uint8_t> blocks(static_cast<size_t>(*ir::StorageBytes(d, rows * cols)));
    ASSERT_TRUE(formats::Quantize(GgmlOf(d), x, absl::MakeSpan(blocks)).ok()) << ir::DTypeName(d);
    CheckMatrix(d, blocks, rows, cols, "quantized rows");
  }
}

}  // namespace
}  // namespace memra::runtime
