#include "kernels/cuda/WeightLayout.h"

#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/Weight.h"
#include "kernels/formats/Quant.h"

namespace memra::kernels::cuda {
namespace {

constexpr WeightLayout kF32{WeightLayoutKind::kAsStored, "f32", ir::DType::kF32, 0, "cuBLASLt (f32 compute), embed"};
constexpr WeightLayout kF16{WeightLayoutKind::kAsStored, "f16", ir::DType::kF16, 1,
                            "cuBLASLt, Gemv.cu (GEMV_W=1), embed"};
constexpr WeightLayout kBf16{WeightLayoutKind::kAsStored, "bf16", ir::DType::kBF16, 2,
                             "cuBLASLt, Gemv.cu (GEMV_W=2), embed"};
constexpr WeightLayout kBf16Dequant{WeightLayoutKind::kBf16Dequantized, "bf16 (dequantized at upload)",
                                    ir::DType::kBF16, 2, "cuBLASLt, Gemv.cu (GEMV_W=2), embed"};
constexpr WeightLayout kQ8{WeightLayoutKind::kQ8Repacked, "q8_0 (repacked: int8 values + f32 scales)", ir::DType::kBF16,
                           3, "Gemv.cu (GEMV_W=3)"};

}  // namespace

const WeightLayout& MatrixLayoutFor(ir::DType stored) {
  switch (stored) {
    case ir::DType::kF32:
      return kF32;
    case ir::DType::kF16:
      return kF16;
    case ir::DType::kBF16:
      return kBf16;
    default:
      return kBf16Dequant;  // every ggml block format
  }
}

const WeightLayout& Q8Layout() { return kQ8; }

int64_t LayoutBytes(const WeightLayout& layout, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  switch (layout.kind) {
    case WeightLayoutKind::kQ8Repacked:
      return n + (n / 32) * 4;
    default:
      return n * (layout.compute_dtype == ir::DType::kF32 ? 4 : 2);
  }
}

absl::StatusOr<RepackedMatrix> Repack(const WeightLayout& layout, ir::DType stored, int64_t rows, int64_t cols,
                                      absl::Span<const uint8_t> src, int threads) {
  RepackedMatrix out;
  const auto type = static_cast<formats::GgmlType>(ir::InfoOf(stored).ggml_id);
  switch (layout.kind) {
    case WeightLayoutKind::kAsStored:
      return out;
    case WeightLayoutKind::kBf16Dequantized: {
      auto view = cpu::WeightView::Make(type, rows, cols, src);
      if (!view.ok()) return view.status();
      if (!cpu::CanDecode(type))
        return absl::UnimplementedError(absl::StrCat("no dequantizer for ", ir::DTypeName(stored)));
      out.data.resize(static_cast<size_t>(rows * cols) * 2);
      uint16_t* bf = reinterpret_cast<uint16_t*>(out.data.data());
      absl::Status err;
      std::mutex mu;
      cpu::ThreadPool pool(threads);
      pool.ParallelFor(0, rows, 16, [&](int64_t lo, int64_t hi) {
        std::vector<float> row(static_cast<size_t>(cols));
        for (int64_t r = lo; r < hi; ++r) {
          absl::Status s = cpu::DequantizeRow(*view, r, row.data());
          if (!s.ok()) {
            std::lock_guard<std::mutex> l(mu);
            err = s;
            return;
          }
          for (int64_t c = 0; c < cols; ++c) bf[r * cols + c] = formats::FloatToBf16(row[c]);
        }
      });
      if (!err.ok()) return err;
      return out;
    }
    case WeightLayoutKind::kQ8Repacked: {
      if (stored != ir::DType::kQ8_0) return absl::InvalidArgumentError("the q8 layout holds q8_0 weights only");
      const int64_t blocks = rows * (cols / 32);
      if (cols % 32 != 0 || static_cast<int64_t>(src.size()) != blocks * 34)
        return absl::InvalidArgumentError("q8_0 data size mismatch");
      out.data.resize(static_cast<size_t>(blocks * 32));
      out.scales.resize(static_cast<size_t>(blocks * 4));
      for (int64_t b = 0; b < blocks; ++b) {
        uint16_t d;
        std::memcpy(&d, src.data() + b * 34, 2);
        const float scale = formats::HalfToFloat(d);
        std::memcpy(out.scales.data() + b * 4, &scale, 4);
        std::memcpy(out.data.data() + b * 32, src.data() + b * 34 + 2, 32);
      }
      return out;
    }
  }
  return out;
}

}  // namespace memra::kernels::cuda
