#include "ir/OpKind.h"

#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace memra::ir {
namespace {

using namespace op_flags;  // NOLINT: the flags of Ops.def

struct RawOp {
  OpKind kind;
  const char* mnemonic;
  const char* operands;
  const char* results;
  const char* attrs;
  uint32_t flags;
};

constexpr RawOp kRawOps[] = {
#define MEMRA_OP(id, mnemonic, operands, results, attrs, flags) \
  {OpKind::k##id, mnemonic, operands, results, attrs, flags},
#include "ir/Ops.def"
#undef MEMRA_OP
};

// Every `name:role` of Ops.def names a known role: checked at compile time, so a misspelt role
// cannot silently become an activation.
constexpr bool IsKnownRole(std::string_view role) {
  return role == "act" || role == "weight" || role == "matrix" || role == "state" || role == "value";
}
constexpr bool RolesAreKnown(std::string_view operands) {
  while (!operands.empty()) {
    const size_t comma = operands.find(',');
    std::string_view item = operands.substr(0, comma);
    operands = comma == std::string_view::npos ? std::string_view() : operands.substr(comma + 1);
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view role = item.substr(colon + 1);
    while (!role.empty() && (role.back() == '?' || role.back() == '.' || role.back() == ' ')) role.remove_suffix(1);
    if (!IsKnownRole(role)) return false;
  }
  return true;
}
constexpr bool AllRolesAreKnown() {
  for (const RawOp& raw : kRawOps)
    if (!RolesAreKnown(raw.operands)) return false;
  return true;
}
static_assert(AllRolesAreKnown(), "ir/Ops.def: an operand role is not act, weight, matrix, state or value");

std::vector<std::string> SplitList(absl::string_view s) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(s, ',', absl::SkipWhitespace()))
    out.emplace_back(absl::StripAsciiWhitespace(part));
  return out;
}

AttrKind ParseKind(absl::string_view k) {
  if (k == "i64") return AttrKind::kI64;
  if (k == "f64") return AttrKind::kF64;
  if (k == "str") return AttrKind::kString;
  if (k == "i64[]") return AttrKind::kI64Array;
  if (k == "f64[]") return AttrKind::kF64Array;
  if (k == "str[]") return AttrKind::kStringArray;
  return AttrKind::kString;  // Ops.def is checked by the IrOps unit test
}

std::vector<OpInfo> BuildTable() {
  std::vector<OpInfo> table;
  for (const RawOp& raw : kRawOps) {
    OpInfo info;
    info.kind = raw.kind;
    info.mnemonic = raw.mnemonic;
    info.flags = raw.flags;
    for (std::string spec : SplitList(raw.operands)) {
      OperandSpec op;
      absl::string_view s = spec;
      if (absl::ConsumeSuffix(&s, "?")) op.optional = true;
      if (absl::ConsumeSuffix(&s, "...")) op.variadic = true;
      std::vector<std::string> parts = absl::StrSplit(s, ':');
      op.name = parts[0];
      if (parts.size() > 1) {
        if (parts[1] == "weight")
          op.role = OperandRole::kWeight;
        else if (parts[1] == "matrix")
          op.role = OperandRole::kMatrix;
        else if (parts[1] == "state")
          op.role = OperandRole::kState;
        else if (parts[1] == "value")
          op.role = OperandRole::kValue;
      }
      info.operands.push_back(op);
    }
    for (std::string r : SplitList(raw.results)) {
      absl::string_view s = r;
      if (absl::ConsumeSuffix(&s, "...")) info.variadic_results = true;
      info.results.emplace_back(s);
    }
    for (std::string a : SplitList(raw.attrs)) {
      AttrSpec spec;
      absl::string_view s = a;
      if (absl::ConsumePrefix(&s, "?")) spec.optional = true;
      std::vector<std::string> parts = absl::StrSplit(s, ':');
      spec.name = parts[0];
      spec.kind = ParseKind(parts.size() > 1 ? parts[1] : "str");
      info.attrs.push_back(spec);
    }
    table.push_back(std::move(info));
  }
  return table;
}

const std::vector<OpInfo>& Table() {
  static const std::vector<OpInfo>* table = new std::vector<OpInfo>(BuildTable());
  return *table;
}

}  // namespace

absl::string_view OperandRoleName(OperandRole r) {
  switch (r) {
    case OperandRole::kAct:
      return "activation";
    case OperandRole::kWeight:
      return "weight";
    case OperandRole::kMatrix:
      return "matrix weight";
    case OperandRole::kState:
      return "state";
    case OperandRole::kValue:
      return "activation or weight";
  }
  return "?";
}

int OpInfo::min_operands() const {
  int n = 0;
  for (const auto& o : operands)
    if (!o.optional) ++n;
  return n;
}

int OpInfo::max_operands() const {
  if (variadic_operands()) return -1;
  return static_cast<int>(operands.size());
}

const OperandSpec* OpInfo::operand_spec(size_t i) const {
  if (i < operands.size()) return &operands[i];
  if (variadic_operands()) return &operands.back();
  return nullptr;
}

const AttrSpec* OpInfo::attr_spec(absl::string_view name) const {
  for (const auto& a : attrs)
    if (a.name == name) return &a;
  return nullptr;
}

const OpInfo& InfoOf(OpKind kind) { return Table()[static_cast<size_t>(kind)]; }

bool IsMatrixOperand(OpKind kind, unsigned operand_index) {
  const OperandSpec* spec = InfoOf(kind).operand_spec(operand_index);
  return spec != nullptr && spec->role == OperandRole::kMatrix;
}
absl::string_view Mnemonic(OpKind kind) { return InfoOf(kind).mnemonic; }
int NumOpKinds() { return static_cast<int>(Table().size()); }

std::optional<OpKind> LookupOpKind(absl::string_view mnemonic) {
  for (const OpInfo& info : Table())
    if (info.mnemonic == mnemonic) return info.kind;
  return std::nullopt;
}

}  // namespace memra::ir
