// `memra inspect MODEL.gguf`: architecture, file type (llama.cpp's llama_ftype name), hyperparameters,
// tokenizer, tensors, totals; --json renders the same with typed values (frontends/gguf/ModelSummary.h).
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/ModelSummary.h"
#include "llvm/Support/raw_ostream.h"
#include "tools/Command.h"

namespace cl = llvm::cl;

namespace {

cl::SubCommand kInspect("inspect",
                        "Describe a GGUF file: architecture, file type, hyperparameters, tokenizer, tensors");
cl::opt<std::string> InspectPath(cl::Positional, cl::Required, cl::desc("<model.gguf>"), cl::sub(kInspect));
cl::opt<bool> InspectJson("json", cl::desc("Emit JSON instead of the report (default: false)"), cl::init(false),
                          cl::sub(kInspect));
cl::opt<bool> InspectNoTensors("no-tensors", cl::desc("Omit the per-tensor table (default: false)"), cl::init(false),
                               cl::sub(kInspect));

int RunInspect() {
  auto file = memra::gguf::GgufFile::Open(InspectPath);
  if (!file.ok()) {
    llvm::errs() << "memra inspect: " << file.status().ToString() << "\n";
    return 1;
  }
  auto summary = memra::gguf::Summarize(**file);
  if (!summary.ok()) {
    llvm::errs() << "memra inspect: " << summary.status().ToString() << "\n";
    return 1;
  }
  if (InspectJson) {
    llvm::outs() << llvm::formatv("{0:2}", memra::gguf::RenderJson(*summary)) << "\n";
  } else {
    llvm::outs() << memra::gguf::RenderText(*summary, !InspectNoTensors);
  }
  return 0;
}

}  // namespace

MEMRA_REGISTER_COMMAND(kInspect, RunInspect);
