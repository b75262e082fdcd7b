// `memra opt FILE.mir --passes=...`: reads textual IR, verifies it, runs a pass pipeline and
// prints the result (like mlir-opt). With --split-input-file, each `// -----` separated chunk is
// an independent module; with --verify-diagnostics, chunks carrying
// `// expected-error[@+N|@-N|@unknown] {{text}}` must fail with an error containing the text (on
// that line), and the others must succeed.
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ir/Dot.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/StatusMacros.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include "passes/PassManager.h"
#include "passes/PassRegistry.h"
#include "tools/Command.h"
#include "tools/PassManagerFlags.h"

namespace memra::tools {
namespace {

namespace cl = llvm::cl;

cl::SubCommand OptSub("opt", "Run passes over a textual IR file (.mir) and print the result");
cl::opt<std::string> Input(cl::Positional, cl::sub(OptSub), cl::init("-"),
                           cl::desc("<input.mir> (default: - for stdin)"));
cl::opt<std::string> Output("o", cl::sub(OptSub), cl::init("-"), cl::value_desc("file"),
                            cl::desc("Output file (default: - for stdout)"));
cl::opt<bool> SplitInputFile("split-input-file", cl::sub(OptSub), cl::init(false),
                             cl::desc("Treat `// -----` lines as separators of independent "
                                      "modules; outputs are separated the same way (default: off)"));
cl::opt<bool> VerifyDiagnostics(
    "verify-diagnostics", cl::sub(OptSub), cl::init(false),
    cl::desc("Check errors against `// expected-error{{text}}` comments (@+N / @-N relative "
             "line, @unknown for errors without a location); exit 0 iff all match (default: off)"));
cl::opt<bool> Dot("dot", cl::sub(OptSub), cl::init(false),
                  cl::desc("Print each function as a Graphviz graph instead of IR text (default: off)"));
cl::opt<std::string> DotFunc("func", cl::sub(OptSub), cl::init(""), cl::value_desc("name"),
                             cl::desc("With --dot: only this function (default: all)"));
cl::opt<bool> ListPasses("list-passes", cl::sub(OptSub), cl::init(false),
                         cl::desc("List the registered passes with their options and exit (default: off)"));
PassManagerFlags PmFlags(OptSub);

struct Chunk {
  std::string text;
  int first_line;
};

std::vector<Chunk> SplitChunks(const std::string& text) {
  std::vector<Chunk> out;
  if (!SplitInputFile) return {{text, 1}};
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  Chunk cur{"", 1};
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view l = lines[i];
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(l), "// -----")) {
      out.push_back(cur);
      cur = Chunk{"", static_cast<int>(i) + 2};
      continue;
    }
    absl::StrAppend(&cur.text, l, i + 1 < lines.size() ? "\n" : "");
  }
  out.push_back(cur);
  return out;
}

struct Expectation {
  std::string text;
  std::optional<int> line;  // nullopt for @unknown
};

std::vector<Expectation> FindExpectations(const Chunk& chunk) {
  static const std::regex re(R"(expected-error(@([+-]?\d+|unknown))?\s*\{\{(.*?)\}\})");
  std::vector<Expectation> out;
  std::vector<std::string> lines = absl::StrSplit(chunk.text, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_search(lines[i], m, re)) continue;
    Expectation e;
    e.text = m[3];
    int line = chunk.first_line + static_cast<int>(i);
    if (!m[2].matched) {
      e.line = line;
    } else if (m[2] == "unknown") {
      e.line = std::nullopt;
    } else {
      int off = 0;
      (void)absl::SimpleAtoi(std::string(m[2]), &off);
      e.line = line + off;
    }
    out.push_back(e);
  }
  return out;
}

// LINE of the first "NAME:LINE:COL:" in an error message.
std::optional<int> ErrorLine(const std::string& msg, const std::string& name) {
  size_t p = msg.find(name + ":");
  if (p == std::string::npos) return std::nullopt;
  int line = 0;
  size_t i = p + name.size() + 1;
  size_t j = i;
  while (j < msg.size() && isdigit(static_cast<unsigned char>(msg[j]))) ++j;
  if (j == i || !absl::SimpleAtoi(msg.substr(i, j - i), &line)) return std::nullopt;
  return line;
}

absl::Status ProcessChunk(const Chunk& chunk, const std::string& name, llvm::raw_ostream& os) {
  ir::ParseOptions popts;
  popts.filename = name;
  popts.first_line = chunk.first_line;
  MEMRA_ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> module, ir::ParseModule(chunk.text, popts));
  passes::PassManagerOptions opts = PmFlags.Options();
  opts.input_name = name;
  MEMRA_ASSIGN_OR_RETURN(std::unique_ptr<passes::PassManager> pm, passes::PassManager::Create(opts));
  MEMRA_RETURN_IF_ERROR(pm->Run(*module));
  if (Dot) {
    bool any = false;
    for (const auto& f : module->functions()) {
      if (!DotFunc.empty() && f->name() != DotFunc) continue;
      ir::PrintDot(*f, os);
      any = true;
    }
    if (!any && !DotFunc.empty())
      return absl::NotFoundError(absl::StrCat("--func: no function @", std::string(DotFunc)));
  } else {
    ir::PrintModule(*module, os);
  }
  return absl::OkStatus();
}

int ListAllPasses() {
  for (const std::string& n : passes::RegisteredPassNames()) {
    std::unique_ptr<passes::Pass> p = passes::CreatePass(n);
    llvm::outs() << n << ": " << std::string(p->description()) << "\n";
    for (const passes::OptionBase* o : p->options())
      llvm::outs() << "    " << o->name() << "=" << o->DefaultString() << "  " << o->description() << "\n";
  }
  return 0;
}

int RunOpt() {
  if (ListPasses) return ListAllPasses();
  auto buf = llvm::MemoryBuffer::getFileOrSTDIN(Input);
  if (!buf) {
    llvm::errs() << "memra opt: error: cannot read " << Input << ": " << buf.getError().message() << "\n";
    return 1;
  }
  std::string name = Input == "-" ? "<stdin>" : std::string(Input);
  std::error_code ec;
  llvm::ToolOutputFile out(Output, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    llvm::errs() << "memra opt: error: cannot write " << Output << ": " << ec.message() << "\n";
    return 1;
  }
  std::vector<Chunk> chunks = SplitChunks((*buf)->getBuffer().str());
  int rc = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (i > 0) out.os() << "// -----\n";
    std::string text;
    llvm::raw_string_ostream chunk_os(text);
    absl::Status s = ProcessChunk(chunks[i], name, chunk_os);
    chunk_os.flush();
    if (!VerifyDiagnostics) {
      out.os() << text;
      if (!s.ok()) {
        llvm::errs() << "error: " << std::string(s.message()) << "\n";
        rc = 1;
      }
      continue;
    }
    std::vector<Expectation> expected = FindExpectations(chunks[i]);
    if (expected.empty()) {
      out.os() << text;
      if (!s.ok()) {
        llvm::errs() << "error: unexpected error: " << std::string(s.message()) << "\n";
        rc = 1;
      }
      continue;
    }
    if (s.ok()) {
      llvm::errs() << name << ":" << chunks[i].first_line << ": error: expected error \"" << expected[0].text
                   << "\" was not produced\n";
      rc = 1;
      continue;
    }
    std::string msg(s.message());
    bool matched = false;
    for (const Expectation& e : expected) {
      if (msg.find(e.text) == std::string::npos) continue;
      if (e.line && ErrorLine(msg, name) != e.line) continue;
      matched = true;
    }
    if (!matched) {
      llvm::errs() << "error: the error did not match any expected-error of the chunk at line " << chunks[i].first_line
                   << ":\n  got: " << msg << "\n";
      for (const Expectation& e : expected)
        llvm::errs() << "  expected" << (e.line ? absl::StrCat(" at line ", *e.line) : std::string("")) << ": "
                     << e.text << "\n";
      rc = 1;
    }
  }
  // A write that failed (a full disk, a closed stdout) is an error, and the partial file goes.
  out.os().flush();
  if (out.os().has_error()) {
    llvm::errs() << "memra opt: error: cannot write " << Output << ": " << out.os().error().message() << "\n";
    out.os().clear_error();
    return 1;
  }
  out.keep();
  return rc;
}

}  // namespace

MEMRA_REGISTER_COMMAND(OptSub, RunOpt);

}  // namespace memra::tools
