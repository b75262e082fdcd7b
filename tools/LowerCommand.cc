// `memra lower MODEL.gguf`: prints the lowered module (IR text, ir/Printer.h).
#include <string>

#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/Printer.h"
#include "ir/StatusMacros.h"
#include "ir/support/AtomicFile.h"
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
  if (LowerOut == "-") {  // stdout: a failed write is reported by the driver
    ir::PrintModule(**module, llvm::outs());
    return 0;
  }
  // A file appears whole or not at all (a full disk leaves nothing half written).
  std::string text;
  llvm::raw_string_ostream os(text);
  ir::PrintModule(**module, os);
  os.flush();
  absl::Status st = [&]() -> absl::Status {
    MEMRA_ASSIGN_OR_RETURN(auto out, AtomicFile::Create(LowerOut));
    MEMRA_RETURN_IF_ERROR(out->Write(text.data(), text.size()));
    return out->Commit();
  }();
  if (!st.ok()) {
    llvm::errs() << "memra lower: " << st.ToString() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

MEMRA_REGISTER_COMMAND(kLower, RunLower);
