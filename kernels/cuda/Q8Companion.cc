#include "kernels/cuda/Q8Companion.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ir/ResultBuffer.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/GemvQuant.h"
#include "kernels/cuda/GpuOpRegistry.h"

namespace memra::kernels::cuda {
namespace {

constexpr const char* kResult = ir::kQ8CompanionAttr;
constexpr const char* kAt = ir::kQ8CompanionAtAttr;
constexpr const char* kBytes = ir::kQ8CompanionBytesAttr;

int64_t Align256(int64_t b) { return (b + 255) / 256 * 256; }

// [rows, cols] of a static f32 result (nullopt otherwise).
std::optional<std::pair<int64_t, int64_t>> RowsCols(const ir::Value& v) {
  if (v.dtype() != ir::DType::kF32 || v.rank() < 1) return std::nullopt;
  const std::optional<int64_t> n = v.shape().NumElements();
  const ir::Dim& last = v.shape()[v.rank() - 1];
  if (!n || !last.IsConstant() || last.value() <= 0) return std::nullopt;
  return std::make_pair(*n / last.value(), last.value());
}

}  // namespace

std::optional<Q8Companion> Q8CompanionLayout(unsigned result, int64_t rows, int64_t cols) {
  if (cols <= 0 || cols % 32 != 0 || rows < 1 || rows > (int64_t{1} << 31) / cols) return std::nullopt;
  Q8Companion c;
  c.result = result;
  c.rows = rows;
  c.cols = cols;
  c.elems = rows * cols;
  c.at = Align256(rows * cols * 4);
  c.bytes = GemvQuantXBytes(rows, cols);
  return c;
}

std::optional<Q8Companion> Q8CompanionOf(const ir::Op& producer) {
  const std::optional<int64_t> i = producer.attrs().GetI64(kResult);
  if (!i || *i < 0 || *i >= static_cast<int64_t>(producer.num_results())) return std::nullopt;
  const std::optional<std::pair<int64_t, int64_t>> rc = RowsCols(*producer.result(static_cast<unsigned>(*i)));
  if (!rc) return std::nullopt;
  std::optional<Q8Companion> c = Q8CompanionLayout(static_cast<unsigned>(*i), rc->first, rc->second);
  // The recorded offset and size must be the layout's: a record from another layout is not read.
  if (!c || producer.attrs().GetI64(kAt) != c->at || producer.attrs().GetI64(kBytes) != c->bytes) return std::nullopt;
  return c;
}

std::optional<Q8Companion> Q8CompanionOfValue(const ir::Value& v) {
  const ir::Value* r = &v;
  while (r->kind() == ir::Value::Kind::kResult && r->def() != nullptr && r->def()->is(ir::OpKind::kReshape) &&
         r->def()->num_operands() == 1)
    r = r->def()->operand(0);
  if (r->kind() != ir::Value::Kind::kResult || r->def() == nullptr) return std::nullopt;
  std::optional<Q8Companion> c = Q8CompanionOf(*r->def());
  if (!c || c->result != r->index() || v.shape().NumElements() != c->elems) return std::nullopt;
  return c;
}

void WriteQ8Companion(const Q8Companion& c, ir::Op& producer) {
  producer.attrs().Set(kResult, static_cast<int64_t>(c.result));
  producer.attrs().Set(kAt, c.at);
  producer.attrs().Set(kBytes, c.bytes);
}

bool HasQ8CompanionRecord(const ir::Op& op) {
  return op.attrs().Has(kResult) || op.attrs().Has(kAt) || op.attrs().Has(kBytes);
}

void EraseQ8Companion(ir::Op& producer) {
  producer.attrs().Erase(kResult);
  producer.attrs().Erase(kAt);
  producer.attrs().Erase(kBytes);
}

void AddQ8CompanionDefines(const Q8Companion& c, Launch& l) {
  Defines d = l.kernel.module.defines;
  d.push_back(Def("MEMRA_Q8X_OFF", c.at));
  d.push_back(Def("MEMRA_Q8X_ELEMS", c.elems));
  l.kernel.module.defines = MakeDefines(std::move(d));
}

std::optional<int64_t> Q8CompanionDefine(const Launch& l) {
  for (const auto& [name, value] : l.kernel.module.defines) {
    int64_t x = 0;
    if (name == "MEMRA_Q8X_OFF" && absl::SimpleAtoi(value, &x)) return x;
  }
  return std::nullopt;
}

absl::Status CheckQ8CompanionBinding(const BindContext& c, int64_t elems) {
  const std::optional<Q8Companion> q8 = Q8CompanionOf(c.op());
  bool writes = false, other = false;
  for (const Launch& l : c.selection().launches) {
    const std::optional<int64_t> at = Q8CompanionDefine(l);
    writes |= q8 && at == q8->at;
    other |= at && (!q8 || *at != q8->at);
  }
  if (other || (q8 && !writes))
    return BindError(c.op(), "stale selection: its kernels and its q8 companion record disagree");
  if (q8 && elems > q8->elems)
    return BindError(c.op(), absl::StrCat(elems, " values, its q8 companion holds ", q8->elems));
  return absl::OkStatus();
}

std::optional<uint64_t> Q8CompanionAddress(const BindContext& c, unsigned i) {
  if (i >= c.op().num_operands()) return std::nullopt;
  const std::optional<Q8Companion> q8 = Q8CompanionOfValue(*c.op().operand(i));
  if (!q8) return std::nullopt;
  return c.In(i) + static_cast<uint64_t>(q8->at);
}

int CountQ8Launches(const OpSelection& s) {
  return static_cast<int>(std::count_if(s.launches.begin(), s.launches.end(),
                                        [](const Launch& l) { return l.kernel.entry == "gemv_q_quantize_x"; }));
}

absl::StatusOr<int64_t> PairQ8Companions(const std::vector<ir::Op*>& ops, const std::vector<OpShapes>& shapes,
                                         std::vector<OpSelection>& selections, const Target& target,
                                         const SelectOptions& options, bool row_programs) {
  if (ops.size() != shapes.size() || ops.size() != selections.size())
    return absl::InternalError("PairQ8Companions: ops, shapes and selections differ in length");
  absl::flat_hash_map<const ir::Op*, size_t> index;
  for (size_t i = 0; i < ops.size(); ++i) index[ops[i]] = i;
  int64_t spared = 0;
  for (size_t p = 0; p < ops.size(); ++p) {
    ir::Op& producer = *ops[p];
    if (!row_programs && producer.is(ir::OpKind::kFusedRows)) continue;
    for (unsigned r = 0; r < producer.num_results(); ++r) {
      const ir::Value& v = *producer.result(r);
      const std::optional<std::pair<int64_t, int64_t>> rc = RowsCols(v);
      if (!rc) continue;
      const std::optional<Q8Companion> c = Q8CompanionLayout(r, rc->first, rc->second);
      if (!c) continue;
      // The users whose selection quantizes an x today (the products reading v, or a reshape of
      // it, among them).
      std::vector<size_t> users;
      std::vector<const ir::Value*> views = {&v};
      while (!views.empty()) {
        const ir::Value* w = views.back();
        views.pop_back();
        for (const ir::Use& u : w->uses()) {
          if (u.user->is(ir::OpKind::kReshape) && u.user->num_results() == 1) {
            views.push_back(u.user->result(0));
            continue;
          }
          auto it = index.find(u.user);
          if (it == index.end() || CountQ8Launches(selections[it->second]) == 0) continue;
          if (std::find(users.begin(), users.end(), it->second) == users.end()) users.push_back(it->second);
        }
      }
      if (users.empty()) continue;
      WriteQ8Companion(*c, producer);
      absl::StatusOr<OpSelection> ps = SelectGpuOp(producer, shapes[p], target, options);
      const bool writes = ps.ok() && std::any_of(ps->launches.begin(), ps->launches.end(),
                                                 [&](const Launch& l) { return Q8CompanionDefine(l) == c->at; });
      if (!writes) {
        EraseQ8Companion(producer);  // the unit cannot write it: nothing changes
        continue;
      }
      std::vector<OpSelection> now;
      int64_t fewer = 0;
      for (size_t u : users) {
        MEMRA_ASSIGN_OR_RETURN(OpSelection s, SelectGpuOp(*ops[u], shapes[u], target, options));
        fewer += CountQ8Launches(selections[u]) - CountQ8Launches(s);
        now.push_back(std::move(s));
      }
      if (fewer <= 0) {
        EraseQ8Companion(producer);
        continue;
      }
      selections[p] = *std::move(ps);
      for (size_t j = 0; j < users.size(); ++j) selections[users[j]] = std::move(now[j]);
      spared += fewer;
      break;  // one companion an op
    }
  }
  return spared;
}

}  // namespace memra::kernels::cuda
