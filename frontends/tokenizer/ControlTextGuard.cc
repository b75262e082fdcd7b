#include "frontends/tokenizer/ControlTextGuard.h"

#include <algorithm>
#include <functional>
#include <utility>

namespace memra::tokenizer {
namespace {

// UTF-8 of U+E000 (opens a placeholder), U+E001 (closes it) and U+E010 + d (digit d).
constexpr absl::string_view kOpen = "\xEE\x80\x80";
constexpr absl::string_view kClose = "\xEE\x80\x81";
constexpr char kDigitLead0 = '\xEE', kDigitLead1 = '\x80';
constexpr unsigned char kDigitBase = 0x90;

void AppendPlaceholder(int index, std::string* out) {
  out->append(kOpen.data(), kOpen.size());
  const std::string digits = std::to_string(index);
  for (char d : digits) {
    out->push_back(kDigitLead0);
    out->push_back(kDigitLead1);
    out->push_back(static_cast<char>(kDigitBase + (d - '0')));
  }
  out->append(kClose.data(), kClose.size());
}

}  // namespace

ControlTextGuard::ControlTextGuard(std::vector<std::string> control_texts) {
  texts_.emplace_back(kOpen);
  for (std::string& t : control_texts)
    if (!t.empty() && t != kOpen) texts_.push_back(std::move(t));
  for (size_t i = 0; i < texts_.size(); ++i) matcher_.Add(texts_[i], static_cast<int>(i));
}

std::string ControlTextGuard::GuardText(absl::string_view text) const {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    // The longest text at pos, as the tokenizer matches them.
    if (const auto m = matcher_.At(text, pos)) {
      AppendPlaceholder(m->value, &out);
      pos += m->length;
      continue;
    }
    out.push_back(text[pos++]);
  }
  return out;
}

Json ControlTextGuard::Guard(const Json& value) const {
  switch (value.kind()) {
    case Json::Kind::kString:
      return Json(GuardText(value.string_value()));
    case Json::Kind::kArray: {
      Json::Array a;
      a.reserve(value.size());
      for (const Json& v : value.array()) a.push_back(Guard(v));
      return Json::MakeArray(std::move(a));
    }
    case Json::Kind::kObject: {
      Json::Object o;
      o.reserve(value.size());
      for (const auto& [k, v] : value.object()) o.emplace_back(GuardText(k), Guard(v));
      return Json::MakeObject(std::move(o));
    }
    default:
      return value;
  }
}

std::string ControlTextGuard::Restore(absl::string_view rendered, std::vector<TextRange>* ranges) const {
  std::string out;
  out.reserve(rendered.size());
  size_t pos = 0;
  while (pos < rendered.size()) {
    const size_t open = rendered.find(kOpen, pos);
    if (open == absl::string_view::npos) break;
    out.append(rendered.data() + pos, open - pos);
    // Digits, then the close; anything else leaves the bytes as they are.
    size_t at = open + kOpen.size();
    int64_t index = 0;
    int digits = 0;
    while (at + 3 <= rendered.size() && rendered[at] == kDigitLead0 && rendered[at + 1] == kDigitLead1 &&
           static_cast<unsigned char>(rendered[at + 2]) >= kDigitBase &&
           static_cast<unsigned char>(rendered[at + 2]) < kDigitBase + 10 && digits < 9) {
      index = index * 10 + (static_cast<unsigned char>(rendered[at + 2]) - kDigitBase);
      ++digits;
      at += 3;
    }
    if (digits > 0 && index < static_cast<int64_t>(texts_.size()) && rendered.substr(at, kClose.size()) == kClose) {
      const std::string& text = texts_[static_cast<size_t>(index)];
      ranges->push_back({out.size(), out.size() + text.size()});
      out += text;
      pos = at + kClose.size();
    } else {
      out.append(kOpen.data(), kOpen.size());
      pos = open + kOpen.size();
    }
  }
  if (pos < rendered.size()) out.append(rendered.data() + pos, rendered.size() - pos);
  return out;
}

}  // namespace memra::tokenizer
