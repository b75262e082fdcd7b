// `memra lower MODEL.gguf`: prints the lowered module (IR text, ir/Printer.h).
#include <string>

#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/Printer.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "tools/Command.h"
#include "tools/Options.h"

namespace cl = llvm::cl;

namespace {

cl::SubCommand kLower("lower", "Lower a GGUF model to the IR and print the module (.mir text)");
cl::opt<std::string> LowerInput(cl::Positional, cl::Required, cl::desc("<model.gguf>"), cl::sub(kLower));
cl::opt<std::string> LowerOut("o", cl::desc("Output file (default: stdout)"), cl::init("-"), cl::sub(kLower));
memra::tools::IntOption<int64_t> LowerCtx("ctx-size", {0, memra::tools::kMaxContext},
                                          "Context length (KV cache rows), 0 = the model's, capped at 4096",
                                          cl::init(0), cl::sub(kLower));
cl::alias LowerCtxLong("c", cl::desc("Alias for --ctx-size"), cl::NotHidden, cl::aliasopt(LowerCtx));
cl::opt<bool> LowerAllLogits("all-logits",
                             cl::desc("@prefill returns the logits of every token, not only the last (default: false)"),
                             cl::init(false), cl::sub(kLower));

int RunLower() {
  using namespace memra;
  auto file = gguf::GgufFile::Open(LowerInput);
  if (!file.ok()) {
    llvm::errs() << "memra lower: " << file.status().ToString() << "\n";
    return 1;
  }
  frontends::LowerOptions opt;
  opt.n_ctx = LowerCtx;
  opt.prefill_all_logits = LowerAllLogits;
  auto module = frontends::LowerModel(**file, opt);
  if (!module.ok()) {
    llvm::errs() << "memra lower: " << module.status().ToString() << "\n";
    return 1;
  }
  std::error_code ec;
  llvm::raw_fd_ostream out(LowerOut, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    llvm::errs() << "memra lower: cannot write " << LowerOut << ": " << ec.message() << "\n";
    return 1;
  }
  ir::PrintModule(**module, out);
  return 0;
}

}  // namespace

MEMRA_REGISTER_COMMAND(kLower, RunLower);
