#include "kernels/cuda/WeightLayout.h"

#include <cstring>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/Weight.h"
#include "kernels/formats/Quant.h"

namespace memra::kernels::cuda {
namespace {

constexpr WeightLayout kF32{WeightLayoutKind::kAsStored, "f32", ir::DType::kF32, 4,
                            "cuBLASLt (f32 compute), Gemv.cu (GEMV_W=4), embed"};
constexpr WeightLayout kF16{WeightLayoutKind::kAsStored, "f16", ir::DType::kF16, 1,
                            "cuBLASLt (f16 operands), Gemv.cu (GEMV_W=1), embed"};
constexpr WeightLayout kBf16{WeightLayoutKind::kAsStored, "bf16", ir::DType::kBF16, 2,
                             "cuBLASLt, Gemv.cu (GEMV_W=2), embed"};
constexpr WeightLayout kBf16Dequant{WeightLayoutKind::kBf16Dequantized, "bf16 (dequantized at upload)",
                                    ir::DType::kBF16, 2, "cuBLASLt, Gemv.cu (GEMV_W=2), embed"};
constexpr WeightLayout kQ8{WeightLayoutKind::kQ8Repacked, "q8_0 (repacked: int8 values + f32 scales)", ir::DType::kBF16,
                           3, "Gemv.cu (GEMV_W=3)"};
constexpr absl::string_view kBlocksReaders =
    "Dequant.cu dequant_bf16 (into the workspace) + cuBLASLt bf16, Dequant.cu dequant_rows_f32 (embed)";

constexpr int kDTypes = 0
#define MEMRA_DTYPE(id, name, ggml, belems, bbytes, quant) +1
#include "ir/DTypes.def"
#undef MEMRA_DTYPE
    ;

// One kBlocks entry per format Dequant.cu reads, named "<format> (blocks)".
struct BlockLayouts {
  std::vector<std::string> names;
  std::vector<WeightLayout> layouts;
  std::vector<int> index;  // per dtype: into layouts, -1 none
  BlockLayouts() {
    names.reserve(kDTypes);
    index.assign(kDTypes, -1);
    for (ir::DType d : GpuBlockFormats()) names.push_back(absl::StrCat(ir::DTypeName(d), " (blocks)"));
    size_t i = 0;
    for (ir::DType d : GpuBlockFormats()) {
      index[static_cast<int>(d)] = static_cast<int>(layouts.size());
      layouts.push_back({WeightLayoutKind::kBlocks, names[i++], ir::DType::kBF16, 0, kBlocksReaders});
    }
  }
};
const BlockLayouts& Blocks() {
  static const BlockLayouts* b = new BlockLayouts();
  return *b;
}

formats::GgmlType GgmlOf(ir::DType d) { return static_cast<formats::GgmlType>(ir::InfoOf(d).ggml_id); }

// What the host can dequantize (the bf16 layout's repacker).
bool HostCanDequantize(ir::DType d) { return ir::InfoOf(d).ggml_id >= 0 && cpu::CanDecode(GgmlOf(d)); }

}  // namespace

absl::string_view WeightModeName(WeightMode mode) { return mode == WeightMode::kBf16 ? "bf16" : "blocks"; }

absl::StatusOr<WeightMode> ParseWeightMode(absl::string_view name) {
  if (name == "blocks") return WeightMode::kBlocks;
  if (name == "bf16") return WeightMode::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("weight mode \"", name,
                   "\": expected blocks (block formats stay in their GGUF blocks) or bf16 "
                   "(dequantized to bf16 at upload)"));
}

bool HasGpuDequantizer(ir::DType stored) {
  switch (stored) {
    case ir::DType::kQ8_0:
    case ir::DType::kQ4_0:
    case ir::DType::kQ4_1:
    case ir::DType::kQ5_0:
    case ir::DType::kQ5_1:
    case ir::DType::kQ2_K:
    case ir::DType::kQ3_K:
    case ir::DType::kQ4_K:
    case ir::DType::kQ5_K:
    case ir::DType::kQ6_K:
    case ir::DType::kIQ4_NL:
    case ir::DType::kIQ4_XS:
    case ir::DType::kMXFP4:
      return true;
    default:
      return false;
  }
}

const std::vector<ir::DType>& GpuBlockFormats() {
  static const std::vector<ir::DType>* formats = [] {
    auto* v = new std::vector<ir::DType>;
#define MEMRA_DTYPE(id, name, ggml, belems, bbytes, quant) \
  if (HasGpuDequantizer(ir::DType::k##id)) v->push_back(ir::DType::k##id);
#include "ir/DTypes.def"
#undef MEMRA_DTYPE
    return v;
  }();
  return *formats;
}

const WeightLayout* FindMatrixLayout(ir::DType stored, WeightMode mode) {
  switch (stored) {
    case ir::DType::kF32:
      return &kF32;
    case ir::DType::kF16:
      return &kF16;
    case ir::DType::kBF16:
      return &kBf16;
    default:
      break;
  }
  if (!ir::IsQuantized(stored)) return nullptr;
  if (mode == WeightMode::kBf16) return HostCanDequantize(stored) ? &kBf16Dequant : nullptr;
  const int i = Blocks().index[static_cast<int>(stored)];
  return i < 0 ? nullptr : &Blocks().layouts[i];
}

absl::StatusOr<const WeightLayout*> MatrixLayoutFor(ir::DType stored, WeightMode mode, absl::string_view what) {
  if (const WeightLayout* l = FindMatrixLayout(stored, mode)) return l;
  const absl::string_view type = ir::DTypeName(stored);
  if (!ir::IsQuantized(stored))
    return absl::UnimplementedError(
        absl::StrCat(what, ": type ", type, " cannot be a matrix on the GPU (f32, f16, bf16 or a block format)"));
  if (mode == WeightMode::kBlocks && HostCanDequantize(stored)) {
    std::vector<std::string> names;
    for (ir::DType d : GpuBlockFormats()) names.emplace_back(ir::DTypeName(d));
    return absl::UnimplementedError(
        absl::StrCat(what, ": type ", type, " has no GPU layout as blocks (the GPU reads ", absl::StrJoin(names, ", "),
                     "); run with --weights bf16 (dequantized to bf16 on the host at upload)"));
  }
  return absl::UnimplementedError(absl::StrCat(what, ": type ", type,
                                               " has no GPU layout: memra cannot dequantize it yet (neither as "
                                               "blocks nor with --weights bf16)"));
}

const WeightLayout& Q8Layout() { return kQ8; }

int64_t LayoutBytes(const WeightLayout& layout, ir::DType stored, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  switch (layout.kind) {
    case WeightLayoutKind::kQ8Repacked:
      return n + (n / 32) * 4;
    case WeightLayoutKind::kAsStored:
    case WeightLayoutKind::kBlocks:
      return ir::StorageBytes(stored, n).value_or(0);
    case WeightLayoutKind::kBf16Dequantized:
      return n * 2;
  }
  return 0;
}

int64_t DequantWorkspaceBytes(const WeightLayout& layout, int64_t rows, int64_t cols) {
  return layout.kind == WeightLayoutKind::kBlocks ? rows * cols * 2 : 0;
}

int64_t DeviceMatrix::row_bytes() const { return ir::StorageBytes(stored, cols).value_or(0); }

absl::StatusOr<RepackedMatrix> Repack(const WeightLayout& layout, ir::DType stored, int64_t rows, int64_t cols,
                                      absl::Span<const uint8_t> src, int threads) {
  RepackedMatrix out;
  const auto type = static_cast<formats::GgmlType>(ir::InfoOf(stored).ggml_id);
  switch (layout.kind) {
    case WeightLayoutKind::kAsStored:
    case WeightLayoutKind::kBlocks:
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
