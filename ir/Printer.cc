#include "ir/Printer.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace memra::ir {

bool IsBareName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

namespace {

std::string GlobalRef(absl::string_view name) {
  if (IsBareName(name)) return absl::StrCat("@", name);
  return absl::StrCat("@", QuoteString(name));
}

std::string Sanitize(absl::string_view name) {
  std::string s(name);
  for (char& c : s)
    if (!IsBareName(absl::string_view(&c, 1))) c = '_';
  return s;
}

class FunctionPrinter {
 public:
  FunctionPrinter(const Function& f, llvm::raw_ostream& os) : f_(f), os_(os) {}

  void Print() {
    for (unsigned i = 0; i < f_.num_arguments(); ++i) Assign(f_.argument(i));
    for (Op* op : f_.Ops())
      for (Value* r : op->results()) Assign(r);

    os_ << "func " << GlobalRef(f_.name()) << "(";
    for (unsigned i = 0; i < f_.num_arguments(); ++i) {
      if (i) os_ << ", ";
      os_ << Ref(f_.argument(i)) << ": " << f_.argument(i)->type().ToString();
    }
    os_ << ")";
    if (!f_.result_types().empty()) {
      os_ << " -> (";
      for (size_t i = 0; i < f_.result_types().size(); ++i) os_ << (i ? ", " : "") << f_.result_types()[i].ToString();
      os_ << ")";
    }
    if (!f_.attrs().empty()) os_ << " attributes " << f_.attrs().ToString();
    os_ << " {\n";
    PrintBlock(*f_.body(), 1);
    os_ << "}\n";
  }

 private:
  void Assign(const Value* v) {
    std::string base = v->name().empty() ? "" : Sanitize(v->name());
    std::string name;
    if (base.empty()) {
      do name = absl::StrCat(next_number_++);
      while (used_.contains(name));
    } else {
      name = base;
      for (int k = 1; used_.contains(name); ++k) name = absl::StrCat(base, "_", k);
    }
    used_.insert(name);
    names_[v] = name;
  }

  std::string Ref(const Value* v) const {
    if (!v) return "%<null>";
    if (v->is_global()) return GlobalRef(v->name());
    auto it = names_.find(v);
    if (it == names_.end()) return "%<undefined>";
    return absl::StrCat("%", it->second);
  }

  void PrintBlock(const Block& b, int depth) {
    for (const Op& op : b) PrintOp(op, depth);
  }

  void PrintOp(const Op& op, int depth) {
    std::string indent(2 * depth, ' ');
    os_ << indent;
    if (op.num_results() > 0) {
      for (unsigned i = 0; i < op.num_results(); ++i) os_ << (i ? ", " : "") << Ref(op.result(i));
      os_ << " = ";
    }
    os_ << llvm::StringRef(op.mnemonic().data(), op.mnemonic().size());
    if (op.is(OpKind::kReturn)) {
      for (unsigned i = 0; i < op.num_operands(); ++i) os_ << (i ? ", " : " ") << Ref(op.operand(i));
      os_ << "\n";
      return;
    }
    if (op.num_operands() > 0 || !op.has_body()) {
      os_ << "(";
      for (unsigned i = 0; i < op.num_operands(); ++i) os_ << (i ? ", " : "") << Ref(op.operand(i));
      os_ << ")";
    }
    if (!op.attrs().empty()) os_ << " " << op.attrs().ToString();
    if (op.num_results() > 0) {
      os_ << " : ";
      for (unsigned i = 0; i < op.num_results(); ++i) os_ << (i ? ", " : "") << op.result(i)->type().ToString();
    }
    if (op.has_body()) {
      os_ << " {\n";
      PrintBlock(*op.body(), depth + 1);
      os_ << indent << "}";
    }
    os_ << "\n";
  }

  const Function& f_;
  llvm::raw_ostream& os_;
  absl::flat_hash_map<const Value*, std::string> names_;
  absl::flat_hash_set<std::string> used_;
  int next_number_ = 0;
};

}  // namespace

void PrintFunction(const Function& f, llvm::raw_ostream& os) { FunctionPrinter(f, os).Print(); }

void PrintModule(const Module& m, llvm::raw_ostream& os) {
  bool any = false;
  if (!m.attrs().empty()) {
    os << "module attributes " << m.attrs().ToString() << "\n";
    any = true;
  }
  if (!m.weights().empty() || !m.states().empty()) {
    if (any) os << "\n";
    any = true;
  }
  for (const auto& w : m.weights()) {
    os << "weight " << GlobalRef(w->name()) << " : " << w->type().ToString();
    if (!w->attrs().empty()) os << " " << w->attrs().ToString();
    os << "\n";
  }
  for (const auto& s : m.states()) {
    os << "state " << std::string(StateKindName(s->state_kind())) << " " << GlobalRef(s->name()) << " : "
       << s->type().ToString();
    if (!s->attrs().empty()) os << " " << s->attrs().ToString();
    os << "\n";
  }
  for (const auto& f : m.functions()) {
    if (any) os << "\n";
    any = true;
    PrintFunction(*f, os);
  }
}

std::string ToText(const Module& m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  PrintModule(m, os);
  return os.str();
}

std::string ToText(const Function& f) {
  std::string s;
  llvm::raw_string_ostream os(s);
  PrintFunction(f, os);
  return os.str();
}

}  // namespace memra::ir
