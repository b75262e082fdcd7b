#include "frontends/tokenizer/Json.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "frontends/tokenizer/Utf8.h"

namespace memra::tokenizer {
namespace {

constexpr int kMaxDepth = 512;

class Parser {
 public:
  explicit Parser(absl::string_view s) : s_(s) {}

  absl::StatusOr<Json> ParseDocument() {
    Json v;
    if (!ParseValue(0, &v)) return Error();
    SkipWs();
    if (pos_ != s_.size()) {
      err_ = "trailing characters after the JSON value";
      return Error();
    }
    return v;
  }

 private:
  absl::Status Error() const {
    return absl::InvalidArgumentError(absl::StrFormat("JSON: %s at byte offset %d", err_, pos_));
  }
  bool Fail(const char* msg) {
    if (err_.empty()) err_ = msg;
    return false;
  }
  void SkipWs() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool Literal(absl::string_view lit) {
    if (s_.substr(pos_, lit.size()) != lit) return Fail("invalid literal");
    pos_ += lit.size();
    return true;
  }

  bool ParseValue(int depth, Json* out) {
    if (depth > kMaxDepth) return Fail("nesting too deep");
    SkipWs();
    if (pos_ >= s_.size()) return Fail("unexpected end of input");
    const char c = s_[pos_];
    switch (c) {
      case 'n':
        *out = Json();
        return Literal("null");
      case 't':
        *out = Json(true);
        return Literal("true");
      case 'f':
        *out = Json(false);
        return Literal("false");
      case '"': {
        std::string str;
        if (!ParseString(&str)) return false;
        *out = Json(std::move(str));
        return true;
      }
      case '[': {
        ++pos_;
        Json arr = Json::MakeArray();
        SkipWs();
        if (pos_ < s_.size() && s_[pos_] == ']') {
          ++pos_;
          *out = std::move(arr);
          return true;
        }
        while (true) {
          Json elem;
          if (!ParseValue(depth + 1, &elem)) return false;
          arr.Push(std::move(elem));
          SkipWs();
          if (pos_ >= s_.size()) return Fail("unterminated array");
          if (s_[pos_] == ',') {
            ++pos_;
            continue;
          }
          if (s_[pos_] == ']') {
            ++pos_;
            break;
          }
          return Fail("expected ',' or ']' in array");
        }
        *out = std::move(arr);
        return true;
      }
      case '{': {
        ++pos_;
        Json obj = Json::MakeObject();
        SkipWs();
        if (pos_ < s_.size() && s_[pos_] == '}') {
          ++pos_;
          *out = std::move(obj);
          return true;
        }
        while (true) {
          SkipWs();
          if (pos_ >= s_.size() || s_[pos_] != '"') return Fail("expected a string key");
          std::string key;
          if (!ParseString(&key)) return false;
          SkipWs();
          if (pos_ >= s_.size() || s_[pos_] != ':') return Fail("expected ':' after key");
          ++pos_;
          Json val;
          if (!ParseValue(depth + 1, &val)) return false;
          obj.Set(std::move(key), std::move(val));
          SkipWs();
          if (pos_ >= s_.size()) return Fail("unterminated object");
          if (s_[pos_] == ',') {
            ++pos_;
            continue;
          }
          if (s_[pos_] == '}') {
            ++pos_;
            break;
          }
          return Fail("expected ',' or '}' in object");
        }
        *out = std::move(obj);
        return true;
      }
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
        return Fail("unexpected character");
    }
  }

  bool ParseHex4(uint32_t* v) {
    if (pos_ + 4 > s_.size()) return Fail("truncated \\u escape");
    uint32_t x = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_ + i];
      x <<= 4;
      if (c >= '0' && c <= '9')
        x |= c - '0';
      else if (c >= 'a' && c <= 'f')
        x |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        x |= c - 'A' + 10;
      else
        return Fail("bad hex digit in \\u escape");
    }
    pos_ += 4;
    *v = x;
    return true;
  }

  bool ParseString(std::string* out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= s_.size()) return Fail("unterminated string");
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return Fail("control character in string");
      if (c != '\\') {
        out->push_back(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) return Fail("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp;
          if (!ParseHex4(&cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF && pos_ + 6 <= s_.size() && s_[pos_] == '\\' && s_[pos_ + 1] == 'u') {
            const size_t save = pos_;
            pos_ += 2;
            uint32_t lo;
            if (!ParseHex4(&lo)) return false;
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              pos_ = save;  // lone high surrogate; the next escape is parsed on its own
            }
          }
          AppendUtf8(cp, out);  // lone surrogates become U+FFFD
          break;
        }
        default:
          return Fail("invalid escape");
      }
    }
  }

  bool ParseNumber(Json* out) {
    const size_t start = pos_;
    bool is_int = true;
    if (s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t d0 = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ > d0;
    };
    if (!digits()) return Fail("invalid number");
    if (pos_ < s_.size() && s_[pos_] == '.') {
      is_int = false;
      ++pos_;
      if (!digits()) return Fail("invalid number");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      is_int = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) return Fail("invalid number");
    }
    const char* b = s_.data() + start;
    const char* e = s_.data() + pos_;
    if (is_int) {
      int64_t v;
      auto r = std::from_chars(b, e, v);
      if (r.ec == std::errc() && r.ptr == e) {
        *out = Json(v);
        return true;
      }
    }
    double d;
    auto r = std::from_chars(b, e, d);
    if (r.ec != std::errc() && r.ec != std::errc::result_out_of_range) return Fail("invalid number");
    *out = Json(d);
    return true;
  }

  absl::string_view s_;
  size_t pos_ = 0;
  std::string err_;
};

const Json& NullJson() {
  static const Json* kNull = new Json();
  return *kNull;
}

}  // namespace

Json Json::MakeArray(Array a) {
  Json j;
  j.kind_ = Kind::kArray;
  j.a_ = std::make_shared<Array>(std::move(a));
  return j;
}

Json Json::MakeObject(Object o) {
  Json j;
  j.kind_ = Kind::kObject;
  j.o_ = std::make_shared<Object>(std::move(o));
  return j;
}

absl::StatusOr<Json> Json::Parse(absl::string_view text) { return Parser(text).ParseDocument(); }

const Json::Array& Json::array() const {
  static const Array* kEmpty = new Array();
  return kind_ == Kind::kArray ? *a_ : *kEmpty;
}

const Json::Object& Json::object() const {
  static const Object* kEmpty = new Object();
  return kind_ == Kind::kObject ? *o_ : *kEmpty;
}

Json::Array& Json::mutable_array() {
  if (kind_ != Kind::kArray) *this = MakeArray();
  if (a_.use_count() > 1) a_ = std::make_shared<Array>(*a_);
  return *a_;
}

Json::Object& Json::mutable_object() {
  if (kind_ != Kind::kObject) *this = MakeObject();
  if (o_.use_count() > 1) o_ = std::make_shared<Object>(*o_);
  return *o_;
}

const Json* Json::Find(absl::string_view key) const {
  if (kind_ != Kind::kObject) return nullptr;
  for (const auto& [k, v] : *o_)
    if (k == key) return &v;
  return nullptr;
}

const Json& Json::operator[](absl::string_view key) const {
  const Json* j = Find(key);
  return j ? *j : NullJson();
}

const Json& Json::operator[](size_t i) const {
  if (kind_ != Kind::kArray || i >= a_->size()) return NullJson();
  return (*a_)[i];
}

size_t Json::size() const {
  if (kind_ == Kind::kArray) return a_->size();
  if (kind_ == Kind::kObject) return o_->size();
  return 0;
}

void Json::Set(std::string key, Json value) {
  Object& o = mutable_object();
  for (auto& [k, v] : o) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  o.emplace_back(std::move(key), std::move(value));
}

void Json::Push(Json value) { mutable_array().push_back(std::move(value)); }

void AppendJsonString(absl::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  size_t pos = 0;
  while (pos < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[pos]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out->append("\\\"");
          break;
        case '\\':
          out->append("\\\\");
          break;
        case '\n':
          out->append("\\n");
          break;
        case '\r':
          out->append("\\r");
          break;
        case '\t':
          out->append("\\t");
          break;
        case '\b':
          out->append("\\b");
          break;
        case '\f':
          out->append("\\f");
          break;
        default:
          if (c < 0x20) {
            absl::StrAppendFormat(out, "\\u%04x", c);
          } else {
            out->push_back(static_cast<char>(c));
          }
      }
      ++pos;
      continue;
    }
    size_t len;
    const char32_t cp = DecodeUtf8(s, pos, &len);
    if (ensure_ascii) {
      if (cp >= 0x10000) {
        const char32_t v = cp - 0x10000;
        absl::StrAppendFormat(out, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        absl::StrAppendFormat(out, "\\u%04x", static_cast<uint32_t>(cp));
      }
    } else {
      AppendUtf8(cp, out);
    }
    pos += len;
  }
  out->push_back('"');
}

std::string Json::Dump(const DumpOptions& opts) const {
  std::string out;
  DumpTo(opts, 0, &out);
  return out;
}

void Json::DumpTo(const DumpOptions& opts, int level, std::string* out) const {
  auto newline = [&](int lvl) {
    out->push_back('\n');
    out->append(static_cast<size_t>(opts.indent) * lvl, ' ');
  };
  switch (kind_) {
    case Kind::kNull:
      out->append("null");
      return;
    case Kind::kBool:
      out->append(b_ ? "true" : "false");
      return;
    case Kind::kInt:
      absl::StrAppend(out, i_);
      return;
    case Kind::kDouble: {
      if (std::isnan(d_)) {
        out->append("NaN");
        return;
      }
      if (std::isinf(d_)) {
        out->append(d_ > 0 ? "Infinity" : "-Infinity");
        return;
      }
      char buf[64];
      auto r = std::to_chars(buf, buf + sizeof(buf), d_);
      std::string s(buf, r.ptr);
      if (s.find_first_of(".eE") == std::string::npos) s += ".0";  // Python: 1.0, not 1
      out->append(s);
      return;
    }
    case Kind::kString:
      AppendJsonString(s_, opts.ensure_ascii, out);
      return;
    case Kind::kArray: {
      out->push_back('[');
      for (size_t i = 0; i < a_->size(); ++i) {
        if (i > 0) out->append(opts.indent >= 0 ? "," : opts.item_separator);
        if (opts.indent >= 0) newline(level + 1);
        (*a_)[i].DumpTo(opts, level + 1, out);
      }
      if (opts.indent >= 0 && !a_->empty()) newline(level);
      out->push_back(']');
      return;
    }
    case Kind::kObject: {
      out->push_back('{');
      for (size_t i = 0; i < o_->size(); ++i) {
        if (i > 0) out->append(opts.indent >= 0 ? "," : opts.item_separator);
        if (opts.indent >= 0) newline(level + 1);
        AppendJsonString((*o_)[i].first, opts.ensure_ascii, out);
        out->append(opts.key_separator);
        (*o_)[i].second.DumpTo(opts, level + 1, out);
      }
      if (opts.indent >= 0 && !o_->empty()) newline(level);
      out->push_back('}');
      return;
    }
  }
}

bool Json::operator==(const Json& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::kInt && o.kind_ == Kind::kInt) return i_ == o.i_;
    return number_value() == o.number_value();
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kNull:
      return true;
    case Kind::kBool:
      return b_ == o.b_;
    case Kind::kString:
      return s_ == o.s_;
    case Kind::kArray:
      return *a_ == *o.a_;
    case Kind::kObject:
      return *o_ == *o.o_;
    default:
      return false;
  }
}

}  // namespace memra::tokenizer
