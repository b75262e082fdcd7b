// A view of a 2-D weight matrix in any ggml storage type, as the CPU kernels consume it.
//
// Layout follows ggml/GGUF: a tensor with ne {cols, rows} stores `rows` rows of `cols` elements,
// each row encoded independently in `type` (row_bytes apiece, rows back to back). For a
// projection weight {K, N} a row is one output feature's K input weights, so y = x · Wᵀ.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/formats/GgmlType.h"

namespace memra::kernels::cpu {

struct WeightView {
  formats::GgmlType type = formats::GgmlType::kF32;
  int64_t rows = 0;  // ne1 (N output features / vocabulary entries)
  int64_t cols = 0;  // ne0 (K, the contiguous dimension)
  uint64_t row_bytes = 0;
  const uint8_t* data = nullptr;  // rows * row_bytes bytes

  // The weight of a tensor with ne {cols, rows} (ne2.. must be 1; ggml order) stored as `type` in
  // `data`; checks that the byte size matches. Errors name the tensor.
  static absl::StatusOr<WeightView> FromTensor(absl::string_view name, formats::GgmlType type,
                                               absl::Span<const int64_t> ne, absl::Span<const uint8_t> data);
  // A stack of ne2 matrices {ne0, ne1} (a 3-D expert tensor, ne {K, N, E}) as one view of
  // N * E rows of K: matrix e's row r is row e * N + r (ggml stores the experts back to back).
  static absl::StatusOr<WeightView> FromStack(absl::string_view name, formats::GgmlType type,
                                              absl::Span<const int64_t> ne, absl::Span<const uint8_t> data);
  // A view over a plain f32 buffer [rows][cols] (not owned).
  static WeightView F32(const float* data, int64_t rows, int64_t cols);
  // A view over raw encoded bytes; checks row geometry and the byte count.
  static absl::StatusOr<WeightView> Make(formats::GgmlType type, int64_t rows, int64_t cols,
                                         absl::Span<const uint8_t> bytes);

  const uint8_t* Row(int64_t r) const { return data + static_cast<uint64_t>(r) * row_bytes; }
};

// Decodes row `r` of `w` into dst[0..w.cols). F32 rows are copied; other types go through
// formats::Dequantize. Errors: unsupported type, r out of range.
absl::Status DequantizeRow(const WeightView& w, int64_t r, float* dst);

// Row r of w as f32: a pointer into the weight itself for aligned F32 data, else decoded into
// `buf` (resized to w.cols). Errors as DequantizeRow.
absl::StatusOr<const float*> RowAsF32(const WeightView& w, int64_t r, std::vector<float>& buf);

// Whether rows of `type` can be decoded by DequantizeRow.
bool CanDecode(formats::GgmlType type);

// A weight dequantized once to f32 (the "dequantize at load" strategy). view() is an F32
// WeightView over the owned buffer.
class DenseWeight {
 public:
  static absl::StatusOr<DenseWeight> FromView(const WeightView& w);
  WeightView view() const { return WeightView::F32(values_.data(), rows_, cols_); }
  const std::vector<float>& values() const { return values_; }

 private:
  std::vector<float> values_;
  int64_t rows_ = 0, cols_ = 0;
};

}  // namespace memra::kernels::cpu
