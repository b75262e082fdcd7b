#include "ir/RowProgram.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ir/Attribute.h"
#include "ir/StatusMacros.h"

namespace memra::ir {
namespace {

struct OpcodeInfo {
  RowOpcode opcode;
  const char* name;
  int rows;           // row operands (1 or 2)
  bool weight;        // a weight operand after the rows (rms_norm: may be `_`)
  bool has_constant;  // a number last
};
constexpr OpcodeInfo kOpcodes[] = {
    {RowOpcode::kRmsNorm, "rms_norm", 1, true, true}, {RowOpcode::kAdd, "add", 2, false, false},
    {RowOpcode::kMul, "mul", 2, false, false},        {RowOpcode::kMulWeight, "mul_weight", 1, true, false},
    {RowOpcode::kScale, "scale", 1, false, true},     {RowOpcode::kTanh, "tanh", 1, false, false},
};

const OpcodeInfo& Info(RowOpcode op) {
  for (const OpcodeInfo& i : kOpcodes)
    if (i.opcode == op) return i;
  return kOpcodes[0];
}

std::string RefString(const RowRef& r) {
  switch (r.kind) {
    case RowRef::kInput:
      return absl::StrCat("a", r.index);
    case RowRef::kTemp:
      return absl::StrCat("t", r.index);
    case RowRef::kNone:
      break;
  }
  return "_";
}

absl::Status Error(absl::string_view where, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("row program: ", where, ": ", why));
}

// `aK` (K < num_inputs), `tI` (I < defined) or, when allowed, `_`.
absl::StatusOr<RowRef> ParseRef(absl::string_view s, int num_inputs, int defined, bool allow_none,
                                absl::string_view where) {
  s = absl::StripAsciiWhitespace(s);
  if (allow_none && s == "_") return RowRef{};
  int index = -1;
  if (s.size() < 2 || (s[0] != 'a' && s[0] != 't') || !absl::SimpleAtoi(s.substr(1), &index) || index < 0)
    return Error(where, absl::StrCat("'", s, "' is not a value (aK, an operand, or tI, a result)"));
  if (s[0] == 'a') {
    if (index >= num_inputs) return Error(where, absl::StrCat("'", s, "': the op has ", num_inputs, " operands"));
    return RowRef::Input(index);
  }
  if (index >= defined) return Error(where, absl::StrCat("'", s, "' is used before it is defined"));
  return RowRef::Temp(index);
}

}  // namespace

absl::string_view RowOpcodeName(RowOpcode op) { return Info(op).name; }

std::string RowProgram::ToString() const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < instrs.size(); ++i) {
    const RowInstr& in = instrs[i];
    const OpcodeInfo& info = Info(in.opcode);
    std::vector<std::string> args = {RefString(in.a)};
    if (info.rows == 2 || info.weight) args.push_back(RefString(in.b));
    if (info.has_constant) args.push_back(FormatDouble(in.constant));
    parts.push_back(absl::StrCat("t", i, " = ", info.name, "(", absl::StrJoin(args, ", "), ")"));
  }
  std::vector<std::string> ys;
  for (const RowRef& y : yields) ys.push_back(RefString(y));
  parts.push_back(absl::StrCat("yield ", absl::StrJoin(ys, ", ")));
  return absl::StrJoin(parts, "; ");
}

absl::StatusOr<RowProgram> RowProgram::Parse(absl::string_view text, int num_inputs) {
  if (num_inputs > kMaxRowInputs)
    return Error("the op", absl::StrCat("has ", num_inputs, " operands, more than ", kMaxRowInputs));
  RowProgram p;
  std::vector<absl::string_view> stmts = absl::StrSplit(text, ';');
  for (size_t si = 0; si < stmts.size(); ++si) {
    absl::string_view st = absl::StripAsciiWhitespace(stmts[si]);
    const std::string where = absl::StrCat("statement ", si + 1, " '", st, "'");
    if (absl::ConsumePrefix(&st, "yield")) {
      if (si + 1 != stmts.size()) return Error(where, "yield must be the last statement");
      for (absl::string_view y : absl::StrSplit(st, ',')) {
        MEMRA_ASSIGN_OR_RETURN(RowRef r, ParseRef(y, num_inputs, static_cast<int>(p.instrs.size()), false, where));
        for (const RowRef& seen : p.yields)
          if (seen == r) return Error(where, absl::StrCat("'", RefString(r), "' is yielded twice"));
        p.yields.push_back(r);
      }
      if (p.yields.empty()) return Error(where, "yields nothing");
      if (p.yields.size() > kMaxRowYields)
        return Error(where, absl::StrCat("yields ", p.yields.size(), " values, more than ", kMaxRowYields));
      return p;
    }
    const size_t eq = st.find('=');
    if (eq == absl::string_view::npos) return Error(where, "expected `tI = op(...)` or `yield ...`");
    if (p.instrs.size() == kMaxRowInstrs)
      return Error(where, absl::StrCat("more than ", kMaxRowInstrs, " instructions"));
    const std::string want = absl::StrCat("t", p.instrs.size());
    if (absl::StripAsciiWhitespace(st.substr(0, eq)) != want)
      return Error(where, absl::StrCat("results are numbered in order: expected ", want));
    absl::string_view call = absl::StripAsciiWhitespace(st.substr(eq + 1));
    const size_t open = call.find('(');
    if (open == absl::string_view::npos || call.back() != ')') return Error(where, "expected op(arguments)");
    const absl::string_view name = absl::StripAsciiWhitespace(call.substr(0, open));
    const OpcodeInfo* info = nullptr;
    for (const OpcodeInfo& i : kOpcodes)
      if (name == i.name) info = &i;
    if (info == nullptr) return Error(where, absl::StrCat("unknown row op '", name, "'"));
    std::vector<absl::string_view> args = absl::StrSplit(call.substr(open + 1, call.size() - open - 2), ',');
    const size_t want_args = info->rows + (info->weight ? 1 : 0) + (info->has_constant ? 1 : 0);
    if (args.size() != want_args)
      return Error(where, absl::StrCat(info->name, " takes ", want_args, " arguments, got ", args.size()));
    RowInstr in;
    in.opcode = info->opcode;
    const int defined = static_cast<int>(p.instrs.size());
    MEMRA_ASSIGN_OR_RETURN(in.a, ParseRef(args[0], num_inputs, defined, false, where));
    if (info->rows == 2 || info->weight) {
      const bool allow_none = in.opcode == RowOpcode::kRmsNorm;
      MEMRA_ASSIGN_OR_RETURN(in.b, ParseRef(args[1], num_inputs, defined, allow_none, where));
      if (info->weight && in.b.kind == RowRef::kTemp)
        return Error(where, absl::StrCat("the weight of ", info->name, " must be an operand (aK)"));
    }
    if (info->has_constant) {
      const absl::string_view c = absl::StripAsciiWhitespace(args.back());
      if (!absl::SimpleAtod(c, &in.constant) || !std::isfinite(in.constant))
        return Error(where, absl::StrCat("'", c, "' is not a finite number"));
    }
    p.instrs.push_back(in);
  }
  return Error("the program", "has no yield");
}

}  // namespace memra::ir
