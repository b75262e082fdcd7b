#include "ir/Shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace memra::ir {

Dim Dim::Symbol(absl::string_view name, int64_t coeff, int64_t offset) {
  Dim d;
  d.symbol_ = std::string(name);
  d.coeff_ = coeff;
  d.offset_ = offset;
  if (coeff == 0) d.symbol_.clear();
  return d;
}

Dim Dim::Plus(int64_t k) const {
  Dim d = *this;
  d.offset_ += k;
  return d;
}

Dim Dim::Times(int64_t k) const {
  Dim d = *this;
  d.coeff_ *= k;
  d.offset_ *= k;
  if (d.coeff_ == 0) d.symbol_.clear();
  return d;
}

std::optional<int64_t> Dim::Evaluate(const SymbolBindings& bindings) const {
  if (IsConstant()) return offset_;
  auto it = bindings.find(symbol_);
  if (it == bindings.end()) return std::nullopt;
  return coeff_ * it->second + offset_;
}

Dim Dim::Substitute(const SymbolBindings& bindings) const {
  if (IsConstant()) return Dim(offset_);
  auto it = bindings.find(symbol_);
  if (it == bindings.end()) return *this;
  return Dim(coeff_ * it->second + offset_);
}

std::string Dim::ToString() const {
  if (IsConstant()) return absl::StrCat(offset_);
  std::string s;
  if (coeff_ == -1)
    s = "-";
  else if (coeff_ != 1)
    s = absl::StrCat(coeff_, "*");
  absl::StrAppend(&s, symbol_);
  if (offset_ > 0) absl::StrAppend(&s, "+", offset_);
  if (offset_ < 0) absl::StrAppend(&s, offset_);
  return s;
}

bool Dim::operator==(const Dim& o) const {
  if (IsConstant() != o.IsConstant()) return false;
  if (IsConstant()) return offset_ == o.offset_;
  return symbol_ == o.symbol_ && coeff_ == o.coeff_ && offset_ == o.offset_;
}

bool Shape::IsStatic() const {
  for (const Dim& d : dims_)
    if (!d.IsConstant()) return false;
  return true;
}

std::optional<int64_t> Shape::NumElements() const { return NumElements(SymbolBindings()); }

std::optional<int64_t> Shape::NumElements(const SymbolBindings& bindings) const {
  int64_t n = 1;
  for (const Dim& d : dims_) {
    std::optional<int64_t> v = d.Evaluate(bindings);
    if (!v) return std::nullopt;
    n *= *v;
  }
  return n;
}

bool Shape::SameNumElements(const Shape& a, const Shape& b) {
  llvm::SmallVector<std::string, 4> syms;
  a.CollectSymbols(syms);
  b.CollectSymbols(syms);
  // A polynomial identity in at most rank-many factors per symbol: evaluating at more points
  // than the degree (per symbol, with distinct values) decides it. Use 3 points with
  // per-symbol distinct primes, enough for the degrees that occur (products of ranks <= 8).
  static const int64_t kPrimes[] = {7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53};
  for (int trial = 0; trial < 9; ++trial) {
    SymbolBindings bind;
    for (size_t i = 0; i < syms.size(); ++i) bind[syms[i]] = kPrimes[(trial + 3 * i) % 13] + trial * 101;
    if (a.NumElements(bind) != b.NumElements(bind)) return false;
  }
  return true;
}

Shape Shape::Substitute(const SymbolBindings& bindings) const {
  Shape s;
  for (const Dim& d : dims_) s.push_back(d.Substitute(bindings));
  return s;
}

void Shape::CollectSymbols(llvm::SmallVectorImpl<std::string>& out) const {
  for (const Dim& d : dims_) {
    if (d.IsConstant()) continue;
    if (std::find(out.begin(), out.end(), d.symbol()) == out.end()) out.push_back(d.symbol());
  }
}

Shape Shape::Prefix(int64_t n) const { return Shape(llvm::ArrayRef<Dim>(dims_).take_front(n)); }

Shape Shape::WithDim(int64_t i, Dim d) const {
  Shape s = *this;
  s[i] = std::move(d);
  return s;
}

std::string Shape::ToString() const {
  return absl::StrCat(
      "[", absl::StrJoin(dims_, ", ", [](std::string* out, const Dim& d) { out->append(d.ToString()); }), "]");
}

std::string TensorType::ToString() const { return absl::StrCat(DTypeName(dtype), shape.ToString()); }

}  // namespace memra::ir
