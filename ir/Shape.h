// Shapes with symbolic dimensions, and the tensor type (dtype + shape) of IR values.
//
// Layout convention of the whole IR: shapes are row-major, outermost dimension first, the last
// dimension contiguous (numpy order). Activations put tokens first: [T, 4096], per-head
// [T, n_head, head_dim]. Weights are declared in the same order, which is ggml's `ne` reversed:
// ggml ne {256, 512} (ne0 = 256 contiguous) is the IR shape [512, 256].
//
// A dimension is `coeff * symbol + offset` or a constant. Symbols are identifiers: `T` (tokens
// in this call), `P` (past length), `B` (sequences), or any other name. Bucket specialization
// substitutes constants for symbols.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "ir/DType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace memra::ir {

using SymbolBindings = absl::flat_hash_map<std::string, int64_t>;

class Dim {
 public:
  Dim() = default;
  Dim(int64_t value) : offset_(value) {}  // NOLINT: constants convert implicitly
  static Dim Symbol(absl::string_view name, int64_t coeff = 1, int64_t offset = 0);

  bool IsConstant() const { return symbol_.empty() || coeff_ == 0; }
  bool IsSymbolic() const { return !IsConstant(); }
  // The constant value; only meaningful when IsConstant().
  int64_t value() const { return offset_; }
  const std::string& symbol() const { return symbol_; }
  int64_t coeff() const { return coeff_; }
  int64_t offset() const { return offset_; }

  // `this + k` / `this * k` (stays affine).
  Dim Plus(int64_t k) const;
  Dim Times(int64_t k) const;
  // Value under `bindings`; nullopt if the symbol is unbound.
  std::optional<int64_t> Evaluate(const SymbolBindings& bindings) const;
  // Replaces bound symbols by constants; unbound symbols stay.
  Dim Substitute(const SymbolBindings& bindings) const;

  std::string ToString() const;  // "4096", "T", "T+3", "2*T-1"
  bool operator==(const Dim& o) const;
  bool operator!=(const Dim& o) const { return !(*this == o); }
  template <typename H>
  friend H AbslHashValue(H h, const Dim& d) {
    return H::combine(std::move(h), d.IsConstant() ? std::string() : d.symbol_, d.IsConstant() ? 0 : d.coeff_,
                      d.offset_);
  }

 private:
  std::string symbol_;
  int64_t coeff_ = 0;
  int64_t offset_ = 0;
};

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<Dim> dims) : dims_(dims) {}
  explicit Shape(llvm::ArrayRef<Dim> dims) : dims_(dims.begin(), dims.end()) {}

  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  llvm::ArrayRef<Dim> dims() const { return dims_; }
  const Dim& operator[](int64_t i) const { return dims_[i]; }
  Dim& operator[](int64_t i) { return dims_[i]; }
  const Dim& back() const { return dims_.back(); }
  void push_back(Dim d) { dims_.push_back(std::move(d)); }

  bool IsStatic() const;
  // Product of the dims when all are constant.
  std::optional<int64_t> NumElements() const;
  // Element count under bindings (nullopt if some symbol is unbound).
  std::optional<int64_t> NumElements(const SymbolBindings& bindings) const;
  // Whether both shapes have the same element count for every value of their symbols
  // (checked by evaluating at several symbol assignments; exact for our affine dims).
  static bool SameNumElements(const Shape& a, const Shape& b);
  Shape Substitute(const SymbolBindings& bindings) const;
  // Symbols used, appended to `out` without duplicates.
  void CollectSymbols(llvm::SmallVectorImpl<std::string>& out) const;
  // `dims[0:n]` / with dim i replaced.
  Shape Prefix(int64_t n) const;
  Shape WithDim(int64_t i, Dim d) const;

  std::string ToString() const;  // "[T, 4096]"
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  template <typename H>
  friend H AbslHashValue(H h, const Shape& s) {
    for (const Dim& d : s.dims_) h = H::combine(std::move(h), d);
    return H::combine(std::move(h), s.dims_.size());
  }

 private:
  llvm::SmallVector<Dim, 4> dims_;
};

struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;

  TensorType() = default;
  TensorType(DType d, Shape s) : dtype(d), shape(std::move(s)) {}
  int64_t rank() const { return shape.rank(); }
  std::string ToString() const;  // "f32[T, 4096]"
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
  template <typename H>
  friend H AbslHashValue(H h, const TensorType& t) {
    return H::combine(std::move(h), t.dtype, t.shape);
  }
};

}  // namespace memra::ir
