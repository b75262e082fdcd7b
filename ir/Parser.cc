#include "ir/Parser.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ir/Printer.h"
#include "ir/StatusMacros.h"

namespace memra::ir {
namespace {

enum class Tok {
  kEof,
  kIdent,       // keyword, mnemonic, dtype, symbol, attribute name
  kValueName,   // %name (text = name)
  kGlobalName,  // @name or @"quoted" (text = decoded name)
  kInt,
  kFloat,
  kString,  // text = decoded contents
  kPunct,   // ( ) { } [ ] , : = * + - ->
  kError,   // lexing error; text = message
};

struct Token {
  Tok kind;
  std::string text;
  int line;
  int col;
};

std::string Describe(const Token& t) {
  switch (t.kind) {
    case Tok::kEof:
      return "end of input";
    case Tok::kValueName:
      return absl::StrCat("'%", t.text, "'");
    case Tok::kGlobalName:
      return absl::StrCat("'@", t.text, "'");
    case Tok::kString:
      return absl::StrCat("string ", QuoteString(t.text));
    default:
      return absl::StrCat("'", t.text, "'");
  }
}

bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || IsDigit(c); }
bool IsNameChar(char c) { return IsIdentChar(c) || c == '.' || c == '-'; }

class Lexer {
 public:
  Lexer(absl::string_view text, int first_line) : s_(text), line_(first_line) {}

  std::vector<Token> Run() {
    std::vector<Token> out;
    while (true) {
      Token t = Next();
      out.push_back(t);
      if (t.kind == Tok::kEof || t.kind == Tok::kError) break;
    }
    return out;
  }

 private:
  char Peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  void Advance() {
    if (s_[i_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++i_;
  }

  Token Make(Tok k, std::string text, int line, int col) { return Token{k, std::move(text), line, col}; }

  // Reads a "string" at i_ (on the quote); returns false with `err` on a bad string.
  bool ReadString(std::string* out, std::string* err) {
    Advance();  // opening quote
    while (true) {
      if (i_ >= s_.size() || Peek() == '\n') {
        *err = "unterminated string";
        return false;
      }
      char c = Peek();
      if (c == '"') {
        Advance();
        return true;
      }
      if (c == '\\') {
        Advance();
        char e = Peek();
        if (e == 'n')
          out->push_back('\n');
        else if (e == 't')
          out->push_back('\t');
        else if (e == '"' || e == '\\')
          out->push_back(e);
        else if (e == 'x') {
          auto hex = [](char h) -> int {
            if (h >= '0' && h <= '9') return h - '0';
            if (h >= 'a' && h <= 'f') return h - 'a' + 10;
            if (h >= 'A' && h <= 'F') return h - 'A' + 10;
            return -1;
          };
          int hi = hex(Peek(1)), lo = hex(Peek(2));
          if (hi < 0 || lo < 0) {
            *err = "bad \\x escape in string (expected two hex digits)";
            return false;
          }
          out->push_back(static_cast<char>(hi * 16 + lo));
          Advance();
          Advance();
        } else {
          *err = "unknown escape in string (expected \\n, \\t, \\\", \\\\ or \\xNN)";
          return false;
        }
        Advance();
        continue;
      }
      out->push_back(c);
      Advance();
    }
  }

  Token Next() {
    // Skip whitespace and // comments.
    while (i_ < s_.size()) {
      char c = Peek();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        Advance();
      } else if (c == '/' && Peek(1) == '/') {
        while (i_ < s_.size() && Peek() != '\n') Advance();
      } else {
        break;
      }
    }
    int line = line_, col = col_;
    if (i_ >= s_.size()) return Make(Tok::kEof, "", line, col);
    char c = Peek();
    if (c == '%' || c == '@') {
      Tok kind = c == '%' ? Tok::kValueName : Tok::kGlobalName;
      Advance();
      if (c == '@' && Peek() == '"') {
        std::string name, err;
        if (!ReadString(&name, &err)) return Make(Tok::kError, err, line, col);
        return Make(kind, name, line, col);
      }
      size_t start = i_;
      while (i_ < s_.size() && IsNameChar(Peek())) Advance();
      if (start == i_)
        return Make(Tok::kError, absl::StrCat("expected a name after '", std::string(1, c), "'"), line, col);
      return Make(kind, std::string(s_.substr(start, i_ - start)), line, col);
    }
    if (c == '"') {
      std::string str, err;
      if (!ReadString(&str, &err)) return Make(Tok::kError, err, line, col);
      return Make(Tok::kString, str, line, col);
    }
    if (IsDigit(c) || (c == '-' && (IsDigit(Peek(1)) || s_.substr(i_ + 1, 3) == "inf"))) {
      size_t start = i_;
      if (c == '-') Advance();
      if (Peek() == 'i') {  // -inf
        Advance();
        Advance();
        Advance();
        return Make(Tok::kFloat, "-inf", line, col);
      }
      bool is_float = false;
      while (IsDigit(Peek())) Advance();
      if (Peek() == '.' && IsDigit(Peek(1))) {
        is_float = true;
        Advance();
        while (IsDigit(Peek())) Advance();
      } else if (Peek() == '.' && !IsNameChar(Peek(1))) {
        is_float = true;
        Advance();
      }
      if ((Peek() == 'e' || Peek() == 'E') &&
          (IsDigit(Peek(1)) || ((Peek(1) == '-' || Peek(1) == '+') && IsDigit(Peek(2))))) {
        is_float = true;
        Advance();
        if (Peek() == '-' || Peek() == '+') Advance();
        while (IsDigit(Peek())) Advance();
      }
      return Make(is_float ? Tok::kFloat : Tok::kInt, std::string(s_.substr(start, i_ - start)), line, col);
    }
    if (IsIdentStart(c)) {
      size_t start = i_;
      while (i_ < s_.size() && IsIdentChar(Peek())) Advance();
      return Make(Tok::kIdent, std::string(s_.substr(start, i_ - start)), line, col);
    }
    if (c == '-' && Peek(1) == '>') {
      Advance();
      Advance();
      return Make(Tok::kPunct, "->", line, col);
    }
    if (std::string("(){}[],:=*+-").find(c) != std::string::npos) {
      Advance();
      return Make(Tok::kPunct, std::string(1, c), line, col);
    }
    std::string shown = (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
                            ? absl::StrCat("byte 0x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2))
                            : absl::StrCat("'", std::string(1, c), "'");
    return Make(Tok::kError, absl::StrCat("unexpected character ", shown), line, col);
  }

  absl::string_view s_;
  size_t i_ = 0;
  int line_;
  int col_ = 1;
};

constexpr int kMaxNesting = 32;

class Parser {
 public:
  Parser(std::vector<Token> toks, const ParseOptions& opts) : toks_(std::move(toks)), opts_(opts) {}

  absl::StatusOr<std::unique_ptr<Module>> Run() {
    module_ = std::make_unique<Module>();
    while (!At(Tok::kEof)) {
      if (Cur().kind == Tok::kError) return Error(Cur(), Cur().text);
      if (IsKeyword("module")) {
        MEMRA_RETURN_IF_ERROR(ParseModuleAttrs());
      } else if (IsKeyword("weight")) {
        MEMRA_RETURN_IF_ERROR(ParseWeight());
      } else if (IsKeyword("state")) {
        MEMRA_RETURN_IF_ERROR(ParseState());
      } else if (IsKeyword("func")) {
        MEMRA_RETURN_IF_ERROR(ParseFunction());
      } else {
        return Expected("'module', 'weight', 'state' or 'func'");
      }
    }
    return std::move(module_);
  }

 private:
  const Token& Cur() const { return toks_[pos_]; }
  const Token& PeekTok(size_t k) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  bool At(Tok k) const { return Cur().kind == k; }
  bool IsPunct(absl::string_view p) const { return Cur().kind == Tok::kPunct && Cur().text == p; }
  bool IsKeyword(absl::string_view k) const { return Cur().kind == Tok::kIdent && Cur().text == k; }
  void Consume() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }

  absl::Status Error(const Token& t, absl::string_view msg) const {
    std::string where = absl::StrCat(t.line, ":", t.col);
    if (!opts_.filename.empty()) where = absl::StrCat(opts_.filename, ":", where);
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", msg));
  }
  absl::Status Expected(absl::string_view what) const {
    if (Cur().kind == Tok::kError) return Error(Cur(), Cur().text);
    return Error(Cur(), absl::StrCat("expected ", what, ", got ", Describe(Cur())));
  }
  absl::Status ExpectPunct(absl::string_view p, absl::string_view context = "") {
    if (!IsPunct(p)) return Expected(context.empty() ? absl::StrCat("'", p, "'") : absl::StrCat("'", p, "' ", context));
    Consume();
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> ParseGlobalName(absl::string_view what) {
    if (!At(Tok::kGlobalName)) return Expected(what);
    std::string n = Cur().text;
    Consume();
    return n;
  }

  absl::StatusOr<int64_t> ParseInt(absl::string_view what) {
    if (!At(Tok::kInt)) return Expected(what);
    int64_t v;
    if (!absl::SimpleAtoi(Cur().text, &v))
      return Error(Cur(), absl::StrCat("integer ", Cur().text, " is out of range"));
    Consume();
    return v;
  }

  absl::StatusOr<Dim> ParseDim() {
    const Token start = Cur();
    int64_t coeff = 1;
    if (IsPunct("-") && PeekTok(1).kind == Tok::kIdent) {
      Consume();
      coeff = -1;
    } else if (At(Tok::kInt)) {
      MEMRA_ASSIGN_OR_RETURN(int64_t v, ParseInt("a dimension"));
      if (!IsPunct("*")) {
        if (v < 0) return Error(start, "dimension must not be negative");
        return Dim(v);
      }
      Consume();
      coeff = v;
      if (coeff == 0) return Error(start, "symbol coefficient must not be 0");
    }
    if (!At(Tok::kIdent)) return Expected("a dimension (integer or symbol)");
    std::string sym = Cur().text;
    Consume();
    int64_t offset = 0;
    if (IsPunct("+")) {
      Consume();
      MEMRA_ASSIGN_OR_RETURN(offset, ParseInt("an integer after '+' in a dimension"));
    } else if (At(Tok::kInt) && !Cur().text.empty() && Cur().text[0] == '-') {
      MEMRA_ASSIGN_OR_RETURN(offset, ParseInt("an integer"));
    }
    return Dim::Symbol(sym, coeff, offset);
  }

  absl::StatusOr<TensorType> ParseType() {
    if (!At(Tok::kIdent)) return Expected("a type such as f32[T, 4096]");
    std::optional<DType> dt = ParseDType(Cur().text);
    if (!dt) return Error(Cur(), absl::StrCat("unknown dtype '", Cur().text, "'"));
    Consume();
    MEMRA_RETURN_IF_ERROR(ExpectPunct("[", "to start the shape"));
    Shape shape;
    if (!IsPunct("]")) {
      while (true) {
        if (shape.rank() >= 16) return Error(Cur(), "shape has more than 16 dimensions");
        MEMRA_ASSIGN_OR_RETURN(Dim d, ParseDim());
        shape.push_back(std::move(d));
        if (IsPunct(",")) {
          Consume();
          continue;
        }
        break;
      }
    }
    MEMRA_RETURN_IF_ERROR(ExpectPunct("]", "or ',' in the shape"));
    return TensorType(*dt, std::move(shape));
  }

  absl::StatusOr<Attr> ParseAttrValue() {
    const Token& t = Cur();
    if (t.kind == Tok::kInt) {
      MEMRA_ASSIGN_OR_RETURN(int64_t v, ParseInt("an integer"));
      return Attr(v);
    }
    if (t.kind == Tok::kFloat || (t.kind == Tok::kIdent && (t.text == "inf" || t.text == "nan"))) {
      double v = t.text == "nan" ? std::nan("") : std::strtod(t.text.c_str(), nullptr);
      Consume();
      return Attr(v);
    }
    if (t.kind == Tok::kString) {
      std::string s = t.text;
      Consume();
      return Attr(s);
    }
    if (IsPunct("[")) {
      Consume();
      std::vector<int64_t> ints;
      std::vector<double> floats;
      std::vector<std::string> strings;
      bool any_float = false;
      if (At(Tok::kString)) {  // ["a", "b"]: an array of strings
        while (true) {
          if (!At(Tok::kString)) return Expected("a string in the array");
          strings.push_back(Cur().text);
          Consume();
          if (!IsPunct(",")) break;
          Consume();
        }
        MEMRA_RETURN_IF_ERROR(ExpectPunct("]", "or ',' in the array"));
        return Attr(std::move(strings));
      }
      if (!IsPunct("]")) {
        while (true) {
          if (At(Tok::kInt)) {
            MEMRA_ASSIGN_OR_RETURN(int64_t v, ParseInt("an integer"));
            ints.push_back(v);
            floats.push_back(static_cast<double>(v));
          } else if (At(Tok::kFloat) || (At(Tok::kIdent) && (Cur().text == "inf" || Cur().text == "nan"))) {
            any_float = true;
            floats.push_back(Cur().text == "nan" ? std::nan("") : std::strtod(Cur().text.c_str(), nullptr));
            Consume();
          } else {
            return Expected("a number in the array");
          }
          if (IsPunct(",")) {
            Consume();
            continue;
          }
          break;
        }
      }
      MEMRA_RETURN_IF_ERROR(ExpectPunct("]", "or ',' in the array"));
      if (any_float) return Attr(floats);
      return Attr(ints);
    }
    return Expected("an attribute value (integer, float, string or [array])");
  }

  // `{name = value, ...}`; `schema` (optional) coerces integers to f64 where it says f64.
  absl::Status ParseAttrDict(AttrDict* out, const OpInfo* schema) {
    MEMRA_RETURN_IF_ERROR(ExpectPunct("{"));
    if (IsPunct("}")) {
      Consume();
      return absl::OkStatus();
    }
    while (true) {
      if (!At(Tok::kIdent)) return Expected("an attribute name");
      Token name = Cur();
      Consume();
      if (out->Has(name.text)) return Error(name, absl::StrCat("duplicate attribute '", name.text, "'"));
      MEMRA_RETURN_IF_ERROR(ExpectPunct("=", "after the attribute name"));
      MEMRA_ASSIGN_OR_RETURN(Attr v, ParseAttrValue());
      if (schema) {
        if (const AttrSpec* spec = schema->attr_spec(name.text)) {
          if (spec->kind == AttrKind::kF64 && v.is_i64()) v = Attr(static_cast<double>(v.i64()));
          if (spec->kind == AttrKind::kF64Array && v.is_i64_array()) {
            std::vector<double> d(v.i64_array().begin(), v.i64_array().end());
            v = Attr(d);
          }
        }
      }
      out->Set(name.text, std::move(v));
      if (IsPunct(",")) {
        Consume();
        continue;
      }
      break;
    }
    return ExpectPunct("}", "or ',' in the attribute dictionary");
  }

  absl::Status ParseModuleAttrs() {
    Consume();  // module
    if (!IsKeyword("attributes")) return Expected("'attributes' after 'module'");
    Consume();
    return ParseAttrDict(&module_->attrs(), nullptr);
  }

  absl::Status ParseWeight() {
    Consume();  // weight
    Token name_tok = Cur();
    MEMRA_ASSIGN_OR_RETURN(std::string name, ParseGlobalName("a weight name such as @blk.0.attn_norm.weight"));
    MEMRA_RETURN_IF_ERROR(ExpectPunct(":", "after the weight name"));
    MEMRA_ASSIGN_OR_RETURN(TensorType type, ParseType());
    Weight* w = module_->AddWeight(name, type.dtype, type.shape);
    if (!w) return Error(name_tok, absl::StrCat("redefinition of @", name));
    if (IsPunct("{")) MEMRA_RETURN_IF_ERROR(ParseAttrDict(&w->attrs(), nullptr));
    return absl::OkStatus();
  }

  absl::Status ParseState() {
    Consume();  // state
    if (!At(Tok::kIdent)) return Expected("a state kind (kv, conv, delta, position, rng)");
    std::optional<StateKind> kind = ParseStateKind(Cur().text);
    if (!kind)
      return Error(
          Cur(), absl::StrCat("unknown state kind '", Cur().text, "' (expected kv, conv, delta, position or blocks)"));
    Consume();
    Token name_tok = Cur();
    MEMRA_ASSIGN_OR_RETURN(std::string name, ParseGlobalName("a state name"));
    MEMRA_RETURN_IF_ERROR(ExpectPunct(":", "after the state name"));
    MEMRA_ASSIGN_OR_RETURN(TensorType type, ParseType());
    StateVar* s = module_->AddState(*kind, name, type);
    if (!s) return Error(name_tok, absl::StrCat("redefinition of @", name));
    if (IsPunct("{")) MEMRA_RETURN_IF_ERROR(ParseAttrDict(&s->attrs(), nullptr));
    return absl::OkStatus();
  }

  absl::Status ParseFunction() {
    Consume();  // func
    Token name_tok = Cur();
    MEMRA_ASSIGN_OR_RETURN(std::string name, ParseGlobalName("a function name such as @prefill"));
    Function* f = module_->AddFunction(name);
    if (!f) return Error(name_tok, absl::StrCat("redefinition of function @", name));
    func_ = f;
    values_.clear();
    placeholders_.clear();
    MEMRA_RETURN_IF_ERROR(ExpectPunct("(", "to start the argument list"));
    if (!IsPunct(")")) {
      while (true) {
        if (!At(Tok::kValueName)) return Expected("an argument such as %tok");
        Token arg = Cur();
        Consume();
        MEMRA_RETURN_IF_ERROR(ExpectPunct(":", "after the argument name"));
        MEMRA_ASSIGN_OR_RETURN(TensorType t, ParseType());
        if (values_.contains(arg.text)) return Error(arg, absl::StrCat("redefinition of %", arg.text));
        values_[arg.text] = f->AddArgument(arg.text, t);
        if (IsPunct(",")) {
          Consume();
          continue;
        }
        break;
      }
    }
    MEMRA_RETURN_IF_ERROR(ExpectPunct(")", "or ',' in the argument list"));
    if (IsPunct("->")) {
      Consume();
      MEMRA_RETURN_IF_ERROR(ExpectPunct("(", "to start the result types"));
      std::vector<TensorType> results;
      if (!IsPunct(")")) {
        while (true) {
          MEMRA_ASSIGN_OR_RETURN(TensorType t, ParseType());
          results.push_back(t);
          if (IsPunct(",")) {
            Consume();
            continue;
          }
          break;
        }
      }
      MEMRA_RETURN_IF_ERROR(ExpectPunct(")", "or ',' in the result types"));
      f->set_result_types(results);
    }
    if (IsKeyword("attributes")) {
      Consume();
      MEMRA_RETURN_IF_ERROR(ParseAttrDict(&f->attrs(), nullptr));
    }
    MEMRA_RETURN_IF_ERROR(ExpectPunct("{", "to start the function body"));
    MEMRA_RETURN_IF_ERROR(ParseBlock(f->body(), 0));
    MEMRA_RETURN_IF_ERROR(ExpectPunct("}", "to end the function body"));
    for (auto& [n, ph] : placeholders_) {
      if (ph.value && ph.value->has_uses()) return Error(ph.first_use, absl::StrCat("use of undefined value %", n));
    }
    placeholders_.clear();
    return absl::OkStatus();
  }

  absl::Status ParseBlock(Block* block, int depth) {
    if (depth > kMaxNesting) return Error(Cur(), "segments nested too deeply");
    while (!IsPunct("}") && !At(Tok::kEof)) MEMRA_RETURN_IF_ERROR(ParseOp(block, depth));
    return absl::OkStatus();
  }

  absl::StatusOr<Value*> ParseOperand() {
    if (At(Tok::kGlobalName)) {
      Value* g = module_->LookupGlobal(Cur().text);
      if (!g) return Error(Cur(), absl::StrCat("unknown weight or state @", Cur().text));
      Consume();
      return g;
    }
    if (!At(Tok::kValueName)) return Expected("an operand (%value or @global)");
    Token t = Cur();
    Consume();
    auto it = values_.find(t.text);
    if (it != values_.end()) return it->second;
    Placeholder& ph = placeholders_[t.text];
    if (!ph.value) {
      ph.value = std::make_unique<Value>(Value::Kind::kArgument, TensorType(), t.text);
      ph.first_use = t;
    }
    return ph.value.get();
  }

  absl::Status ParseOp(Block* block, int depth) {
    Token start = Cur();
    std::vector<Token> result_names;
    if (At(Tok::kValueName)) {
      while (true) {
        if (!At(Tok::kValueName)) return Expected("a result name");
        result_names.push_back(Cur());
        Consume();
        if (IsPunct(",")) {
          Consume();
          continue;
        }
        break;
      }
      MEMRA_RETURN_IF_ERROR(ExpectPunct("=", "after the result names"));
    }
    if (!At(Tok::kIdent)) return Expected("an op name");
    Token mn = Cur();
    std::optional<OpKind> kind = LookupOpKind(mn.text);
    if (!kind) return Error(mn, absl::StrCat("unknown op '", mn.text, "'"));
    Consume();
    const OpInfo& info = InfoOf(*kind);
    llvm::SmallVector<Value*, 4> operands;
    if (*kind == OpKind::kReturn) {
      if (At(Tok::kValueName) || At(Tok::kGlobalName)) {
        while (true) {
          MEMRA_ASSIGN_OR_RETURN(Value * v, ParseOperand());
          operands.push_back(v);
          if (IsPunct(",")) {
            Consume();
            continue;
          }
          break;
        }
      }
    } else if (IsPunct("(")) {
      Consume();
      if (!IsPunct(")")) {
        while (true) {
          MEMRA_ASSIGN_OR_RETURN(Value * v, ParseOperand());
          operands.push_back(v);
          if (IsPunct(",")) {
            Consume();
            continue;
          }
          break;
        }
      }
      MEMRA_RETURN_IF_ERROR(ExpectPunct(")", "or ',' in the operand list"));
    } else if (!info.HasFlag(op_flags::kRegion)) {
      return Expected(absl::StrCat("'(' after '", mn.text, "'"));
    }
    AttrDict attrs;
    // `{` starts attributes if it is `{}` or `{name =`; otherwise (a region op) the body.
    if (IsPunct("{") &&
        (PeekTok(1).kind == Tok::kPunct && PeekTok(1).text == "}"
             ? !info.HasFlag(op_flags::kRegion) || (PeekTok(2).kind == Tok::kPunct && PeekTok(2).text == "{")
             : (PeekTok(1).kind == Tok::kIdent && PeekTok(2).kind == Tok::kPunct && PeekTok(2).text == "="))) {
      MEMRA_RETURN_IF_ERROR(ParseAttrDict(&attrs, &info));
    }
    std::vector<TensorType> types;
    if (IsPunct(":")) {
      Consume();
      while (true) {
        MEMRA_ASSIGN_OR_RETURN(TensorType t, ParseType());
        types.push_back(t);
        if (IsPunct(",")) {
          Consume();
          continue;
        }
        break;
      }
    }
    if (types.size() != result_names.size()) {
      if (result_names.empty())
        return Error(start, absl::StrCat("'", mn.text, "' has ", types.size(), " result types but no result names"));
      return Error(start, absl::StrCat("'", mn.text, "' names ", result_names.size(), " results but has ", types.size(),
                                       " result types", types.empty() ? " (expected ':' and the result types)" : ""));
    }
    std::unique_ptr<Op> op = Op::Create(*kind, operands, types, std::move(attrs));
    op->set_loc(Loc{start.line, start.col});
    Op* placed = block->PushBack(std::move(op));
    for (size_t i = 0; i < result_names.size(); ++i) {
      const Token& rn = result_names[i];
      if (values_.contains(rn.text)) return Error(rn, absl::StrCat("redefinition of %", rn.text));
      Value* r = placed->result(i);
      r->set_name(rn.text);
      values_[rn.text] = r;
      auto ph = placeholders_.find(rn.text);
      if (ph != placeholders_.end()) {
        ph->second.value->ReplaceAllUsesWith(r);
        placeholders_.erase(ph);
      }
    }
    if (info.HasFlag(op_flags::kRegion)) {
      MEMRA_RETURN_IF_ERROR(ExpectPunct("{", absl::StrCat("to start the body of '", mn.text, "'")));
      MEMRA_RETURN_IF_ERROR(ParseBlock(placed->body(), depth + 1));
      MEMRA_RETURN_IF_ERROR(ExpectPunct("}", absl::StrCat("to end the body of '", mn.text, "'")));
    }
    return absl::OkStatus();
  }

  struct Placeholder {
    std::unique_ptr<Value> value;
    Token first_use;
  };

  std::vector<Token> toks_;
  size_t pos_ = 0;
  const ParseOptions& opts_;
  // Before module_: ops of a failed parse may still use placeholders while module_ dies.
  absl::flat_hash_map<std::string, Placeholder> placeholders_;
  std::unique_ptr<Module> module_;
  Function* func_ = nullptr;
  absl::flat_hash_map<std::string, Value*> values_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Module>> ParseModule(absl::string_view text, const ParseOptions& options) {
  Lexer lexer(text, options.first_line);
  Parser parser(lexer.Run(), options);
  return parser.Run();
}

}  // namespace memra::ir
