#include "kernels/cpu/Weight.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/formats/Quant.h"

namespace memra::kernels::cpu {

using formats::GgmlType;

absl::StatusOr<WeightView> WeightView::Make(GgmlType type, int64_t rows, int64_t cols,
                                            absl::Span<const uint8_t> bytes) {
  if (rows < 0 || cols <= 0)
    return absl::InvalidArgumentError(absl::StrCat("weight shape {", cols, ", ", rows, "} is invalid"));
  auto row_bytes = formats::RowBytes(type, cols);
  if (!row_bytes.ok()) return row_bytes.status();
  if (rows > 0 && *row_bytes > bytes.size() / static_cast<uint64_t>(rows))
    return absl::InvalidArgumentError(absl::StrCat("weight {", cols, ", ", rows, "} of type ",
                                                   formats::GgmlTypeName(type), " needs ", *row_bytes,
                                                   " bytes per row but only ", bytes.size(), " bytes are given"));
  if (*row_bytes * static_cast<uint64_t>(rows) != bytes.size())
    return absl::InvalidArgumentError(absl::StrCat("weight {", cols, ", ", rows, "} of type ",
                                                   formats::GgmlTypeName(type), " needs ", *row_bytes * rows,
                                                   " bytes, got ", bytes.size()));
  WeightView w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = *row_bytes;
  w.data = bytes.data();
  return w;
}

absl::StatusOr<WeightView> WeightView::FromTensor(absl::string_view name, formats::GgmlType type,
                                                  absl::Span<const int64_t> ne, absl::Span<const uint8_t> data) {
  for (size_t i = 2; i < ne.size(); ++i)
    if (ne[i] != 1)
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, ": expected a 2-D weight, ne[", i, "] = ", ne[i]));
  auto w = Make(type, ne.size() > 1 ? ne[1] : 1, ne.empty() ? 1 : ne[0], data);
  if (!w.ok()) return absl::Status(w.status().code(), absl::StrCat("tensor ", name, ": ", w.status().message()));
  return w;
}

absl::StatusOr<WeightView> WeightView::FromStack(absl::string_view name, formats::GgmlType type,
                                                 absl::Span<const int64_t> ne, absl::Span<const uint8_t> data) {
  if (ne.size() != 3)
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, ": expected a 3-D stack of matrices, rank ", ne.size()));
  auto w = Make(type, ne[1] * ne[2], ne[0], data);
  if (!w.ok()) return absl::Status(w.status().code(), absl::StrCat("tensor ", name, ": ", w.status().message()));
  return w;
}

WeightView WeightView::F32(const float* data, int64_t rows, int64_t cols) {
  WeightView w;
  w.type = GgmlType::kF32;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = static_cast<uint64_t>(cols) * sizeof(float);
  w.data = reinterpret_cast<const uint8_t*>(data);
  return w;
}

absl::StatusOr<const float*> RowAsF32(const WeightView& w, int64_t r, std::vector<float>& buf) {
  const uint8_t* p = w.Row(r);
  if (w.type == GgmlType::kF32 && r >= 0 && r < w.rows && reinterpret_cast<uintptr_t>(p) % alignof(float) == 0)
    return reinterpret_cast<const float*>(p);
  buf.resize(static_cast<size_t>(w.cols));
  if (auto st = DequantizeRow(w, r, buf.data()); !st.ok()) return st;
  return buf.data();
}

bool CanDecode(GgmlType type) { return type == GgmlType::kF32 || formats::CanDequantize(type); }

absl::Status DequantizeRow(const WeightView& w, int64_t r, float* dst) {
  if (r < 0 || r >= w.rows) return absl::OutOfRangeError(absl::StrCat("row ", r, " out of range [0, ", w.rows, ")"));
  if (w.type == GgmlType::kF32) {
    std::memcpy(dst, w.Row(r), static_cast<size_t>(w.cols) * sizeof(float));
    return absl::OkStatus();
  }
  return formats::Dequantize(w.type, absl::Span<const uint8_t>(w.Row(r), w.row_bytes),
                             absl::Span<float>(dst, static_cast<size_t>(w.cols)));
}

absl::StatusOr<DenseWeight> DenseWeight::FromView(const WeightView& w) {
  if (!CanDecode(w.type))
    return absl::UnimplementedError(absl::StrCat("no dequantizer for type ", formats::GgmlTypeName(w.type)));
  DenseWeight d;
  d.rows_ = w.rows;
  d.cols_ = w.cols;
  d.values_.resize(static_cast<size_t>(w.rows * w.cols));
  if (w.type == GgmlType::kF32) {
    std::memcpy(d.values_.data(), w.data, d.values_.size() * sizeof(float));
  } else if (!d.values_.empty()) {
    // Rows are stored back to back, so the whole matrix decodes in one call.
    auto st = formats::Dequantize(w.type, absl::Span<const uint8_t>(w.data, w.row_bytes * w.rows),
                                  absl::Span<float>(d.values_));
    if (!st.ok()) return st;
  }
  return d;
}

}  // namespace memra::kernels::cpu
