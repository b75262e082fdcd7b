#include "passes/PassUtil.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace memra::passes {

absl::flat_hash_map<const ir::Op*, int64_t> ProgramOrder(const ir::Function& f) {
  absl::flat_hash_map<const ir::Op*, int64_t> index;
  int64_t i = 0;
  for (const ir::Op* op : f.Ops()) index[op] = i++;
  return index;
}

bool HasSingleUse(const ir::Value* v) { return v->num_uses() == 1; }

ir::Op* DefOf(const ir::Value* v, ir::OpKind kind) {
  if (v == nullptr || v->kind() != ir::Value::Kind::kResult || v->def() == nullptr) return nullptr;
  return v->def()->is(kind) ? v->def() : nullptr;
}

void ReplaceValue(ir::Value* from, ir::Value* to) {
  if (!from->name().empty()) to->set_name(from->name());
  from->ReplaceAllUsesWith(to);
}

std::vector<std::string> SplitListOption(absl::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(text, absl::ByAnyChar(":,"), absl::SkipWhitespace()))
    out.emplace_back(absl::StripAsciiWhitespace(part));
  return out;
}

absl::StatusOr<std::vector<int64_t>> ParseLadder(absl::string_view text) {
  std::vector<int64_t> out;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket ladder \"", text, "\": ", why, " (expected e.g. 16..4096 or 16:32:64)"));
  };
  if (std::vector<std::string> range = absl::StrSplit(text, ".."); range.size() == 2) {
    int64_t lo = 0, hi = 0;
    if (!absl::SimpleAtoi(range[0], &lo) || !absl::SimpleAtoi(range[1], &hi) || lo <= 0 || hi < lo)
      return bad("a range needs 0 < lo <= hi");
    if (hi > kMaxBucket) return bad(absl::StrCat("buckets go up to ", kMaxBucket, " tokens"));
    for (int64_t v = lo; v <= hi; v *= 2) out.push_back(v);
    if (out.back() != hi) out.push_back(hi);
  } else {
    for (const std::string& part : SplitListOption(text)) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(part, &v) || v <= 0) return bad(absl::StrCat("'", part, "' is not a positive integer"));
      if (v > kMaxBucket) return bad(absl::StrCat("buckets go up to ", kMaxBucket, " tokens"));
      out.push_back(v);
    }
  }
  if (out.empty()) return bad("no buckets");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void CopyAttrs(const ir::AttrDict& from, ir::AttrDict& to, std::initializer_list<absl::string_view> names) {
  for (absl::string_view n : names)
    if (const ir::Attr* a = from.Get(n)) to.Set(n, *a);
}

}  // namespace memra::passes
