// The block decoders the GPU dequantizes with (kernels/cuda/DequantBlocks.cuh, compiled here as
// host C++: the same source text NVRTC compiles into Dequant.cu), checked bit for bit against the
// host reference formats::Dequantize (bit-exact with ggml) for every format the GPU reads as
// blocks: random blocks with finite scales, every group of 8 of every block, no GPU needed. The
// device side (byte loads, bf16 rounding, the kernels' indexing) is tests/cuda/Dequant_test.cc.
// ISO C++ without contraction, as the device code (mul_ / add_ / sub_ are __fmul_rn ... there).
#pragma GCC optimize("fp-contract=off")

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/DType.h"
#include "kernels/cuda/WeightLayout.h"
#include "kernels/formats/Quant.h"

namespace memra::kernels::cuda {
namespace {

typedef unsigned short u16;
inline float f16_to_f32(u16 h) { return formats::HalfToFloat(h); }
using DecodeFn = void (*)(const unsigned char* block, int g, float* y);

#define MEMRA_DEQ_HOST 1
namespace q4_0 {
#define DEQ_TYPE 2
#include "kernels/cuda/DequantBlocks.cuh"
constexpr int kQk = DEQ_QK, kBytes = DEQ_BYTES;
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
}  // namespace q4_0
namespace q4_1 {
#define DEQ_TYPE 3
#include "kernels/cuda/DequantBlocks.cuh"
constexpr int kQk = DEQ_QK, kBytes = DEQ_BYTES;
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
}  // namespace q4_1
namespace q5_0 {
#define DEQ_TYPE 6
#include "kernels/cuda/DequantBlocks.cuh"
constexpr int kQk = DEQ_QK, kBytes = DEQ_BYTES;
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
}  // namespace q5_0
namespace q5_1 {
#define DEQ_TYPE 7
#include "kernels/cuda/DequantBlocks.cuh"
constexpr int kQk = DEQ_QK, kBytes = DEQ_BYTES;
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
}  // namespace q5_1
namespace q8_0 {
#define DEQ_TYPE 8
#include "kernels/cuda/DequantBlocks.cuh"
constexpr int kQk = DEQ_QK, kBytes = DEQ_BYTES;
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
}  // namespace q8_0
namespace q2_k {
#define DEQ_TYPE 10
#include "kernels/cuda/DequantBlocks.cuh"
constexpr int kQk = DEQ_QK, kBytes = DEQ_BYTES;
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
}  // namespace q2_k
namespace q3_k {
#define DEQ_TYPE 11
#include "kernels/cuda/DequantBlocks.cuh"
constexpr int kQk = DEQ_QK, kBytes = DEQ_BYTES;
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
}  // namespace q3_k
namespace q4_k {
#define DEQ_TYPE 12
#include "kernels/cuda/DequantBlocks.cuh"
constexpr int kQk = DEQ_QK, kBytes = DEQ_BYTES;
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
}  // namespace q4_k
namespace q5_k {
#define DEQ_TYPE 13
#include "kernels/cuda/DequantBlocks.cuh"
constexpr int kQk = DEQ_QK, kBytes = DEQ_BYTES;
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
}  // namespace q5_k
namespace q6_k {
#define DEQ_TYPE 14
#include "kernels/cuda/DequantBlocks.cuh"
constexpr int kQk = DEQ_QK, kBytes = DEQ_BYTES;
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
}  // namespace q6_k
namespace iq4_nl {
#define DEQ_TYPE 20
#include "kernels/cuda/DequantBlocks.cuh"
constexpr int kQk = DEQ_QK, kBytes = DEQ_BYTES;
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
}  // namespace iq4_nl
namespace iq4_xs {
#define DEQ_TYPE 23
#include "kernels/cuda/DequantBlocks.cuh"
constexpr int kQk = DEQ_QK, kBytes = DEQ_BYTES;
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
}  // namespace iq4_xs
namespace mxfp4 {
#define DEQ_TYPE 39
#include "kernels/cuda/DequantBlocks.cuh"
constexpr int kQk = DEQ_QK, kBytes = DEQ_BYTES;
#undef DEQ_TYPE
#undef DEQ_QK
#undef DEQ_BYTES
}  // namespace mxfp4

struct Decoder {
  ir::DType dtype;
  DecodeFn fn;
  int qk, bytes;
  std::vector<int> f16_scales;  // byte offsets of the block's f16 fields (kept finite)
};

const std::vector<Decoder>& Decoders() {
  static const std::vector<Decoder> d = {
      {ir::DType::kQ4_0, q4_0::dequant8, q4_0::kQk, q4_0::kBytes, {0}},
      {ir::DType::kQ4_1, q4_1::dequant8, q4_1::kQk, q4_1::kBytes, {0, 2}},
      {ir::DType::kQ5_0, q5_0::dequant8, q5_0::kQk, q5_0::kBytes, {0}},
      {ir::DType::kQ5_1, q5_1::dequant8, q5_1::kQk, q5_1::kBytes, {0, 2}},
      {ir::DType::kQ8_0, q8_0::dequant8, q8_0::kQk, q8_0::kBytes, {0}},
      {ir::DType::kQ2_K, q2_k::dequant8, q2_k::kQk, q2_k::kBytes, {80, 82}},
      {ir::DType::kQ3_K, q3_k::dequant8, q3_k::kQk, q3_k::kBytes, {108}},
      {ir::DType::kQ4_K, q4_k::dequant8, q4_k::kQk, q4_k::kBytes, {0, 2}},
      {ir::DType::kQ5_K, q5_k::dequant8, q5_k::kQk, q5_k::kBytes, {0, 2}},
      {ir::DType::kQ6_K, q6_k::dequant8, q6_k::kQk, q6_k::kBytes, {208}},
      {ir::DType::kIQ4_NL, iq4_nl::dequant8, iq4_nl::kQk, iq4_nl::kBytes, {0}},
      {ir::DType::kIQ4_XS, iq4_xs::dequant8, iq4_xs::kQk, iq4_xs::kBytes, {0}},
      {ir::DType::kMXFP4, mxfp4::dequant8, mxfp4::kQk, mxfp4::kBytes, {}},
  };
  return d;
}

formats::GgmlType GgmlOf(ir::DType d) { return static_cast<formats::GgmlType>(ir::InfoOf(d).ggml_id); }

TEST(DequantBlocks, EveryGpuFormatHasADecoderOfItsGeometry) {
  std::vector<ir::DType> have;
  for (const Decoder& d : Decoders()) {
    have.push_back(d.dtype);
    EXPECT_EQ(d.qk, ir::InfoOf(d.dtype).block_elems) << ir::DTypeName(d.dtype);
    EXPECT_EQ(d.bytes, ir::InfoOf(d.dtype).block_bytes) << ir::DTypeName(d.dtype);
  }
  EXPECT_EQ(have, GpuBlockFormats());
}

// Random bytes are valid blocks of every one of these formats; only the f16 scales are kept
// finite (a NaN scale gives NaN on both sides, but not necessarily the same NaN bits on a GPU).
TEST(DequantBlocks, BitExactWithTheHostReferenceOnRandomBlocks) {
  std::mt19937 rng(20261201);
  for (const Decoder& d : Decoders()) {
    constexpr int kBlocks = 64;
    std::vector<uint8_t> blocks(static_cast<size_t>(kBlocks) * d.bytes);
    int64_t mismatches = 0;
    for (int trial = 0; trial < 16; ++trial) {
      for (uint8_t& b : blocks) b = static_cast<uint8_t>(rng());
      for (int k = 0; k < kBlocks; ++k)
        for (int off : d.f16_scales) {
          uint16_t h = static_cast<uint16_t>(rng());
          if (((h >> 10) & 0x1f) == 0x1f) h = static_cast<uint16_t>(h & ~(1u << 14));  // not inf/NaN
          std::memcpy(&blocks[static_cast<size_t>(k) * d.bytes + off], &h, 2);
        }
      if (d.dtype == ir::DType::kMXFP4 && trial == 0)  // the E8M0 scales' subnormal and edge codes
        for (int k = 0; k < 6; ++k)
          blocks[static_cast<size_t>(k) * d.bytes] = static_cast<uint8_t>(k < 3 ? k : 253 + k - 3);
      std::vector<float> want(static_cast<size_t>(kBlocks) * d.qk), got(want.size());
      ASSERT_TRUE(formats::Dequantize(GgmlOf(d.dtype), blocks, absl::MakeSpan(want)).ok());
      for (int k = 0; k < kBlocks; ++k)
        for (int g = 0; g < d.qk / 8; ++g)
          d.fn(&blocks[static_cast<size_t>(k) * d.bytes], g, &got[static_cast<size_t>(k) * d.qk + 8 * g]);
      for (size_t i = 0; i < want.size(); ++i) {
        uint32_t a, b;
        std::memcpy(&a, &want[i], 4);
        std::memcpy(&b, &got[i], 4);
        if (a != b && mismatches++ < 5)
          ADD_FAILURE() << ir::DTypeName(d.dtype) << " element " << i << ": reference " << want[i] << ", decoder "
                        << got[i];
      }
    }
    EXPECT_EQ(mismatches, 0) << ir::DTypeName(d.dtype);
  }
}

// Blocks from the reference quantizers (the values real models hold).
TEST(DequantBlocks, BitExactOnQuantizedRows) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (const Decoder& d : Decoders()) {
    const int64_t n = 4 * 256;
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    std::vector<uint8_t> q(static_cast<size_t>(*ir::StorageBytes(d.dtype, n)));
    ASSERT_TRUE(formats::Quantize(GgmlOf(d.dtype), x, absl::MakeSpan(q)).ok()) << ir::DTypeName(d.dtype);
    std::vector<float> want(n), got(n);
    ASSERT_TRUE(formats::Dequantize(GgmlOf(d.dtype), q, absl::MakeSpan(want)).ok());
    for (int64_t k = 0; k < n / d.qk; ++k)
      for (int g = 0; g < d.qk / 8; ++g) d.fn(&q[static_cast<size_t>(k) * d.bytes], g, &got[k * d.qk + 8 * g]);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << ir::DTypeName(d.dtype);
  }
}

}  // namespace
}  // namespace memra::kernels::cuda
