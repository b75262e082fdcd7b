#include "frontends/tokenizer/Jinja.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "frontends/tokenizer/Utf8.h"
#include "ir/StatusMacros.h"
#include "unicode/locid.h"
#include "unicode/unistr.h"

namespace memra::tokenizer::jinja {
namespace {

// ============================================================================================
// Values
// ============================================================================================

struct Value;
class Interp;
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};
using Fn = std::function<absl::StatusOr<Value>(Interp&, Args&)>;

struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;
  Value* Find(absl::string_view key);
  void Set(const std::string& key, Value v);
};

struct Value {
  enum class K { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunc };
  K k = K::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<std::vector<Value>> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Fn> fn;
  bool tuple = false;  // a list that prints as a Python tuple

  static Value None() {
    Value v;
    v.k = K::kNone;
    return v;
  }
  static Value Bool(bool x) {
    Value v;
    v.k = K::kBool;
    v.b = x;
    return v;
  }
  static Value Int(int64_t x) {
    Value v;
    v.k = K::kInt;
    v.i = x;
    return v;
  }
  static Value Float(double x) {
    Value v;
    v.k = K::kFloat;
    v.f = x;
    return v;
  }
  static Value Str(std::string x) {
    Value v;
    v.k = K::kString;
    v.s = std::move(x);
    return v;
  }
  static Value List(std::vector<Value> x = {}) {
    Value v;
    v.k = K::kList;
    v.list = std::make_shared<std::vector<Value>>(std::move(x));
    return v;
  }
  static Value Tuple(std::vector<Value> x) {
    Value v = List(std::move(x));
    v.tuple = true;
    return v;
  }
  static Value MakeDict() {
    Value v;
    v.k = K::kDict;
    v.dict = std::make_shared<Dict>();
    return v;
  }
  static Value Func(Fn f) {
    Value v;
    v.k = K::kFunc;
    v.fn = std::make_shared<Fn>(std::move(f));
    return v;
  }

  bool undefined() const { return k == K::kUndefined; }
  bool none() const { return k == K::kNone; }
  bool is_str() const { return k == K::kString; }
  bool is_list() const { return k == K::kList; }
  bool is_dict() const { return k == K::kDict; }
  bool is_num() const { return k == K::kInt || k == K::kFloat || k == K::kBool; }
  double num() const { return k == K::kFloat ? f : k == K::kBool ? (b ? 1 : 0) : static_cast<double>(i); }
};

Value* Dict::Find(absl::string_view key) {
  for (auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::Set(const std::string& key, Value v) {
  if (Value* p = Find(key)) {
    *p = std::move(v);
  } else {
    items.emplace_back(key, std::move(v));
  }
}

// Saturating double -> int64 (NaN -> 0): no undefined conversions on absurd inputs.
int64_t ToI64(double d) {
  if (std::isnan(d)) return 0;
  if (d >= 9.2233720368547758e18) return INT64_MAX;
  if (d <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(d);
}

int64_t AsInt(const Value& v) {
  switch (v.k) {
    case Value::K::kInt:
      return v.i;
    case Value::K::kBool:
      return v.b ? 1 : 0;
    case Value::K::kFloat:
      return ToI64(v.f);
    default:
      return 0;
  }
}

const char* KindName(const Value& v) {
  switch (v.k) {
    case Value::K::kUndefined:
      return "undefined";
    case Value::K::kNone:
      return "none";
    case Value::K::kBool:
      return "bool";
    case Value::K::kInt:
      return "int";
    case Value::K::kFloat:
      return "float";
    case Value::K::kString:
      return "string";
    case Value::K::kList:
      return "list";
    case Value::K::kDict:
      return "dict";
    case Value::K::kFunc:
      return "function";
  }
  return "?";
}

Value FromJson(const Json& j) {
  switch (j.kind()) {
    case Json::Kind::kNull:
      return Value::None();
    case Json::Kind::kBool:
      return Value::Bool(j.bool_value());
    case Json::Kind::kInt:
      return Value::Int(j.int_value());
    case Json::Kind::kDouble:
      return Value::Float(j.number_value());
    case Json::Kind::kString:
      return Value::Str(j.string_value());
    case Json::Kind::kArray: {
      std::vector<Value> out;
      for (const Json& e : j.array()) out.push_back(FromJson(e));
      return Value::List(std::move(out));
    }
    case Json::Kind::kObject: {
      Value d = Value::MakeDict();
      for (const auto& [k, v] : j.object()) d.dict->Set(k, FromJson(v));
      return d;
    }
  }
  return Value();
}

absl::StatusOr<Json> ToJson(const Value& v, int depth = 0) {
  if (depth > 256) return absl::InvalidArgumentError("tojson: value nested too deeply");
  switch (v.k) {
    case Value::K::kUndefined:
    case Value::K::kNone:
      return Json();
    case Value::K::kBool:
      return Json(v.b);
    case Value::K::kInt:
      return Json(v.i);
    case Value::K::kFloat:
      return Json(v.f);
    case Value::K::kString:
      return Json(v.s);
    case Value::K::kList: {
      Json a = Json::MakeArray();
      for (const Value& e : *v.list) {
        MEMRA_ASSIGN_OR_RETURN(Json j, ToJson(e, depth + 1));
        a.Push(std::move(j));
      }
      return a;
    }
    case Value::K::kDict: {
      Json o = Json::MakeObject();
      for (const auto& [k, e] : v.dict->items) {
        MEMRA_ASSIGN_OR_RETURN(Json j, ToJson(e, depth + 1));
        o.Set(k, std::move(j));
      }
      return o;
    }
    case Value::K::kFunc:
      return absl::InvalidArgumentError("tojson: cannot serialize a function");
  }
  return Json();
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), d);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string Repr(const Value& v, int depth = 0);

// Python str().
std::string Str(const Value& v, int depth = 0) {
  switch (v.k) {
    case Value::K::kUndefined:
      return "";
    case Value::K::kNone:
      return "None";
    case Value::K::kBool:
      return v.b ? "True" : "False";
    case Value::K::kInt:
      return absl::StrCat(v.i);
    case Value::K::kFloat:
      return FloatRepr(v.f);
    case Value::K::kString:
      return v.s;
    default:
      return Repr(v, depth);
  }
}

// Python repr().
std::string Repr(const Value& v, int depth) {
  if (depth > 64) return "...";
  switch (v.k) {
    case Value::K::kString: {
      const bool dq = v.s.find('\'') != std::string::npos && v.s.find('"') == std::string::npos;
      const char q = dq ? '"' : '\'';
      std::string out(1, q);
      for (char c : v.s) {
        if (c == q || c == '\\') {
          out.push_back('\\');
          out.push_back(c);
        } else if (c == '\n') {
          out += "\\n";
        } else if (c == '\r') {
          out += "\\r";
        } else if (c == '\t') {
          out += "\\t";
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
          out += absl::StrFormat("\\x%02x", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
      }
      out.push_back(q);
      return out;
    }
    case Value::K::kList: {
      std::vector<std::string> parts;
      for (const Value& e : *v.list) parts.push_back(Repr(e, depth + 1));
      if (v.tuple) return absl::StrCat("(", absl::StrJoin(parts, ", "), parts.size() == 1 ? ",)" : ")");
      return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
    }
    case Value::K::kDict: {
      if (v.dict->is_namespace) return "<Namespace>";
      std::vector<std::string> parts;
      for (const auto& [k, e] : v.dict->items)
        parts.push_back(absl::StrCat(Repr(Value::Str(k)), ": ", Repr(e, depth + 1)));
      return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
    }
    case Value::K::kFunc:
      return "<function>";
    case Value::K::kUndefined:
      return "Undefined";
    default:
      return Str(v, depth);
  }
}

bool Truthy(const Value& v) {
  switch (v.k) {
    case Value::K::kUndefined:
    case Value::K::kNone:
      return false;
    case Value::K::kBool:
      return v.b;
    case Value::K::kInt:
      return v.i != 0;
    case Value::K::kFloat:
      return v.f != 0;
    case Value::K::kString:
      return !v.s.empty();
    case Value::K::kList:
      return !v.list->empty();
    case Value::K::kDict:
      return v.dict->is_namespace || !v.dict->items.empty();
    case Value::K::kFunc:
      return true;
  }
  return false;
}

bool Equals(const Value& a, const Value& b, int depth = 0) {
  if (depth > 64) return false;
  if (a.is_num() && b.is_num()) {
    if (a.k != Value::K::kFloat && b.k != Value::K::kFloat) return AsInt(a) == AsInt(b);
    return a.num() == b.num();
  }
  if (a.k != b.k) return false;
  switch (a.k) {
    case Value::K::kUndefined:
    case Value::K::kNone:
      return true;
    case Value::K::kString:
      return a.s == b.s;
    case Value::K::kList: {
      if (a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); ++i)
        if (!Equals((*a.list)[i], (*b.list)[i], depth + 1)) return false;
      return true;
    }
    case Value::K::kDict: {
      if (a.dict == b.dict) return true;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        Value* o = b.dict->Find(k);
        if (!o || !Equals(v, *o, depth + 1)) return false;
      }
      return true;
    }
    case Value::K::kFunc:
      return a.fn == b.fn;
    default:
      return false;
  }
}

// --- Unicode helpers for Python string semantics (code points) ---

std::u32string ToU32(absl::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    size_t len;
    out.push_back(DecodeUtf8(s, pos, &len));
    pos += len;
  }
  return out;
}

std::string FromU32(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) AppendUtf8(c, &out);
  return out;
}

bool IsPySpace(char32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python str.strip / lstrip / rstrip (chars = None: whitespace).
std::string PyStrip(absl::string_view s, const Value* chars, bool left, bool right) {
  std::u32string u = ToU32(s);
  std::u32string set;
  const bool use_set = chars && chars->is_str();
  if (use_set) set = ToU32(chars->s);
  auto strip_it = [&](char32_t c) { return use_set ? set.find(c) != std::u32string::npos : IsPySpace(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_it(u[b])) ++b;
  if (right)
    while (e > b && strip_it(u[e - 1])) --e;
  return FromU32(u.substr(b, e - b));
}

std::vector<std::string> PySplit(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep && sep->is_str() && !sep->s.empty()) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t p = s.find(sep->s, start);
      if (p == std::string::npos) break;
      out.push_back(s.substr(start, p - start));
      start = p + sep->s.size();
    }
    out.push_back(s.substr(start));
    return out;
  }
  // Runs of whitespace; empty strings dropped.
  std::u32string u = ToU32(s);
  size_t i = 0;
  while (i < u.size()) {
    while (i < u.size() && IsPySpace(u[i])) ++i;
    if (i >= u.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = u.size();
      while (e > i && IsPySpace(u[e - 1])) --e;
      out.push_back(FromU32(u.substr(i, e - i)));
      return out;
    }
    size_t j = i;
    while (j < u.size() && !IsPySpace(u[j])) ++j;
    out.push_back(FromU32(u.substr(i, j - i)));
    i = j;
  }
  return out;
}

// Full Unicode case mapping (Python's str.upper / str.lower), via ICU.
std::string CaseMap(absl::string_view s, bool upper) {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(
      icu::StringPiece(s.data(), static_cast<int32_t>(std::min<size_t>(s.size(), INT32_MAX))));
  if (upper)
    u.toUpper(icu::Locale::getRoot());
  else
    u.toLower(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}

std::string AsciiMap(std::string s, int (*f)(int)) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(f(c));
  return s;
}

// Python slice indices (PySlice_AdjustIndices).
std::vector<int64_t> SliceIndices(int64_t len, const Value& start, const Value& stop, const Value& step_v) {
  int64_t step = step_v.is_num() ? AsInt(step_v) : 1;
  if (step == 0) step = 1;
  auto adjust = [&](const Value& v, int64_t def) -> int64_t {
    if (!v.is_num()) return def;
    int64_t x = AsInt(v);
    if (x < 0) {
      x += len;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= len) {
      x = step < 0 ? len - 1 : len;
    }
    return x;
  };
  const int64_t b = adjust(start, step < 0 ? len - 1 : 0);
  const int64_t e = adjust(stop, step < 0 ? -1 : len);
  std::vector<int64_t> idx;
  for (int64_t i = b; step > 0 ? i < e : i > e;) {
    idx.push_back(i);
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  return idx;
}

// ============================================================================================
// Lexer
// ============================================================================================

struct Token {
  enum T { kName, kString, kInt, kFloat, kOp, kEnd } t = kEnd;
  std::string s;
  int64_t i = 0;
  double f = 0;
  int line = 0;
};

struct Segment {
  enum T { kText, kExpr, kStmt } t;
  std::string text;           // kText
  std::vector<Token> tokens;  // kExpr / kStmt (ends with kEnd)
  int line = 0;
};

class Lexer {
 public:
  Lexer(absl::string_view src, const Options& opts) : src_(src), opts_(opts) {}

  absl::StatusOr<std::vector<Segment>> Run() {
    std::vector<Segment> segs;
    size_t pos = 0;
    bool strip_next = false;  // a `-` closed the previous tag
    bool trim_nl = false;     // a block tag closed (trim_blocks)
    while (pos <= src_.size()) {
      size_t start = FindOpen(pos);
      std::string text(src_.substr(pos, start - pos));
      if (strip_next) {
        size_t b = 0;
        while (b < text.size() && IsWs(text[b])) ++b;
        text.erase(0, b);
      } else if (trim_nl) {
        if (!text.empty() && text[0] == '\n')
          text.erase(0, 1);
        else if (text.size() >= 2 && text[0] == '\r' && text[1] == '\n')
          text.erase(0, 2);
      }
      strip_next = trim_nl = false;
      if (start >= src_.size()) {
        if (!opts_.keep_trailing_newline && !text.empty() && text.back() == '\n') {
          text.pop_back();
          if (!text.empty() && text.back() == '\r') text.pop_back();
        }
        if (!text.empty()) segs.push_back({Segment::kText, std::move(text), {}, Line(pos)});
        break;
      }
      const char kind = src_[start + 1];  // '{', '%', '#'
      const bool is_block = kind == '%' || kind == '#';
      char mod = start + 2 < src_.size() ? src_[start + 2] : 0;
      if (mod != '-' && mod != '+') mod = 0;
      if (mod == '-') {
        while (!text.empty() && IsWs(text.back())) text.pop_back();
      } else if (is_block && opts_.lstrip_blocks && mod != '+') {
        // Only spaces/tabs between the start of the line (in the source) and the tag, all of
        // them in this text run.
        size_t k = start;
        while (k > pos && (src_[k - 1] == ' ' || src_[k - 1] == '\t')) --k;
        const bool line_start = k == 0 || src_[k - 1] == '\n';
        if (line_start && (k > pos || pos == 0 || src_[pos - 1] == '\n'))
          text.erase(text.size() - std::min(text.size(), start - k));
      }
      if (!text.empty()) segs.push_back({Segment::kText, std::move(text), {}, Line(pos)});
      size_t body = start + 2 + (mod ? 1 : 0);
      const int line = Line(start);
      if (kind == '#') {
        size_t close = src_.find("#}", body);
        if (close == absl::string_view::npos) return Err(line, "unterminated comment");
        strip_next = close > body && src_[close - 1] == '-';
        trim_nl = !strip_next && opts_.trim_blocks && !(close > body && src_[close - 1] == '+');
        pos = close + 2;
        continue;
      }
      Segment seg;
      seg.t = kind == '{' ? Segment::kExpr : Segment::kStmt;
      seg.line = line;
      char close_mod = 0;
      MEMRA_ASSIGN_OR_RETURN(size_t end, Tokenize(body, kind == '{' ? '}' : '%', &seg.tokens, &close_mod));
      pos = end;
      strip_next = close_mod == '-';
      trim_nl = !strip_next && is_block && opts_.trim_blocks && close_mod != '+';
      // {% raw %} ... {% endraw %}: the text in between is literal.
      if (seg.t == Segment::kStmt && seg.tokens.size() == 2 && seg.tokens[0].t == Token::kName &&
          seg.tokens[0].s == "raw") {
        size_t search = pos;
        while (true) {
          size_t open = src_.find("{%", search);
          if (open == absl::string_view::npos) return Err(line, "{% raw %} without {% endraw %}");
          size_t q = open + 2;
          if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
          while (q < src_.size() && IsWs(src_[q])) ++q;
          if (src_.substr(q, 6) == "endraw") {
            std::string raw(src_.substr(pos, open - pos));
            if (strip_next) {
              size_t b = 0;
              while (b < raw.size() && IsWs(raw[b])) ++b;
              raw.erase(0, b);
            }
            if (src_[open + 2] == '-')
              while (!raw.empty() && IsWs(raw.back())) raw.pop_back();
            if (!raw.empty()) segs.push_back({Segment::kText, std::move(raw), {}, line});
            std::vector<Token> dummy;
            char m2 = 0;
            MEMRA_ASSIGN_OR_RETURN(size_t e2, Tokenize(q + 6, '%', &dummy, &m2));
            pos = e2;
            strip_next = m2 == '-';
            trim_nl = !strip_next && opts_.trim_blocks && m2 != '+';
            break;
          }
          search = open + 2;
        }
        continue;
      }
      segs.push_back(std::move(seg));
    }
    return segs;
  }

 private:
  static bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

  absl::Status Err(int line, absl::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat("chat template line ", line, ": ", msg));
  }

  int Line(size_t pos) {
    // Incremental line counting (positions are visited in increasing order mostly).
    if (pos < line_pos_) {
      line_pos_ = 0;
      line_no_ = 1;
    }
    for (; line_pos_ < pos && line_pos_ < src_.size(); ++line_pos_)
      if (src_[line_pos_] == '\n') ++line_no_;
    return line_no_;
  }

  size_t FindOpen(size_t from) const {
    size_t p = from;
    while (true) {
      p = src_.find('{', p);
      if (p == absl::string_view::npos || p + 1 >= src_.size()) return src_.size();
      const char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      ++p;
    }
  }

  // Tokenizes from `pos` up to the closing "}}" or "%}" (closer = '}' or '%'). Returns the
  // position after it; `*mod` gets '-' / '+' when the closer had one.
  absl::StatusOr<size_t> Tokenize(size_t pos, char closer, std::vector<Token>* out, char* mod) {
    const int line0 = Line(pos);
    int depth = 0;  // open ( [ {: a "}}" inside a dict literal does not close the tag
    while (true) {
      while (pos < src_.size() && IsWs(src_[pos])) ++pos;
      if (pos >= src_.size()) return Err(line0, "unterminated tag");
      const int line = Line(pos);
      const char c = src_[pos];
      // Closer, optionally with a modifier.
      for (char m : {'-', '+', '\0'}) {
        if (depth > 0) break;
        size_t q = pos;
        if (m) {
          if (src_[q] != m) continue;
          ++q;
        }
        if (q + 1 < src_.size() + 0 && src_[q] == closer && src_[q + 1] == '}') {
          // `-` followed by closer is a modifier only if it directly precedes it.
          *mod = m;
          Token t;
          t.t = Token::kEnd;
          t.line = line;
          out->push_back(t);
          return q + 2;
        }
      }
      Token t;
      t.line = line;
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        t.t = Token::kName;
        t.s = std::string(src_.substr(pos, e - pos));
        pos = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t e = pos;
        bool is_float = false;
        while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
          is_float = true;
          ++e;
          while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
        }
        if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
          size_t q = e + 1;
          if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
          if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
            is_float = true;
            e = q;
            while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
          }
        }
        std::string num;
        for (char ch : src_.substr(pos, e - pos))
          if (ch != '_') num.push_back(ch);
        if (is_float) {
          t.t = Token::kFloat;
          std::from_chars(num.data(), num.data() + num.size(), t.f);
        } else {
          t.t = Token::kInt;
          auto r = std::from_chars(num.data(), num.data() + num.size(), t.i);
          if (r.ec != std::errc()) return Err(line, "integer literal out of range");
        }
        pos = e;
      } else if (c == '\'' || c == '"') {
        std::string s;
        size_t p = pos + 1;
        while (true) {
          if (p >= src_.size()) return Err(line, "unterminated string literal");
          const char d = src_[p];
          if (d == c) break;
          if (d == '\\' && p + 1 < src_.size()) {
            const char e = src_[p + 1];
            p += 2;
            switch (e) {
              case 'n':
                s.push_back('\n');
                break;
              case 't':
                s.push_back('\t');
                break;
              case 'r':
                s.push_back('\r');
                break;
              case 'b':
                s.push_back('\b');
                break;
              case 'f':
                s.push_back('\f');
                break;
              case 'v':
                s.push_back('\v');
                break;
              case 'a':
                s.push_back('\a');
                break;
              case '0':
                s.push_back('\0');
                break;
              case '\\':
                s.push_back('\\');
                break;
              case '\'':
                s.push_back('\'');
                break;
              case '"':
                s.push_back('"');
                break;
              case '\n':
                break;
              case 'x':
              case 'u':
              case 'U': {
                const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                if (p + n > src_.size()) return Err(line, "truncated escape in string literal");
                uint32_t v = 0;
                for (int k = 0; k < n; ++k) {
                  const char h = src_[p + k];
                  v <<= 4;
                  if (h >= '0' && h <= '9')
                    v |= h - '0';
                  else if (h >= 'a' && h <= 'f')
                    v |= h - 'a' + 10;
                  else if (h >= 'A' && h <= 'F')
                    v |= h - 'A' + 10;
                  else
                    return Err(line, "bad hex digit in string escape");
                }
                p += n;
                AppendUtf8(v, &s);
                break;
              }
              default:
                s.push_back('\\');
                s.push_back(e);
            }
            continue;
          }
          s.push_back(d);
          ++p;
        }
        t.t = Token::kString;
        t.s = std::move(s);
        pos = p + 1;
      } else {
        static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                     ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ".", ",", ":", "|"};
        bool found = false;
        for (const char* op : kOps) {
          const size_t n = std::strlen(op);
          if (src_.substr(pos, n) == op) {
            t.t = Token::kOp;
            t.s = op;
            pos += n;
            found = true;
            if (n == 1 && (*op == '(' || *op == '[' || *op == '{')) ++depth;
            if (n == 1 && (*op == ')' || *op == ']' || *op == '}') && depth > 0) --depth;
            break;
          }
        }
        if (!found) return Err(line, absl::StrCat("unexpected character '", std::string(1, c), "'"));
      }
      out->push_back(std::move(t));
      if (out->size() > 100000) return Err(line, "tag too long");
    }
  }

  absl::string_view src_;
  const Options& opts_;
  size_t line_pos_ = 0;
  int line_no_ = 1;
};

// ============================================================================================
// AST
// ============================================================================================

struct Expr;
using ExprP = std::unique_ptr<Expr>;
struct Expr {
  enum Kind {
    kLiteral,
    kName,
    kList,
    kTuple,
    kDict,
    kAttr,
    kItem,
    kSlice,
    kCall,
    kFilter,
    kTest,
    kNeg,
    kPos,
    kNot,
    kAnd,
    kOr,
    kBinary,
    kCond,
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;  // name / attribute / filter / test / operator
  bool negated = false;
  ExprP a, b, c;
  std::vector<ExprP> args;
  std::vector<std::pair<std::string, ExprP>> kwargs;
};

struct Node;
using NodeP = std::unique_ptr<Node>;
using Body = std::vector<NodeP>;
struct Node {
  enum Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kScope };
  Kind kind;
  int line = 0;
  std::string text;
  ExprP expr;                                         // output / set value / for iterable
  std::vector<std::pair<ExprP, Body>> branches;       // if / elif
  Body body, else_body;                               // for / else, macro, set block, scope
  std::vector<std::string> targets;                   // for / set names
  std::string attr;                                   // set ns.attr
  ExprP filter;                                       // for ... if cond
  std::vector<std::pair<std::string, ExprP>> params;  // macro
};

// ============================================================================================
// Parser
// ============================================================================================

constexpr int kMaxNesting = 200;

class Parser {
 public:
  explicit Parser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  absl::StatusOr<Body> ParseAll() {
    Body body;
    std::string end;
    MEMRA_RETURN_IF_ERROR(ParseBody(&body, {}, &end, 0));
    return body;
  }

 private:
  absl::Status Err(int line, absl::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat("chat template line ", line, ": ", msg));
  }

  // Parses statements until a {% tag %} whose first word is in `ends` (consumed; its name goes to
  // *end_tag and its tokens stay available via tok_/tpos_ for elif conditions).
  absl::Status ParseBody(Body* body, const std::vector<std::string>& ends, std::string* end_tag, int depth) {
    if (depth > kMaxNesting) return Err(Line(), "blocks nested too deeply");
    while (seg_ < segs_.size()) {
      Segment& s = segs_[seg_];
      if (s.t == Segment::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::kText;
        n->line = s.line;
        n->text = std::move(s.text);
        body->push_back(std::move(n));
        ++seg_;
        continue;
      }
      tok_ = &s.tokens;
      tpos_ = 0;
      ++seg_;
      if (s.t == Segment::kExpr) {
        auto n = std::make_unique<Node>();
        n->kind = Node::kOutput;
        n->line = s.line;
        MEMRA_ASSIGN_OR_RETURN(n->expr, ParseExpr(0));
        MEMRA_RETURN_IF_ERROR(ExpectEnd());
        body->push_back(std::move(n));
        continue;
      }
      if (Peek().t != Token::kName) return Err(s.line, "expected a statement name after {%");
      const std::string word = Peek().s;
      if (std::find(ends.begin(), ends.end(), word) != ends.end()) {
        ++tpos_;
        *end_tag = word;
        return absl::OkStatus();
      }
      ++tpos_;
      MEMRA_ASSIGN_OR_RETURN(NodeP n, ParseStatement(word, s.line, depth));
      if (n) body->push_back(std::move(n));
    }
    if (!ends.empty()) return Err(Line(), absl::StrCat("unexpected end of template: missing {% ", ends.back(), " %}"));
    return absl::OkStatus();
  }

  absl::StatusOr<NodeP> ParseStatement(const std::string& word, int line, int depth) {
    auto n = std::make_unique<Node>();
    n->line = line;
    if (word == "if") {
      n->kind = Node::kIf;
      MEMRA_ASSIGN_OR_RETURN(ExprP cond, ParseExpr(0));
      MEMRA_RETURN_IF_ERROR(ExpectEnd());
      while (true) {
        Body b;
        std::string end;
        MEMRA_RETURN_IF_ERROR(ParseBody(&b, {"elif", "else", "endif"}, &end, depth + 1));
        n->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "elif") {
          MEMRA_ASSIGN_OR_RETURN(cond, ParseExpr(0));
          MEMRA_RETURN_IF_ERROR(ExpectEnd());
          continue;
        }
        MEMRA_RETURN_IF_ERROR(ExpectEnd());
        if (end == "else") {
          MEMRA_RETURN_IF_ERROR(ParseBody(&n->else_body, {"endif"}, &end, depth + 1));
          MEMRA_RETURN_IF_ERROR(ExpectEnd());
        }
        break;
      }
      return n;
    }
    if (word == "for") {
      n->kind = Node::kFor;
      do {
        if (Peek().t != Token::kName) return Err(line, "expected a loop variable name");
        n->targets.push_back(Next().s);
      } while (AcceptOp(","));
      if (!AcceptName("in")) return Err(line, "expected 'in' in for loop");
      MEMRA_ASSIGN_OR_RETURN(n->expr, ParseExpr(0, /*no_cond=*/true));
      if (AcceptName("if")) {
        MEMRA_ASSIGN_OR_RETURN(n->filter, ParseExpr(0, /*no_cond=*/true));
      }
      if (AcceptName("recursive")) return Err(line, "recursive for loops are not supported");
      MEMRA_RETURN_IF_ERROR(ExpectEnd());
      std::string end;
      MEMRA_RETURN_IF_ERROR(ParseBody(&n->body, {"else", "endfor"}, &end, depth + 1));
      MEMRA_RETURN_IF_ERROR(ExpectEnd());
      if (end == "else") {
        MEMRA_RETURN_IF_ERROR(ParseBody(&n->else_body, {"endfor"}, &end, depth + 1));
        MEMRA_RETURN_IF_ERROR(ExpectEnd());
      }
      return n;
    }
    if (word == "set") {
      if (Peek().t != Token::kName) return Err(line, "expected a name after set");
      n->targets.push_back(Next().s);
      if (AcceptOp(".")) {
        if (Peek().t != Token::kName) return Err(line, "expected an attribute name after '.'");
        n->attr = Next().s;
      } else {
        while (AcceptOp(",")) {
          if (Peek().t != Token::kName) return Err(line, "expected a name in set targets");
          n->targets.push_back(Next().s);
        }
      }
      if (AcceptOp("=")) {
        n->kind = Node::kSet;
        MEMRA_ASSIGN_OR_RETURN(n->expr, ParseExpr(0));
        // `set a = 1, 2` builds a tuple
        if (Peek().t == Token::kOp && Peek().s == ",") {
          auto tup = std::make_unique<Expr>();
          tup->kind = Expr::kTuple;
          tup->line = line;
          tup->args.push_back(std::move(n->expr));
          while (AcceptOp(",")) {
            MEMRA_ASSIGN_OR_RETURN(ExprP e, ParseExpr(0));
            tup->args.push_back(std::move(e));
          }
          n->expr = std::move(tup);
        }
        MEMRA_RETURN_IF_ERROR(ExpectEnd());
        return n;
      }
      // Block set: {% set x %}...{% endset %} (optionally with filters: not supported)
      if (!n->attr.empty() || n->targets.size() != 1) return Err(line, "block set needs a single plain name");
      MEMRA_RETURN_IF_ERROR(ExpectEnd());
      n->kind = Node::kSetBlock;
      std::string end;
      MEMRA_RETURN_IF_ERROR(ParseBody(&n->body, {"endset"}, &end, depth + 1));
      MEMRA_RETURN_IF_ERROR(ExpectEnd());
      return n;
    }
    if (word == "macro") {
      n->kind = Node::kMacro;
      if (Peek().t != Token::kName) return Err(line, "expected a macro name");
      n->attr = Next().s;
      if (!AcceptOp("(")) return Err(line, "expected '(' after the macro name");
      if (!AcceptOp(")")) {
        do {
          if (Peek().t != Token::kName) return Err(line, "expected a macro parameter name");
          std::string pname = Next().s;
          ExprP def;
          if (AcceptOp("=")) {
            MEMRA_ASSIGN_OR_RETURN(def, ParseExpr(0));
          }
          n->params.emplace_back(std::move(pname), std::move(def));
        } while (AcceptOp(","));
        if (!AcceptOp(")")) return Err(line, "expected ')' after macro parameters");
      }
      MEMRA_RETURN_IF_ERROR(ExpectEnd());
      std::string end;
      MEMRA_RETURN_IF_ERROR(ParseBody(&n->body, {"endmacro"}, &end, depth + 1));
      if (Peek().t == Token::kName) ++tpos_;  // {% endmacro name %}
      MEMRA_RETURN_IF_ERROR(ExpectEnd());
      return n;
    }
    if (word == "break" || word == "continue") {
      n->kind = word == "break" ? Node::kBreak : Node::kContinue;
      MEMRA_RETURN_IF_ERROR(ExpectEnd());
      return n;
    }
    if (word == "generation") {  // transformers' assistant-mask extension: render the body
      n->kind = Node::kScope;
      MEMRA_RETURN_IF_ERROR(ExpectEnd());
      std::string end;
      MEMRA_RETURN_IF_ERROR(ParseBody(&n->body, {"endgeneration"}, &end, depth + 1));
      MEMRA_RETURN_IF_ERROR(ExpectEnd());
      return n;
    }
    return Err(line, absl::StrCat("unsupported Jinja statement '", word, "'"));
  }

  // --- expressions ---
  const Token& Peek(size_t k = 0) const {
    static const Token kEndTok;
    return tpos_ + k < tok_->size() ? (*tok_)[tpos_ + k] : kEndTok;
  }
  const Token& Next() {
    const Token& t = Peek();
    if (tpos_ < tok_->size()) ++tpos_;
    return t;
  }
  int Line() const { return tok_ && !tok_->empty() ? Peek().line : 0; }
  bool IsOp(absl::string_view op, size_t k = 0) const { return Peek(k).t == Token::kOp && Peek(k).s == op; }
  bool AcceptOp(absl::string_view op) {
    if (!IsOp(op)) return false;
    ++tpos_;
    return true;
  }
  bool IsName(absl::string_view n, size_t k = 0) const { return Peek(k).t == Token::kName && Peek(k).s == n; }
  bool AcceptName(absl::string_view n) {
    if (!IsName(n)) return false;
    ++tpos_;
    return true;
  }
  absl::Status ExpectOp(absl::string_view op) {
    if (AcceptOp(op)) return absl::OkStatus();
    return Err(Line(), absl::StrCat("expected '", op, "'", Describe()));
  }
  absl::Status ExpectEnd() {
    if (Peek().t == Token::kEnd) return absl::OkStatus();
    return Err(Line(), absl::StrCat("unexpected ", Describe(true)));
  }
  std::string Describe(bool bare = false) const {
    const Token& t = Peek();
    std::string what;
    switch (t.t) {
      case Token::kEnd:
        what = "end of tag";
        break;
      case Token::kString:
        what = absl::StrCat("string '", t.s, "'");
        break;
      default:
        what = absl::StrCat("'", t.s.empty() ? absl::StrCat(t.i) : t.s, "'");
    }
    return bare ? what : absl::StrCat(", found ", what);
  }
  ExprP Make(Expr::Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = Line();
    return e;
  }

  absl::StatusOr<ExprP> ParseExpr(int depth, bool no_cond = false) {
    if (depth > kMaxNesting) return Err(Line(), "expression nested too deeply");
    MEMRA_ASSIGN_OR_RETURN(ExprP e, ParseOr(depth + 1));
    if (!no_cond && IsName("if")) {
      ++tpos_;
      auto c = Make(Expr::kCond);
      MEMRA_ASSIGN_OR_RETURN(c->b, ParseOr(depth + 1));  // condition
      c->a = std::move(e);                               // value if true
      if (AcceptName("else")) {
        MEMRA_ASSIGN_OR_RETURN(c->c, ParseExpr(depth + 1));
      }
      return c;
    }
    return e;
  }
  absl::StatusOr<ExprP> ParseOr(int depth) {
    MEMRA_ASSIGN_OR_RETURN(ExprP e, ParseAnd(depth));
    while (AcceptName("or")) {
      auto n = Make(Expr::kOr);
      n->a = std::move(e);
      MEMRA_ASSIGN_OR_RETURN(n->b, ParseAnd(depth));
      e = std::move(n);
    }
    return e;
  }
  absl::StatusOr<ExprP> ParseAnd(int depth) {
    MEMRA_ASSIGN_OR_RETURN(ExprP e, ParseNot(depth));
    while (AcceptName("and")) {
      auto n = Make(Expr::kAnd);
      n->a = std::move(e);
      MEMRA_ASSIGN_OR_RETURN(n->b, ParseNot(depth));
      e = std::move(n);
    }
    return e;
  }
  absl::StatusOr<ExprP> ParseNot(int depth) {
    if (depth > kMaxNesting) return Err(Line(), "expression nested too deeply");
    if (IsName("not")) {
      ++tpos_;
      auto n = Make(Expr::kNot);
      MEMRA_ASSIGN_OR_RETURN(n->a, ParseNot(depth + 1));
      return n;
    }
    return ParseCompare(depth);
  }
  absl::StatusOr<ExprP> ParseCompare(int depth) {
    MEMRA_ASSIGN_OR_RETURN(ExprP e, ParseAdd(depth));
    while (true) {
      std::string op;
      if (Peek().t == Token::kOp && (Peek().s == "==" || Peek().s == "!=" || Peek().s == "<" || Peek().s == "<=" ||
                                     Peek().s == ">" || Peek().s == ">=")) {
        op = Next().s;
      } else if (IsName("in")) {
        ++tpos_;
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        tpos_ += 2;
        op = "notin";
      } else {
        break;
      }
      auto n = Make(Expr::kBinary);
      n->name = op;
      n->a = std::move(e);
      MEMRA_ASSIGN_OR_RETURN(n->b, ParseAdd(depth));
      e = std::move(n);
    }
    return e;
  }
  absl::StatusOr<ExprP> ParseAdd(int depth) {
    MEMRA_ASSIGN_OR_RETURN(ExprP e, ParseConcat(depth));
    while (IsOp("+") || IsOp("-")) {
      auto n = Make(Expr::kBinary);
      n->name = Next().s;
      n->a = std::move(e);
      MEMRA_ASSIGN_OR_RETURN(n->b, ParseConcat(depth));
      e = std::move(n);
    }
    return e;
  }
  absl::StatusOr<ExprP> ParseConcat(int depth) {
    MEMRA_ASSIGN_OR_RETURN(ExprP e, ParseMul(depth));
    while (IsOp("~")) {
      auto n = Make(Expr::kBinary);
      n->name = Next().s;
      n->a = std::move(e);
      MEMRA_ASSIGN_OR_RETURN(n->b, ParseMul(depth));
      e = std::move(n);
    }
    return e;
  }
  absl::StatusOr<ExprP> ParseMul(int depth) {
    MEMRA_ASSIGN_OR_RETURN(ExprP e, ParsePow(depth));
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      auto n = Make(Expr::kBinary);
      n->name = Next().s;
      n->a = std::move(e);
      MEMRA_ASSIGN_OR_RETURN(n->b, ParsePow(depth));
      e = std::move(n);
    }
    return e;
  }
  absl::StatusOr<ExprP> ParsePow(int depth) {
    MEMRA_ASSIGN_OR_RETURN(ExprP e, ParseUnary(depth));
    while (IsOp("**")) {
      auto n = Make(Expr::kBinary);
      n->name = Next().s;
      n->a = std::move(e);
      MEMRA_ASSIGN_OR_RETURN(n->b, ParseUnary(depth));
      e = std::move(n);
    }
    return e;
  }
  // As Jinja's parse_unary: `-x|f` is f(-x); `-2 ** 2` is (-2) ** 2.
  absl::StatusOr<ExprP> ParseUnary(int depth, bool with_filter = true) {
    if (depth > kMaxNesting) return Err(Line(), "expression nested too deeply");
    ExprP e;
    if (IsOp("-") || IsOp("+")) {
      auto n = Make(Next().s == "-" ? Expr::kNeg : Expr::kPos);
      MEMRA_ASSIGN_OR_RETURN(n->a, ParseUnary(depth + 1, false));
      e = std::move(n);
    } else {
      MEMRA_ASSIGN_OR_RETURN(e, ParsePrimary(depth + 1));
    }
    MEMRA_ASSIGN_OR_RETURN(e, ParsePostfix(std::move(e), depth + 1));
    if (!with_filter) return e;
    return ParseFilterTest(std::move(e), depth + 1);
  }

  absl::Status ParseCallArgs(Expr* call, int depth) {
    // after '('
    if (AcceptOp(")")) return absl::OkStatus();
    do {
      if (IsOp(")")) break;  // trailing comma
      if (Peek().t == Token::kName && IsOp("=", 1)) {
        std::string key = Next().s;
        ++tpos_;
        MEMRA_ASSIGN_OR_RETURN(ExprP v, ParseExpr(depth + 1));
        call->kwargs.emplace_back(std::move(key), std::move(v));
      } else {
        MEMRA_ASSIGN_OR_RETURN(ExprP v, ParseExpr(depth + 1));
        call->args.push_back(std::move(v));
      }
    } while (AcceptOp(","));
    return ExpectOp(")");
  }

  absl::StatusOr<ExprP> ParsePostfix(ExprP e, int depth) {
    while (true) {
      if (AcceptOp(".")) {
        if (Peek().t != Token::kName && Peek().t != Token::kInt)
          return Err(Line(), "expected an attribute name after '.'");
        auto n = Make(Expr::kAttr);
        const Token& t = Next();
        n->name = t.t == Token::kInt ? absl::StrCat(t.i) : t.s;
        n->a = std::move(e);
        e = std::move(n);
      } else if (AcceptOp("[")) {
        ExprP idx[3];
        int colons = 0;
        if (!IsOp(":")) {
          MEMRA_ASSIGN_OR_RETURN(idx[0], ParseExpr(depth + 1));
        }
        while (colons < 2 && AcceptOp(":")) {
          ++colons;
          if (!IsOp(":") && !IsOp("]")) {
            MEMRA_ASSIGN_OR_RETURN(idx[colons], ParseExpr(depth + 1));
          }
        }
        MEMRA_RETURN_IF_ERROR(ExpectOp("]"));
        if (colons == 0) {
          auto n = Make(Expr::kItem);
          n->a = std::move(e);
          n->b = std::move(idx[0]);
          e = std::move(n);
        } else {
          auto n = Make(Expr::kSlice);
          n->a = std::move(e);
          for (auto& x : idx) n->args.push_back(std::move(x));
          e = std::move(n);
        }
      } else if (AcceptOp("(")) {
        auto n = Make(Expr::kCall);
        n->a = std::move(e);
        MEMRA_RETURN_IF_ERROR(ParseCallArgs(n.get(), depth));
        e = std::move(n);
      } else {
        return e;
      }
    }
  }

  absl::StatusOr<ExprP> ParseFilterTest(ExprP e, int depth) {
    while (true) {
      if (AcceptOp("|")) {
        if (Peek().t != Token::kName) return Err(Line(), "expected a filter name after '|'");
        auto n = Make(Expr::kFilter);
        n->name = Next().s;
        n->a = std::move(e);
        if (AcceptOp("(")) MEMRA_RETURN_IF_ERROR(ParseCallArgs(n.get(), depth));
        e = std::move(n);
      } else if (IsName("is")) {
        ++tpos_;
        auto n = Make(Expr::kTest);
        n->negated = AcceptName("not");
        if (Peek().t != Token::kName) return Err(Line(), "expected a test name after 'is'");
        n->name = Next().s;
        n->a = std::move(e);
        if (AcceptOp("(")) {
          MEMRA_RETURN_IF_ERROR(ParseCallArgs(n.get(), depth));
        } else if ((Peek().t == Token::kString || Peek().t == Token::kInt || Peek().t == Token::kFloat ||
                    (Peek().t == Token::kName && !IsKeyword(Peek().s))) &&
                   n->name != "defined" && n->name != "undefined" && n->name != "none" && n->name != "string" &&
                   n->name != "mapping" && n->name != "number") {
          // `x is divisibleby 3`, `x is equalto y`: one argument without parentheses.
          MEMRA_ASSIGN_OR_RETURN(ExprP arg, ParsePrimary(depth + 1));
          MEMRA_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg), depth + 1));
          n->args.push_back(std::move(arg));
        }
        e = std::move(n);
      } else {
        return e;
      }
    }
  }

  static bool IsKeyword(const std::string& s) {
    return s == "and" || s == "or" || s == "not" || s == "if" || s == "else" || s == "in" || s == "is";
  }

  absl::StatusOr<ExprP> ParsePrimary(int depth) {
    if (depth > kMaxNesting) return Err(Line(), "expression nested too deeply");
    const Token& t = Peek();
    switch (t.t) {
      case Token::kString: {
        auto n = Make(Expr::kLiteral);
        std::string s = Next().s;
        while (Peek().t == Token::kString) s += Next().s;  // adjacent literals concatenate
        n->literal = Value::Str(std::move(s));
        return n;
      }
      case Token::kInt: {
        auto n = Make(Expr::kLiteral);
        n->literal = Value::Int(Next().i);
        return n;
      }
      case Token::kFloat: {
        auto n = Make(Expr::kLiteral);
        n->literal = Value::Float(Next().f);
        return n;
      }
      case Token::kName: {
        auto n = Make(Expr::kLiteral);
        const std::string& s = t.s;
        if (s == "true" || s == "True") {
          n->literal = Value::Bool(true);
        } else if (s == "false" || s == "False") {
          n->literal = Value::Bool(false);
        } else if (s == "none" || s == "None") {
          n->literal = Value::None();
        } else {
          n->kind = Expr::kName;
          n->name = s;
        }
        ++tpos_;
        return n;
      }
      case Token::kOp: {
        if (AcceptOp("(")) {
          if (AcceptOp(")")) {
            auto n = Make(Expr::kTuple);
            return n;
          }
          MEMRA_ASSIGN_OR_RETURN(ExprP e, ParseExpr(depth + 1));
          if (IsOp(",")) {
            auto n = Make(Expr::kTuple);
            n->args.push_back(std::move(e));
            while (AcceptOp(",")) {
              if (IsOp(")")) break;
              MEMRA_ASSIGN_OR_RETURN(ExprP x, ParseExpr(depth + 1));
              n->args.push_back(std::move(x));
            }
            MEMRA_RETURN_IF_ERROR(ExpectOp(")"));
            return n;
          }
          MEMRA_RETURN_IF_ERROR(ExpectOp(")"));
          return e;
        }
        if (AcceptOp("[")) {
          auto n = Make(Expr::kList);
          while (!IsOp("]")) {
            MEMRA_ASSIGN_OR_RETURN(ExprP x, ParseExpr(depth + 1));
            n->args.push_back(std::move(x));
            if (!AcceptOp(",")) break;
          }
          MEMRA_RETURN_IF_ERROR(ExpectOp("]"));
          return n;
        }
        if (AcceptOp("{")) {
          auto n = Make(Expr::kDict);
          while (!IsOp("}")) {
            MEMRA_ASSIGN_OR_RETURN(ExprP k, ParseExpr(depth + 1));
            MEMRA_RETURN_IF_ERROR(ExpectOp(":"));
            MEMRA_ASSIGN_OR_RETURN(ExprP v, ParseExpr(depth + 1));
            n->args.push_back(std::move(k));
            n->args.push_back(std::move(v));
            if (!AcceptOp(",")) break;
          }
          MEMRA_RETURN_IF_ERROR(ExpectOp("}"));
          return n;
        }
        break;
      }
      default:
        break;
    }
    return Err(Line(), absl::StrCat("unexpected ", Describe(true), " in expression"));
  }

  std::vector<Segment> segs_;
  size_t seg_ = 0;
  const std::vector<Token>* tok_ = nullptr;
  size_t tpos_ = 0;
};

// ============================================================================================
// Interpreter
// ============================================================================================

using Frame = std::vector<std::pair<std::string, Value>>;

class Interp {
 public:
  Interp(const Options& opts) : opts_(opts) {}

  enum class Flow { kNormal, kBreak, kContinue };

  absl::Status Error(int line, absl::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat("chat template line ", line, ": ", msg));
  }

  absl::Status Step(int line) {
    if (++steps_ > opts_.max_steps) return Error(line, "evaluation step limit exceeded (runaway template?)");
    return absl::OkStatus();
  }

  Value Lookup(const std::string& name) const {
    for (auto f = frames_.rbegin(); f != frames_.rend(); ++f)
      for (auto it = (*f)->rbegin(); it != (*f)->rend(); ++it)
        if (it->first == name) return it->second;
    return Value();
  }
  void Assign(const std::string& name, Value v) {
    Frame& f = *frames_.back();
    for (auto& [k, x] : f)
      if (k == name) {
        x = std::move(v);
        return;
      }
    f.emplace_back(name, std::move(v));
  }

  absl::Status Exec(const Body& body, std::string* out, Flow* flow) {
    for (const NodeP& n : body) {
      MEMRA_RETURN_IF_ERROR(ExecNode(*n, out, flow));
      if (*flow != Flow::kNormal) return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  absl::Status Append(std::string* out, absl::string_view s, int line) {
    if (out->size() + s.size() > opts_.max_output_bytes) return Error(line, "output size limit exceeded");
    out->append(s.data(), s.size());
    return absl::OkStatus();
  }

  absl::Status ExecNode(const Node& n, std::string* out, Flow* flow) {
    MEMRA_RETURN_IF_ERROR(Step(n.line));
    switch (n.kind) {
      case Node::kText:
        return Append(out, n.text, n.line);
      case Node::kOutput: {
        MEMRA_ASSIGN_OR_RETURN(Value v, Eval(*n.expr));
        return Append(out, Str(v), n.line);
      }
      case Node::kIf: {
        for (const auto& [cond, body] : n.branches) {
          MEMRA_ASSIGN_OR_RETURN(Value c, Eval(*cond));
          if (Truthy(c)) return Exec(body, out, flow);
        }
        return Exec(n.else_body, out, flow);
      }
      case Node::kFor:
        return ExecFor(n, out, flow);
      case Node::kSet: {
        MEMRA_ASSIGN_OR_RETURN(Value v, Eval(*n.expr));
        return AssignTargets(n, std::move(v));
      }
      case Node::kSetBlock: {
        std::string captured;
        Flow f = Flow::kNormal;
        MEMRA_RETURN_IF_ERROR(Exec(n.body, &captured, &f));
        Assign(n.targets[0], Value::Str(std::move(captured)));
        return absl::OkStatus();
      }
      case Node::kMacro: {
        Assign(n.attr, MakeMacro(n));
        return absl::OkStatus();
      }
      case Node::kBreak:
        *flow = Flow::kBreak;
        return absl::OkStatus();
      case Node::kContinue:
        *flow = Flow::kContinue;
        return absl::OkStatus();
      case Node::kScope:
        return Exec(n.body, out, flow);
    }
    return absl::OkStatus();
  }

  absl::Status AssignTargets(const Node& n, Value v) {
    if (!n.attr.empty()) {
      Value ns = Lookup(n.targets[0]);
      if (!ns.is_dict() || !ns.dict->is_namespace)
        return Error(n.line,
                     absl::StrCat("cannot set attribute '", n.attr, "' of '", n.targets[0], "': not a namespace()"));
      ns.dict->Set(n.attr, std::move(v));
      return absl::OkStatus();
    }
    if (n.targets.size() == 1) {
      Assign(n.targets[0], std::move(v));
      return absl::OkStatus();
    }
    if (!v.is_list() || v.list->size() != n.targets.size())
      return Error(n.line, absl::StrCat("cannot unpack ", KindName(v), " into ", n.targets.size(), " names"));
    for (size_t i = 0; i < n.targets.size(); ++i) Assign(n.targets[i], (*v.list)[i]);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<Value>> Iterate(const Value& v, int line) {
    if (v.is_list()) return *v.list;
    if (v.is_dict()) {
      std::vector<Value> keys;
      for (const auto& [k, x] : v.dict->items) keys.push_back(Value::Str(k));
      return keys;
    }
    if (v.is_str()) {
      std::vector<Value> chars;
      for (char32_t c : ToU32(v.s)) chars.push_back(Value::Str(EncodeUtf8(c)));
      return chars;
    }
    if (v.undefined() || v.none()) return std::vector<Value>();
    return Error(line, absl::StrCat("cannot iterate over ", KindName(v)));
  }

  absl::Status ExecFor(const Node& n, std::string* out, Flow* flow) {
    MEMRA_ASSIGN_OR_RETURN(Value seq, Eval(*n.expr));
    MEMRA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(seq, n.line));
    auto bind = [&](const Value& item) -> absl::Status {
      if (n.targets.size() == 1) {
        Assign(n.targets[0], item);
        return absl::OkStatus();
      }
      if (!item.is_list() || item.list->size() != n.targets.size())
        return Error(n.line,
                     absl::StrCat("cannot unpack ", KindName(item), " into ", n.targets.size(), " loop variables"));
      for (size_t i = 0; i < n.targets.size(); ++i) Assign(n.targets[i], (*item.list)[i]);
      return absl::OkStatus();
    };
    if (n.filter) {  // `for x in xs if cond`: filter first (loop.* counts the kept items)
      std::vector<Value> kept;
      for (const Value& item : items) {
        frames_.push_back(std::make_shared<Frame>());
        absl::Status st = bind(item);
        absl::StatusOr<Value> c = st.ok() ? Eval(*n.filter) : absl::StatusOr<Value>(st);
        frames_.pop_back();
        if (!c.ok()) return c.status();
        if (Truthy(*c)) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return Exec(n.else_body, out, flow);
    const int64_t len = static_cast<int64_t>(items.size());
    // One `loop` object per loop, updated in place each iteration.
    Value loop = Value::MakeDict();
    for (const char* k :
         {"index", "index0", "revindex", "revindex0", "first", "last", "length", "previtem", "nextitem", "cycle"})
      loop.dict->items.emplace_back(k, Value());
    auto counter = std::make_shared<int64_t>(0);
    loop.dict->items[9].second = Value::Func([counter](Interp&, Args& a) -> absl::StatusOr<Value> {
      if (a.pos.empty()) return Value();
      return a.pos[*counter % static_cast<int64_t>(a.pos.size())];
    });
    for (int64_t i = 0; i < len; ++i) {
      MEMRA_RETURN_IF_ERROR(Step(n.line));
      auto& f = loop.dict->items;
      f[0].second = Value::Int(i + 1);
      f[1].second = Value::Int(i);
      f[2].second = Value::Int(len - i);
      f[3].second = Value::Int(len - i - 1);
      f[4].second = Value::Bool(i == 0);
      f[5].second = Value::Bool(i == len - 1);
      f[6].second = Value::Int(len);
      f[7].second = i > 0 ? items[i - 1] : Value();
      f[8].second = i + 1 < len ? items[i + 1] : Value();
      *counter = i;
      frames_.push_back(std::make_shared<Frame>());
      Assign("loop", loop);
      absl::Status st = bind(items[i]);
      Flow fl = Flow::kNormal;
      if (st.ok()) st = Exec(n.body, out, &fl);
      frames_.pop_back();
      MEMRA_RETURN_IF_ERROR(st);
      if (fl == Flow::kBreak) break;
    }
    return absl::OkStatus();
  }

  Value MakeMacro(const Node& n) {
    const Node* node = &n;
    return Value::Func([node](Interp& in, Args& args) -> absl::StatusOr<Value> {
      if (in.call_depth_ >= 64) return in.Error(node->line, "macro recursion too deep");
      auto frame = std::make_shared<Frame>();
      for (size_t p = 0; p < node->params.size(); ++p) {
        const std::string& pname = node->params[p].first;
        Value v;
        bool set = false;
        if (p < args.pos.size()) {
          v = args.pos[p];
          set = true;
        }
        for (auto& [k, x] : args.kw)
          if (k == pname) {
            v = x;
            set = true;
          }
        if (!set && node->params[p].second) {
          MEMRA_ASSIGN_OR_RETURN(v, in.Eval(*node->params[p].second));
        }
        frame->emplace_back(pname, std::move(v));
      }
      // Macros see the globals / top-level names and their own arguments.
      std::vector<std::shared_ptr<Frame>> saved;
      saved.swap(in.frames_);
      in.frames_.push_back(saved.front());
      in.frames_.push_back(frame);
      ++in.call_depth_;
      std::string out;
      Flow f = Flow::kNormal;
      absl::Status st = in.Exec(node->body, &out, &f);
      --in.call_depth_;
      in.frames_.swap(saved);
      MEMRA_RETURN_IF_ERROR(st);
      return Value::Str(std::move(out));
    });
  }

  // --- expressions ---

  absl::StatusOr<Value> GetAttr(const Value& obj, const std::string& name) {
    if (obj.is_dict()) {
      if (Value* v = obj.dict->Find(name)) return *v;
      return Value();
    }
    if (obj.is_list()) {  // numeric attribute: messages.0
      int64_t idx;
      auto r = std::from_chars(name.data(), name.data() + name.size(), idx);
      if (r.ec == std::errc() && r.ptr == name.data() + name.size()) return GetItem(obj, Value::Int(idx));
    }
    return Value();
  }

  absl::StatusOr<Value> GetItem(const Value& obj, const Value& key) {
    if (obj.is_dict()) {
      if (Value* v = obj.dict->Find(key.is_str() ? key.s : Str(key))) return *v;
      return Value();
    }
    if (obj.is_list() && key.is_num()) {
      int64_t i = AsInt(key);
      const int64_t n = static_cast<int64_t>(obj.list->size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      return (*obj.list)[i];
    }
    if (obj.is_str() && key.is_num()) {
      std::u32string u = ToU32(obj.s);
      int64_t i = AsInt(key);
      const int64_t n = static_cast<int64_t>(u.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      return Value::Str(EncodeUtf8(u[i]));
    }
    if (obj.is_str() || obj.is_list()) return GetAttr(obj, key.is_str() ? key.s : "");
    return Value();
  }

  absl::StatusOr<Value> Eval(const Expr& e) {
    MEMRA_RETURN_IF_ERROR(Step(e.line));
    switch (e.kind) {
      case Expr::kLiteral:
        return e.literal;
      case Expr::kName:
        return Lookup(e.name);
      case Expr::kList:
      case Expr::kTuple: {
        std::vector<Value> items;
        for (const ExprP& x : e.args) {
          MEMRA_ASSIGN_OR_RETURN(Value v, Eval(*x));
          items.push_back(std::move(v));
        }
        return e.kind == Expr::kTuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
      }
      case Expr::kDict: {
        Value d = Value::MakeDict();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          MEMRA_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i]));
          MEMRA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1]));
          d.dict->Set(k.is_str() ? k.s : Str(k), std::move(v));
        }
        return d;
      }
      case Expr::kAttr: {
        MEMRA_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
        return GetAttr(obj, e.name);
      }
      case Expr::kItem: {
        MEMRA_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
        MEMRA_ASSIGN_OR_RETURN(Value key, Eval(*e.b));
        return GetItem(obj, key);
      }
      case Expr::kSlice: {
        MEMRA_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
        Value idx[3];
        for (int k = 0; k < 3; ++k) {
          if (e.args[k]) {
            MEMRA_ASSIGN_OR_RETURN(idx[k], Eval(*e.args[k]));
          }
        }
        if (obj.is_list()) {
          std::vector<Value> out;
          for (int64_t i : SliceIndices(obj.list->size(), idx[0], idx[1], idx[2])) out.push_back((*obj.list)[i]);
          return Value::List(std::move(out));
        }
        if (obj.is_str()) {
          std::u32string u = ToU32(obj.s), out;
          for (int64_t i : SliceIndices(u.size(), idx[0], idx[1], idx[2])) out.push_back(u[i]);
          return Value::Str(FromU32(out));
        }
        if (obj.undefined()) return Value();
        return Error(e.line, absl::StrCat("cannot slice ", KindName(obj)));
      }
      case Expr::kCall:
        return EvalCall(e);
      case Expr::kFilter:
        return EvalFilter(e);
      case Expr::kTest: {
        MEMRA_ASSIGN_OR_RETURN(Value v, Eval(*e.a));
        std::vector<Value> args;
        for (const ExprP& x : e.args) {
          MEMRA_ASSIGN_OR_RETURN(Value a, Eval(*x));
          args.push_back(std::move(a));
        }
        MEMRA_ASSIGN_OR_RETURN(bool r, RunTest(e.name, v, args, e.line));
        return Value::Bool(e.negated ? !r : r);
      }
      case Expr::kNeg:
      case Expr::kPos: {
        MEMRA_ASSIGN_OR_RETURN(Value v, Eval(*e.a));
        if (!v.is_num()) return Error(e.line, absl::StrCat("bad operand for unary minus: ", KindName(v)));
        if (e.kind == Expr::kPos) return v;
        if (v.k == Value::K::kFloat) return Value::Float(-v.f);
        const int64_t x = AsInt(v);
        if (x == INT64_MIN) return Error(e.line, "integer overflow");
        return Value::Int(-x);
      }
      case Expr::kNot: {
        MEMRA_ASSIGN_OR_RETURN(Value v, Eval(*e.a));
        return Value::Bool(!Truthy(v));
      }
      case Expr::kAnd: {
        MEMRA_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
        if (!Truthy(a)) return a;
        return Eval(*e.b);
      }
      case Expr::kOr: {
        MEMRA_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
        if (Truthy(a)) return a;
        return Eval(*e.b);
      }
      case Expr::kCond: {
        MEMRA_ASSIGN_OR_RETURN(Value c, Eval(*e.b));
        if (Truthy(c)) return Eval(*e.a);
        if (e.c) return Eval(*e.c);
        return Value();
      }
      case Expr::kBinary: {
        MEMRA_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
        MEMRA_ASSIGN_OR_RETURN(Value b, Eval(*e.b));
        return Binary(e.name, a, b, e.line);
      }
    }
    return Value();
  }

  absl::StatusOr<bool> Contains(const Value& container, const Value& x, int line) {
    if (container.is_str()) {
      if (!x.is_str()) return Error(line, "'in <string>' requires a string on the left");
      return container.s.find(x.s) != std::string::npos;
    }
    if (container.is_list()) {
      for (const Value& v : *container.list)
        if (Equals(v, x)) return true;
      return false;
    }
    if (container.is_dict()) return container.dict->Find(x.is_str() ? x.s : Str(x)) != nullptr;
    if (container.undefined() || container.none()) return false;
    return Error(line, absl::StrCat("'in' needs a string, list or dict, not ", KindName(container)));
  }

  absl::StatusOr<Value> Binary(const std::string& op, const Value& a, const Value& b, int line) {
    if (op == "==") return Value::Bool(Equals(a, b));
    if (op == "!=") return Value::Bool(!Equals(a, b));
    if (op == "in" || op == "notin") {
      MEMRA_ASSIGN_OR_RETURN(bool r, Contains(b, a, line));
      return Value::Bool(op == "in" ? r : !r);
    }
    if (op == "~") return Value::Str(Str(a) + Str(b));
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      int cmp;
      if (a.is_num() && b.is_num()) {
        cmp = a.num() < b.num() ? -1 : a.num() > b.num() ? 1 : 0;
      } else if (a.is_str() && b.is_str()) {
        cmp = a.s.compare(b.s);
      } else {
        return Error(line, absl::StrCat("cannot compare ", KindName(a), " and ", KindName(b)));
      }
      if (op == "<") return Value::Bool(cmp < 0);
      if (op == "<=") return Value::Bool(cmp <= 0);
      if (op == ">") return Value::Bool(cmp > 0);
      return Value::Bool(cmp >= 0);
    }
    if (op == "+") {
      if (a.is_str() && b.is_str()) {
        if (a.s.size() + b.s.size() > opts_.max_output_bytes) return Error(line, "string too long");
        return Value::Str(a.s + b.s);
      }
      if (a.is_list() && b.is_list()) {
        std::vector<Value> v = *a.list;
        v.insert(v.end(), b.list->begin(), b.list->end());
        return Value::List(std::move(v));
      }
    }
    if (op == "*" && ((a.is_str() && b.k == Value::K::kInt) || (b.is_str() && a.k == Value::K::kInt))) {
      const std::string& s = a.is_str() ? a.s : b.s;
      const int64_t n = a.is_str() ? b.i : a.i;
      if (n <= 0 || s.empty()) return Value::Str("");
      if (static_cast<double>(s.size()) * n > opts_.max_output_bytes) return Error(line, "string too long");
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += s;
      return Value::Str(std::move(out));
    }
    if (!a.is_num() || !b.is_num())
      return Error(line, absl::StrCat("unsupported operand types for ", op, ": ", KindName(a), " and ", KindName(b)));
    const bool ints = a.k != Value::K::kFloat && b.k != Value::K::kFloat;
    const double x = a.num(), y = b.num();
    const int64_t xi = AsInt(a), yi = AsInt(b);
    int64_t r = 0;
    auto overflow = [&] { return Error(line, absl::StrCat("integer overflow in ", op)); };
    if (op == "+") {
      if (!ints) return Value::Float(x + y);
      if (__builtin_add_overflow(xi, yi, &r)) return overflow();
      return Value::Int(r);
    }
    if (op == "-") {
      if (!ints) return Value::Float(x - y);
      if (__builtin_sub_overflow(xi, yi, &r)) return overflow();
      return Value::Int(r);
    }
    if (op == "*") {
      if (!ints) return Value::Float(x * y);
      if (__builtin_mul_overflow(xi, yi, &r)) return overflow();
      return Value::Int(r);
    }
    if (op == "/") {
      if (y == 0) return Error(line, "division by zero");
      return Value::Float(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) return Error(line, "division by zero");
      if (ints) {
        if (xi == INT64_MIN && yi == -1) {
          if (op == "%") return Value::Int(0);
          return overflow();
        }
        int64_t q = xi / yi, m = xi % yi;
        if (m != 0 && ((m < 0) != (yi < 0))) {
          --q;
          m += yi;
        }
        return Value::Int(op == "//" ? q : m);
      }
      const double q = std::floor(x / y);
      return Value::Float(op == "//" ? q : x - q * y);
    }
    if (op == "**") {
      if (ints && yi >= 0) {
        if (xi == 0) return Value::Int(yi == 0 ? 1 : 0);
        if (xi == 1) return Value::Int(1);
        if (xi == -1) return Value::Int(yi % 2 ? -1 : 1);
        int64_t acc = 1;  // |xi| >= 2 overflows within 63 steps
        for (int64_t i = 0; i < yi; ++i)
          if (__builtin_mul_overflow(acc, xi, &acc)) return overflow();
        return Value::Int(acc);
      }
      return Value::Float(std::pow(x, y));
    }
    return Error(line, absl::StrCat("unknown operator ", op));
  }

  absl::StatusOr<Args> EvalArgs(const Expr& e) {
    Args args;
    for (const ExprP& x : e.args) {
      MEMRA_ASSIGN_OR_RETURN(Value v, Eval(*x));
      args.pos.push_back(std::move(v));
    }
    for (const auto& [k, x] : e.kwargs) {
      MEMRA_ASSIGN_OR_RETURN(Value v, Eval(*x));
      args.kw.emplace_back(k, std::move(v));
    }
    return args;
  }

  static const Value* Arg(const Args& a, size_t i, absl::string_view name = "") {
    if (i < a.pos.size()) return &a.pos[i];
    if (!name.empty())
      for (const auto& [k, v] : a.kw)
        if (k == name) return &v;
    return nullptr;
  }

  absl::StatusOr<Value> EvalCall(const Expr& e) {
    // Method call: obj.name(...)
    if (e.a->kind == Expr::kAttr) {
      MEMRA_ASSIGN_OR_RETURN(Value obj, Eval(*e.a->a));
      const std::string& name = e.a->name;
      if (!(obj.is_dict() && obj.dict->Find(name))) {
        MEMRA_ASSIGN_OR_RETURN(Args args, EvalArgs(e));
        return CallMethod(obj, name, args, e.line);
      }
    }
    MEMRA_ASSIGN_OR_RETURN(Value callee, Eval(*e.a));
    MEMRA_ASSIGN_OR_RETURN(Args args, EvalArgs(e));
    if (callee.k == Value::K::kFunc) return (*callee.fn)(*this, args);
    if (e.a->kind == Expr::kName) return CallGlobal(e.a->name, args, e.line);
    return Error(e.line, absl::StrCat("cannot call a value of type ", KindName(callee)));
  }

  absl::StatusOr<Value> CallGlobal(const std::string& name, Args& args, int line) {
    if (name == "namespace" || name == "dict") {
      Value ns = Value::MakeDict();
      ns.dict->is_namespace = name == "namespace";
      for (const Value& p : args.pos)  // namespace(dict) / dict(mapping)
        if (p.is_dict())
          for (auto& [k, v] : p.dict->items) ns.dict->Set(k, v);
      for (auto& [k, v] : args.kw) ns.dict->Set(k, v);
      return ns;
    }
    if (name == "range") {
      int64_t start = 0, stop = 0, step = 1;
      if (args.pos.size() == 1) {
        stop = AsInt(args.pos[0]);
      } else if (args.pos.size() >= 2) {
        start = AsInt(args.pos[0]);
        stop = AsInt(args.pos[1]);
        if (args.pos.size() >= 3) step = AsInt(args.pos[2]);
      }
      if (step == 0) return Error(line, "range() step must not be zero");
      std::vector<Value> out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
        if (out.size() >= (1u << 20)) return Error(line, "range() too long");
        out.push_back(Value::Int(i));
        if (__builtin_add_overflow(i, step, &i)) break;
      }
      return Value::List(std::move(out));
    }
    if (name == "raise_exception") {
      return absl::InvalidArgumentError(
          absl::StrCat("chat template raised an exception: ", args.pos.empty() ? "" : Str(args.pos[0])));
    }
    if (name == "strftime_now") {
      const std::string fmt = args.pos.empty() ? "%Y-%m-%d" : Str(args.pos[0]);
      std::time_t t = std::time(nullptr);
      std::tm tm;
      localtime_r(&t, &tm);
      char buf[256];
      const size_t n = std::strftime(buf, sizeof(buf), fmt.c_str(), &tm);
      return Value::Str(std::string(buf, n));
    }
    return Error(line, absl::StrCat("unknown function '", name, "'"));
  }

  absl::StatusOr<Value> CallMethod(const Value& obj, const std::string& name, Args& a, int line) {
    if (obj.is_str()) {
      const std::string& s = obj.s;
      if (name == "startswith" || name == "endswith") {
        const Value* p = Arg(a, 0);
        if (!p) return Error(line, absl::StrCat(name, "() needs an argument"));
        std::vector<std::string> cands;
        if (p->is_list()) {
          for (const Value& v : *p->list) cands.push_back(Str(v));
        } else {
          cands.push_back(Str(*p));
        }
        for (const std::string& c : cands) {
          if (name == "startswith" ? absl::StartsWith(s, c) : absl::EndsWith(s, c)) return Value::Bool(true);
        }
        return Value::Bool(false);
      }
      if (name == "strip" || name == "lstrip" || name == "rstrip") {
        const Value* chars = Arg(a, 0, "chars");
        return Value::Str(PyStrip(s, chars && !chars->none() ? chars : nullptr, name != "rstrip", name != "lstrip"));
      }
      if (name == "split" || name == "rsplit") {
        const Value* sep = Arg(a, 0, "sep");
        const Value* maxs = Arg(a, 1, "maxsplit");
        int64_t maxsplit = maxs && maxs->is_num() ? AsInt(*maxs) : -1;
        std::vector<std::string> parts;
        if (name == "rsplit" && maxsplit >= 0 && sep && sep->is_str() && !sep->s.empty()) {
          // Split from the right.
          std::string rest = s;
          std::vector<std::string> rev;
          while (static_cast<int64_t>(rev.size()) < maxsplit) {
            size_t p = rest.rfind(sep->s);
            if (p == std::string::npos) break;
            rev.push_back(rest.substr(p + sep->s.size()));
            rest.erase(p);
          }
          parts.push_back(rest);
          parts.insert(parts.end(), rev.rbegin(), rev.rend());
        } else {
          parts = PySplit(s, sep && !sep->none() ? sep : nullptr, maxsplit);
        }
        std::vector<Value> out;
        for (auto& p : parts) out.push_back(Value::Str(std::move(p)));
        return Value::List(std::move(out));
      }
      if (name == "splitlines") {
        std::vector<Value> out;
        size_t start = 0;
        for (size_t i = 0; i < s.size(); ++i) {
          if (s[i] == '\n' || s[i] == '\r') {
            out.push_back(Value::Str(s.substr(start, i - start)));
            if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
            start = i + 1;
          }
        }
        if (start < s.size()) out.push_back(Value::Str(s.substr(start)));
        return Value::List(std::move(out));
      }
      if (name == "upper") return Value::Str(CaseMap(s, true));
      if (name == "lower") return Value::Str(CaseMap(s, false));
      if (name == "title" || name == "capitalize") return Filter1(name, obj, a, line);
      if (name == "replace") {
        const Value* from = Arg(a, 0);
        const Value* to = Arg(a, 1);
        if (!from || !to || !from->is_str() || !to->is_str()) return Error(line, "replace() needs two strings");
        const Value* cnt = Arg(a, 2, "count");
        return Value::Str(Replace(s, from->s, to->s, cnt && cnt->is_num() ? AsInt(*cnt) : -1));
      }
      if (name == "find" || name == "rfind" || name == "index" || name == "count") {
        const Value* sub = Arg(a, 0);
        if (!sub || !sub->is_str()) return Error(line, absl::StrCat(name, "() needs a string"));
        if (name == "count") {
          if (sub->s.empty()) return Value::Int(static_cast<int64_t>(ToU32(s).size() + 1));
          int64_t n = 0;
          for (size_t p = s.find(sub->s); p != std::string::npos; p = s.find(sub->s, p + sub->s.size())) ++n;
          return Value::Int(n);
        }
        const size_t p = name == "rfind" ? s.rfind(sub->s) : s.find(sub->s);
        if (p == std::string::npos) {
          if (name == "index") return Error(line, "substring not found");
          return Value::Int(-1);
        }
        return Value::Int(static_cast<int64_t>(ToU32(s.substr(0, p)).size()));
      }
      if (name == "join") {
        const Value* seq = Arg(a, 0);
        if (!seq) return Error(line, "join() needs an argument");
        MEMRA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(*seq, line));
        std::vector<std::string> parts;
        for (const Value& v : items) parts.push_back(Str(v));
        return Value::Str(absl::StrJoin(parts, s));
      }
      if (name == "isdigit" || name == "isalpha" || name == "isspace") {
        if (s.empty()) return Value::Bool(false);
        for (char32_t c : ToU32(s)) {
          const bool ok = name == "isdigit"   ? (c >= '0' && c <= '9')
                          : name == "isspace" ? IsPySpace(c)
                                              : ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c > 0x7F;
          if (!ok) return Value::Bool(false);
        }
        return Value::Bool(true);
      }
    } else if (obj.is_dict()) {
      if (name == "get") {
        const Value* key = Arg(a, 0);
        if (!key) return Error(line, "get() needs a key");
        if (Value* v = obj.dict->Find(key->is_str() ? key->s : Str(*key))) return *v;
        const Value* def = Arg(a, 1, "default");
        return def ? *def : Value::None();
      }
      if (name == "items" || name == "keys" || name == "values") {
        std::vector<Value> out;
        for (const auto& [k, v] : obj.dict->items) {
          if (name == "items")
            out.push_back(Value::Tuple({Value::Str(k), v}));
          else if (name == "keys")
            out.push_back(Value::Str(k));
          else
            out.push_back(v);
        }
        return Value::List(std::move(out));
      }
    } else if (obj.is_list()) {
      if (name == "append") {
        const Value* v = Arg(a, 0);
        if (!v) return Error(line, "append() needs an argument");
        if (obj.list->size() >= (1u << 20)) return Error(line, "list too long");
        obj.list->push_back(*v);
        return Value::None();
      }
      if (name == "index" || name == "count") {
        const Value* v = Arg(a, 0);
        if (!v) return Error(line, absl::StrCat(name, "() needs an argument"));
        int64_t n = 0;
        for (size_t i = 0; i < obj.list->size(); ++i) {
          if (Equals((*obj.list)[i], *v)) {
            if (name == "index") return Value::Int(static_cast<int64_t>(i));
            ++n;
          }
        }
        if (name == "index") return Error(line, "value not in list");
        return Value::Int(n);
      }
    }
    if (obj.undefined()) return Error(line, absl::StrCat("cannot call method '", name, "' of an undefined value"));
    return Error(line, absl::StrCat("unsupported method '", name, "' on ", KindName(obj)));
  }

  static std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
    if (from.empty()) return s;
    std::string out;
    size_t pos = 0;
    int64_t n = 0;
    while (count < 0 || n < count) {
      size_t p = s.find(from, pos);
      if (p == std::string::npos) break;
      out.append(s, pos, p - pos);
      out += to;
      pos = p + from.size();
      ++n;
    }
    out.append(s, pos, std::string::npos);
    return out;
  }

  absl::StatusOr<bool> RunTest(const std::string& name, const Value& v, const std::vector<Value>& args, int line) {
    using K = Value::K;
    if (name == "defined") return !v.undefined();
    if (name == "undefined") return v.undefined();
    if (name == "none") return v.none();
    if (name == "string") return v.is_str();
    if (name == "number") return v.k == K::kInt || v.k == K::kFloat;
    if (name == "integer") return v.k == K::kInt;
    if (name == "float") return v.k == K::kFloat;
    if (name == "boolean") return v.k == K::kBool;
    if (name == "true") return v.k == K::kBool && v.b;
    if (name == "false") return v.k == K::kBool && !v.b;
    if (name == "mapping") return v.is_dict();
    if (name == "sequence") return v.is_list() || v.is_str() || v.is_dict();
    if (name == "iterable") return v.is_list() || v.is_str() || v.is_dict();
    if (name == "callable") return v.k == K::kFunc;
    if (name == "lower" || name == "upper") {
      if (!v.is_str()) return false;
      for (char c : v.s)
        if (name == "lower" ? std::isupper(static_cast<unsigned char>(c)) : std::islower(static_cast<unsigned char>(c)))
          return false;
      return true;
    }
    if (name == "even" || name == "odd") {
      if (v.k != K::kInt) return false;
      return (v.i % 2 == 0) == (name == "even");
    }
    if (args.empty()) return Error(line, absl::StrCat("unsupported test '", name, "' (or missing argument)"));
    const Value& x = args[0];
    if (name == "divisibleby") {
      if (!v.is_num() || !x.is_num() || AsInt(x) == 0) return false;
      return AsInt(v) % AsInt(x) == 0;
    }
    if (name == "eq" || name == "equalto" || name == "==") return Equals(v, x);
    if (name == "ne" || name == "!=") return !Equals(v, x);
    if (name == "sameas") return Equals(v, x) && v.k == x.k;
    if (name == "in") return Contains(x, v, line);
    if (name == "lt" || name == "gt" || name == "le" || name == "ge" || name == "lessthan" || name == "greaterthan") {
      const std::string op = name == "lt" || name == "lessthan"      ? "<"
                             : name == "gt" || name == "greaterthan" ? ">"
                             : name == "le"                          ? "<="
                                                                     : ">=";
      MEMRA_ASSIGN_OR_RETURN(Value r, Binary(op, v, x, line));
      return r.b;
    }
    return Error(line, absl::StrCat("unsupported test '", name, "'"));
  }

  absl::StatusOr<Value> EvalFilter(const Expr& e) {
    MEMRA_ASSIGN_OR_RETURN(Value v, Eval(*e.a));
    MEMRA_ASSIGN_OR_RETURN(Args args, EvalArgs(e));
    return Filter1(e.name, v, args, e.line);
  }

  // Applies filter `name` to `v`.
  absl::StatusOr<Value> Filter1(const std::string& name, const Value& v, Args& a, int line) {
    using K = Value::K;
    if (name == "safe" || name == "e" || name == "escape" || name == "forceescape") {
      if (name == "safe") return v;
      return Value::Str(Escape(Str(v)));
    }
    if (name == "length" || name == "count") {
      if (v.is_str()) return Value::Int(static_cast<int64_t>(ToU32(v.s).size()));
      if (v.is_list()) return Value::Int(static_cast<int64_t>(v.list->size()));
      if (v.is_dict()) return Value::Int(static_cast<int64_t>(v.dict->items.size()));
      if (v.undefined()) return Value::Int(0);
      return Error(line, absl::StrCat("length of ", KindName(v)));
    }
    if (name == "string") return Value::Str(Str(v));
    if (name == "tojson") {
      MEMRA_ASSIGN_OR_RETURN(Json j, ToJson(v));
      Json::DumpOptions o;
      const Value* indent = Arg(a, 0, "indent");
      if (indent && indent->is_num()) {
        o.indent = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(AsInt(*indent), 64)));
        o.item_separator = ",";
      }
      const Value* ea = Arg(a, 99, "ensure_ascii");
      if (ea) o.ensure_ascii = Truthy(*ea);
      return Value::Str(j.Dump(o));
    }
    if (name == "trim") {
      const Value* chars = Arg(a, 0, "chars");
      return Value::Str(PyStrip(Str(v), chars && chars->is_str() ? chars : nullptr, true, true));
    }
    if (name == "upper") return Value::Str(CaseMap(Str(v), true));
    if (name == "lower") return Value::Str(CaseMap(Str(v), false));
    if (name == "capitalize" || name == "title") {
      std::string s = AsciiMap(Str(v), ::tolower);
      bool start = true;
      for (char& c : s) {
        if (start && std::isalpha(static_cast<unsigned char>(c))) c = static_cast<char>(::toupper(c));
        if (name == "title") {
          start = !std::isalnum(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 0x80;
        } else {
          start = false;
        }
      }
      return Value::Str(s);
    }
    if (name == "default" || name == "d") {
      const Value* def = Arg(a, 0, "default_value");
      const Value* boolean = Arg(a, 1, "boolean");
      const bool use_def = v.undefined() || (boolean && Truthy(*boolean) && !Truthy(v));
      return use_def ? (def ? *def : Value::Str("")) : v;
    }
    if (name == "join") {
      const Value* sep = Arg(a, 0, "d");
      const Value* attr = Arg(a, 1, "attribute");
      MEMRA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v, line));
      std::vector<std::string> parts;
      for (const Value& x : items) {
        if (attr) {
          MEMRA_ASSIGN_OR_RETURN(Value y, GetAttr(x, Str(*attr)));
          parts.push_back(Str(y));
        } else {
          parts.push_back(Str(x));
        }
      }
      return Value::Str(absl::StrJoin(parts, sep ? Str(*sep) : ""));
    }
    if (name == "first" || name == "last") {
      MEMRA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v, line));
      if (items.empty()) return Value();
      return name == "first" ? items.front() : items.back();
    }
    if (name == "items" || name == "dictsort") {
      if (v.undefined() || v.none()) return Value::List();
      if (!v.is_dict()) return Error(line, absl::StrCat(name, " needs a mapping, not ", KindName(v)));
      std::vector<Value> out;
      for (const auto& [k, x] : v.dict->items) out.push_back(Value::Tuple({Value::Str(k), x}));
      if (name == "dictsort")
        std::stable_sort(out.begin(), out.end(), [](const Value& p, const Value& q) {
          return AsciiMap((*p.list)[0].s, ::tolower) < AsciiMap((*q.list)[0].s, ::tolower);
        });
      return Value::List(std::move(out));
    }
    if (name == "list") {
      MEMRA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v, line));
      return Value::List(std::move(items));
    }
    if (name == "reverse") {
      if (v.is_str()) {
        std::u32string u = ToU32(v.s);
        std::reverse(u.begin(), u.end());
        return Value::Str(FromU32(u));
      }
      MEMRA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v, line));
      std::reverse(items.begin(), items.end());
      return Value::List(std::move(items));
    }
    if (name == "unique") {
      MEMRA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v, line));
      std::vector<Value> out;
      for (const Value& x : items) {
        bool seen = false;
        for (const Value& y : out) seen = seen || Equals(x, y);
        if (!seen) out.push_back(x);
      }
      return Value::List(std::move(out));
    }
    if (name == "replace") {
      const Value* from = Arg(a, 0);
      const Value* to = Arg(a, 1);
      if (!from || !to) return Error(line, "replace needs two arguments");
      const Value* cnt = Arg(a, 2, "count");
      return Value::Str(Replace(Str(v), Str(*from), Str(*to), cnt && cnt->is_num() ? AsInt(*cnt) : -1));
    }
    if (name == "int") {
      if (v.is_num()) return Value::Int(AsInt(v));
      if (v.is_str()) {
        std::string s = PyStrip(v.s, nullptr, true, true);
        int64_t x = 0;
        auto r = std::from_chars(s.data(), s.data() + s.size(), x);
        if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return Value::Int(x);
        double d;
        auto r2 = std::from_chars(s.data(), s.data() + s.size(), d);
        if (r2.ec == std::errc() && r2.ptr == s.data() + s.size()) return Value::Int(ToI64(d));
      }
      const Value* def = Arg(a, 0, "default");
      return def ? *def : Value::Int(0);
    }
    if (name == "float") {
      if (v.is_num()) return Value::Float(v.num());
      if (v.is_str()) {
        std::string s = PyStrip(v.s, nullptr, true, true);
        double d;
        auto r = std::from_chars(s.data(), s.data() + s.size(), d);
        if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return Value::Float(d);
      }
      const Value* def = Arg(a, 0, "default");
      return def ? *def : Value::Float(0);
    }
    if (name == "abs") {
      if (v.k == K::kInt) return Value::Int(v.i < 0 ? -v.i : v.i);
      if (v.is_num()) return Value::Float(std::fabs(v.num()));
      return Error(line, "abs of a non-number");
    }
    if (name == "round") {
      const Value* prec = Arg(a, 0, "precision");
      const Value* method = Arg(a, 1, "method");
      const double scale = std::pow(10.0, prec && prec->is_num() ? prec->num() : 0);
      const std::string m = method ? Str(*method) : "common";
      double x = v.num() * scale;
      x = m == "floor" ? std::floor(x) : m == "ceil" ? std::ceil(x) : std::nearbyint(x);
      return Value::Float(x / scale);
    }
    if (name == "sum" || name == "min" || name == "max") {
      MEMRA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v, line));
      if (name == "sum") {
        Value acc = Value::Int(0);
        if (const Value* start = Arg(a, 1, "start")) acc = *start;
        for (const Value& x : items) {
          MEMRA_ASSIGN_OR_RETURN(acc, Binary("+", acc, x, line));
        }
        return acc;
      }
      if (items.empty()) return Value();
      Value best = items[0];
      for (const Value& x : items) {
        MEMRA_ASSIGN_OR_RETURN(Value lt, Binary("<", x, best, line));
        if (lt.b == (name == "min")) best = x;
      }
      return best;
    }
    if (name == "indent") {
      const Value* width = Arg(a, 0, "width");
      const Value* first = Arg(a, 1, "first");
      const Value* blank = Arg(a, 2, "blank");
      const std::string pad =
          width && width->is_str()
              ? width->s
              : std::string(
                    width && width->is_num() ? static_cast<size_t>(std::max(0.0, std::min(width->num(), 1000.0))) : 4,
                    ' ');
      const std::string s = Str(v);
      std::string out;
      size_t start = 0;
      bool first_line = true;
      while (start <= s.size()) {
        size_t nl = s.find('\n', start);
        const std::string ln = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        const bool do_pad = (!first_line || (first && Truthy(*first))) && (!ln.empty() || (blank && Truthy(*blank)));
        if (do_pad) out += pad;
        out += ln;
        if (nl == std::string::npos) break;
        out += '\n';
        start = nl + 1;
        first_line = false;
      }
      return Value::Str(out);
    }
    if (name == "map" || name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
      MEMRA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v, line));
      std::vector<Value> out;
      if (name == "map") {
        const Value* attr = Arg(a, 99, "attribute");
        const Value* def = Arg(a, 99, "default");
        for (const Value& x : items) {
          if (attr) {
            MEMRA_ASSIGN_OR_RETURN(Value y, GetAttr(x, Str(*attr)));
            out.push_back(y.undefined() && def ? *def : y);
          } else {
            if (a.pos.empty()) return Error(line, "map needs a filter name or attribute=");
            Args rest;
            rest.pos.assign(a.pos.begin() + 1, a.pos.end());
            rest.kw = a.kw;
            MEMRA_ASSIGN_OR_RETURN(Value y, Filter1(Str(a.pos[0]), x, rest, line));
            out.push_back(y);
          }
        }
        return Value::List(std::move(out));
      }
      const bool by_attr = name == "selectattr" || name == "rejectattr";
      const bool keep_if = name == "select" || name == "selectattr";
      size_t ti = by_attr ? 1 : 0;  // index of the test name among the arguments
      if (by_attr && a.pos.empty()) return Error(line, absl::StrCat(name, " needs an attribute"));
      for (const Value& x : items) {
        Value subject = x;
        if (by_attr) {
          MEMRA_ASSIGN_OR_RETURN(subject, GetAttr(x, Str(a.pos[0])));
        }
        bool r;
        if (a.pos.size() <= ti) {
          r = Truthy(subject);
        } else {
          std::vector<Value> targs(a.pos.begin() + ti + 1, a.pos.end());
          MEMRA_ASSIGN_OR_RETURN(r, RunTest(Str(a.pos[ti]), subject, targs, line));
        }
        if (r == keep_if) out.push_back(x);
      }
      return Value::List(std::move(out));
    }
    if (name == "sort") {
      MEMRA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v, line));
      const Value* reverse = Arg(a, 0, "reverse");
      const Value* attr = Arg(a, 2, "attribute");
      absl::Status st;
      auto key = [&](const Value& x) -> Value {
        if (!attr) return x;
        auto y = GetAttr(x, Str(*attr));
        return y.ok() ? *y : Value();
      };
      std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
        auto r = Binary("<", key(p), key(q), line);
        if (!r.ok()) {
          st = r.status();
          return false;
        }
        return r->b;
      });
      MEMRA_RETURN_IF_ERROR(st);
      if (reverse && Truthy(*reverse)) std::reverse(items.begin(), items.end());
      return Value::List(std::move(items));
    }
    if (name == "wordcount") return Value::Int(static_cast<int64_t>(PySplit(Str(v), nullptr, -1).size()));
    return Error(line, absl::StrCat("unsupported filter '", name, "'"));
  }

  static std::string Escape(const std::string& s) {
    std::string out;
    for (char c : s) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&#34;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          out.push_back(c);
      }
    }
    return out;
  }

  const Options& opts_;
  std::vector<std::shared_ptr<Frame>> frames_;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
};

}  // namespace

struct Template::Impl {
  Options options;
  Body body;
};

Template::Template(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Template::~Template() = default;

absl::StatusOr<std::unique_ptr<Template>> Template::Parse(absl::string_view source, Options options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  Lexer lexer(source, impl->options);
  MEMRA_ASSIGN_OR_RETURN(std::vector<Segment> segs, lexer.Run());
  Parser parser(std::move(segs));
  MEMRA_ASSIGN_OR_RETURN(impl->body, parser.ParseAll());
  return std::unique_ptr<Template>(new Template(std::move(impl)));
}

absl::StatusOr<std::string> Template::Render(const Json& variables) const {
  Interp in(impl_->options);
  auto globals = std::make_shared<Frame>();
  for (const auto& [k, v] : variables.object()) globals->emplace_back(k, FromJson(v));
  in.frames_.push_back(globals);
  std::string out;
  Interp::Flow flow = Interp::Flow::kNormal;
  MEMRA_RETURN_IF_ERROR(in.Exec(impl_->body, &out, &flow));
  return out;
}

}  // namespace memra::tokenizer::jinja
