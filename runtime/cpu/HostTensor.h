// A host tensor of the CPU executor: dtype, concrete shape (row-major, last dim contiguous) and
// shared storage (f32 for float activations, i32 for ids/positions, i64 for the rng state).
// Copies share the storage; ops never write an input, so aliasing (reshape) is safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "ir/DType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace memra::runtime {

class HostTensor {
 public:
  HostTensor() = default;
  // Zero-filled tensor of `dtype` (f32, i32 or i64) and `shape`.
  static HostTensor Zeros(ir::DType dtype, llvm::ArrayRef<int64_t> shape);
  static HostTensor FromF32(std::vector<float> values, llvm::ArrayRef<int64_t> shape);
  static HostTensor FromI32(std::vector<int32_t> values, llvm::ArrayRef<int64_t> shape);

  ir::DType dtype() const { return dtype_; }
  llvm::ArrayRef<int64_t> shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i < 0 ? i + rank() : i]; }
  int64_t numel() const;
  bool valid() const { return storage_ != nullptr; }

  float* f32() { return storage_->f32.data(); }
  const float* f32() const { return storage_->f32.data(); }
  int32_t* i32() { return storage_->i32.data(); }
  const int32_t* i32() const { return storage_->i32.data(); }
  int64_t* i64() { return storage_->i64.data(); }
  const int64_t* i64() const { return storage_->i64.data(); }
  absl::Span<const float> f32_span() const { return {f32(), static_cast<size_t>(numel())}; }
  absl::Span<const int32_t> i32_span() const { return {i32(), static_cast<size_t>(numel())}; }

  // The same storage under another shape with the same element count.
  HostTensor Reshaped(llvm::ArrayRef<int64_t> shape) const;
  std::string ShapeString() const;  // "f32[48, 256]"

 private:
  struct Storage {
    std::vector<float> f32;
    std::vector<int32_t> i32;
    std::vector<int64_t> i64;
  };
  ir::DType dtype_ = ir::DType::kF32;
  llvm::SmallVector<int64_t, 4> shape_;
  std::shared_ptr<Storage> storage_;
};

}  // namespace memra::runtime
