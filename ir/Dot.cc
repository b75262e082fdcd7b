#include "ir/Dot.h"

#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace memra::ir {
namespace {

std::string Escape(absl::string_view s) {
  return absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
}

class DotPrinter {
 public:
  DotPrinter(const Function& f, llvm::raw_ostream& os) : f_(f), os_(os) {}

  void Print() {
    os_ << "digraph \"" << Escape(f_.name()) << "\" {\n";
    os_ << "  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
    for (unsigned i = 0; i < f_.num_arguments(); ++i) {
      Value* a = f_.argument(i);
      std::string id = absl::StrCat("arg", i);
      ids_[a] = id;
      os_ << "  " << id << " [shape=ellipse, label=\"%" << Escape(a->name()) << "\\n"
          << a->type().ToString() << "\"];\n";
    }
    PrintBlock(*f_.body(), 1);
    for (const auto& [v, id] : globals_) {
      os_ << "  " << id << " [shape=note, style=filled, fillcolor="
          << (v->kind() == Value::Kind::kState ? "lightyellow" : "lightgrey") << ", label=\"@" << Escape(v->name())
          << "\\n"
          << v->type().ToString() << "\"];\n";
    }
    os_ << edges_ << "}\n";
  }

 private:
  std::string IdOf(const Value* v) {
    auto it = ids_.find(v);
    if (it != ids_.end()) return it->second;
    if (v && v->is_global()) {
      auto g = globals_.find(v);
      if (g != globals_.end()) return g->second;
      std::string id = absl::StrCat("g", globals_.size());
      globals_[v] = id;
      return id;
    }
    return "";
  }

  void PrintBlock(const Block& b, int depth) {
    std::string indent(2 * depth, ' ');
    for (const Op& op : b) {
      if (op.has_body()) {
        os_ << indent << "subgraph cluster_" << cluster_++ << " {\n"
            << indent << "  label=\"segment " << Escape(op.attrs().ToString()) << "\";\n"
            << indent << "  style=dashed;\n";
        PrintBlock(*op.body(), depth + 1);
        os_ << indent << "}\n";
        continue;
      }
      std::string id = absl::StrCat("op", next_op_++);
      std::string label = std::string(op.mnemonic());
      if (!op.attrs().empty()) absl::StrAppend(&label, "\n", op.attrs().ToString());
      for (unsigned i = 0; i < op.num_results(); ++i) {
        ids_[op.result(i)] = id;
        absl::StrAppend(&label, "\n", op.result(i)->name().empty() ? "" : "%" + op.result(i)->name() + ": ",
                        op.result(i)->type().ToString());
      }
      os_ << indent << id << " [label=\"" << Escape(label) << "\"";
      if (op.writes_state()) os_ << ", style=filled, fillcolor=lightyellow";
      os_ << "];\n";
      for (unsigned i = 0; i < op.num_operands(); ++i) {
        std::string from = IdOf(op.operand(i));
        if (from.empty()) continue;
        const OperandSpec* spec = op.info().operand_spec(i);
        absl::StrAppend(&edges_, "  ", from, " -> ", id, " [label=\"", spec ? spec->name : "", "\"",
                        op.operand(i)->is_global() ? ", style=dotted" : "", "];\n");
      }
    }
  }

  const Function& f_;
  llvm::raw_ostream& os_;
  absl::flat_hash_map<const Value*, std::string> ids_;
  std::map<const Value*, std::string> globals_;
  std::string edges_;
  int next_op_ = 0;
  int cluster_ = 0;
};

}  // namespace

void PrintDot(const Function& f, llvm::raw_ostream& os) { DotPrinter(f, os).Print(); }

}  // namespace memra::ir
