#include "runtime/cpu/HostTensor.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace memra::runtime {

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

HostTensor HostTensor::Zeros(ir::DType dtype, llvm::ArrayRef<int64_t> shape) {
  HostTensor t;
  t.dtype_ = dtype;
  t.shape_.assign(shape.begin(), shape.end());
  t.storage_ = std::make_shared<Storage>();
  const size_t n = static_cast<size_t>(t.numel());
  if (dtype == ir::DType::kI32)
    t.storage_->i32.assign(n, 0);
  else if (dtype == ir::DType::kI64)
    t.storage_->i64.assign(n, 0);
  else if (dtype == ir::DType::kF16 || dtype == ir::DType::kBF16)
    t.storage_->u16.assign(n, 0);
  else if (ir::IsQuantized(dtype))
    t.storage_->blocks.assign(static_cast<size_t>(ir::StorageBytes(dtype, t.numel()).value_or(0)), 0);
  else
    t.storage_->f32.assign(n, 0.0f);
  return t;
}

HostTensor HostTensor::FromF32(std::vector<float> values, llvm::ArrayRef<int64_t> shape) {
  HostTensor t;
  t.dtype_ = ir::DType::kF32;
  t.shape_.assign(shape.begin(), shape.end());
  t.storage_ = std::make_shared<Storage>();
  t.storage_->f32 = std::move(values);
  return t;
}

HostTensor HostTensor::FromI32(std::vector<int32_t> values, llvm::ArrayRef<int64_t> shape) {
  HostTensor t;
  t.dtype_ = ir::DType::kI32;
  t.shape_.assign(shape.begin(), shape.end());
  t.storage_ = std::make_shared<Storage>();
  t.storage_->i32 = std::move(values);
  return t;
}

HostTensor HostTensor::View(ir::DType dtype, llvm::ArrayRef<int64_t> shape, std::shared_ptr<void> owner, void* data) {
  HostTensor t;
  t.dtype_ = dtype;
  t.shape_.assign(shape.begin(), shape.end());
  t.view_owner_ = std::move(owner);
  t.view_ = data;
  return t;
}

const void* HostTensor::data() const {
  if (view_) return view_;
  if (dtype_ == ir::DType::kI32) return i32();
  if (dtype_ == ir::DType::kI64) return i64();
  if (Is16Bit()) return storage_->u16.data();
  if (ir::IsQuantized(dtype_)) return storage_->blocks.data();
  return f32();
}

void* HostTensor::mutable_data() { return const_cast<void*>(static_cast<const HostTensor*>(this)->data()); }

bool HostTensor::Is16Bit() const { return dtype_ == ir::DType::kF16 || dtype_ == ir::DType::kBF16; }

int64_t HostTensor::nbytes() const {
  if (ir::IsQuantized(dtype_)) return ir::StorageBytes(dtype_, numel()).value_or(0);
  return numel() * (dtype_ == ir::DType::kI64 ? 8 : Is16Bit() ? 2 : 4);
}

HostTensor HostTensor::Clone() const {
  HostTensor t = Zeros(dtype_, shape_);
  std::memcpy(const_cast<void*>(t.data()), data(), static_cast<size_t>(nbytes()));
  return t;
}

HostTensor HostTensor::Reshaped(llvm::ArrayRef<int64_t> shape) const {
  HostTensor t = *this;
  t.shape_.assign(shape.begin(), shape.end());
  return t;
}

std::string HostTensor::ShapeString() const {
  return absl::StrCat(ir::DTypeName(dtype_), "[", absl::StrJoin(shape_, ", "), "]");
}

}  // namespace memra::runtime
