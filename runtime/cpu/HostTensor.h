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
  // Zero-filled tensor of `dtype` (f32, i32, i64, or f16 / bf16 bits: a 16-bit KV cache) and `shape`.
  static HostTensor Zeros(ir::DType dtype, llvm::ArrayRef<int64_t> shape);
  static HostTensor FromF32(std::vector<float> values, llvm::ArrayRef<int64_t> shape);
  static HostTensor FromI32(std::vector<int32_t> values, llvm::ArrayRef<int64_t> shape);
  // A tensor over memory owned by `owner` (the executor's memory-planned arena): no copy; the
  // memory is reused once the planned lifetime ends.
  static HostTensor View(ir::DType dtype, llvm::ArrayRef<int64_t> shape, std::shared_ptr<void> owner, void* data);
  // A copy with storage of its own.
  HostTensor Clone() const;
  // The elements' bytes and their count.
  const void* data() const;
  void* mutable_data();
  int64_t nbytes() const;

  ir::DType dtype() const { return dtype_; }
  llvm::ArrayRef<int64_t> shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i < 0 ? i + rank() : i]; }
  int64_t numel() const;
  bool valid() const { return storage_ != nullptr || view_ != nullptr; }

  float* f32() { return view_ ? static_cast<float*>(view_) : storage_->f32.data(); }
  const float* f32() const { return view_ ? static_cast<const float*>(view_) : storage_->f32.data(); }
  int32_t* i32() { return view_ ? static_cast<int32_t*>(view_) : storage_->i32.data(); }
  const int32_t* i32() const { return view_ ? static_cast<const int32_t*>(view_) : storage_->i32.data(); }
  int64_t* i64() { return view_ ? static_cast<int64_t*>(view_) : storage_->i64.data(); }
  const int64_t* i64() const { return view_ ? static_cast<const int64_t*>(view_) : storage_->i64.data(); }
  absl::Span<const float> f32_span() const { return {f32(), static_cast<size_t>(numel())}; }
  absl::Span<const int32_t> i32_span() const { return {i32(), static_cast<size_t>(numel())}; }

  // The same storage under another shape with the same element count.
  HostTensor Reshaped(llvm::ArrayRef<int64_t> shape) const;
  std::string ShapeString() const;  // "f32[48, 256]"

 private:
  bool Is16Bit() const;
  struct Storage {
    std::vector<float> f32;
    std::vector<int32_t> i32;
    std::vector<int64_t> i64;
    std::vector<uint16_t> u16;    // f16 / bf16 bits
    std::vector<uint8_t> blocks;  // quantized blocks (a q8_0 KV cache)
  };
  ir::DType dtype_ = ir::DType::kF32;
  llvm::SmallVector<int64_t, 4> shape_;
  std::shared_ptr<Storage> storage_;
  std::shared_ptr<void> view_owner_;  // a View's memory
  void* view_ = nullptr;
};

}  // namespace memra::runtime
