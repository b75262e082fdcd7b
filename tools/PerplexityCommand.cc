// `memra perplexity MODEL -f FILE`: perplexity of a text under the model, as llama.cpp's
// llama-perplexity reports it: the text is tokenized, cut into non-overlapping windows of --ctx
// tokens, each window is evaluated from an empty state, and every token after the first of a
// window is scored (window w covers ids[w*ctx .. w*ctx+ctx], predicting the last ctx of them).
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"
#include "runtime/Executor.h"
#include "runtime/Session.h"
#include "tools/Command.h"
#include "tools/Options.h"

namespace cl = llvm::cl;

namespace {

cl::SubCommand kPerplexity("perplexity", "Perplexity of a text file under a model (llama-perplexity style)");
memra::tools::ModelArgument PplModelArg(kPerplexity, "<model.gguf>");
cl::opt<std::string> PplFile("f", cl::desc("Text file to score (required)"), cl::init(""), cl::value_desc("path"),
                             cl::sub(kPerplexity));
cl::alias PplFileLong("file", cl::desc("Alias for -f"), cl::NotHidden, cl::aliasopt(PplFile));
memra::tools::IntOption<int64_t> PplCtx("ctx-size", {2, memra::tools::kMaxContext}, "Window (context) length in tokens",
                                        cl::init(512), cl::sub(kPerplexity));
cl::alias PplCtxLong("c", cl::desc("Alias for --ctx-size"), cl::NotHidden, cl::aliasopt(PplCtx));
cl::alias PplCtxOld("ctx", cl::desc("Alias for --ctx-size"), cl::NotHidden, cl::aliasopt(PplCtx));
memra::tools::IntOption<int64_t> PplMaxWindows("chunks", {-1, std::numeric_limits<int32_t>::max()},
                                               "Score at most this many windows, 0 or -1 = all", cl::init(0),
                                               cl::sub(kPerplexity));
cl::alias PplMaxWindowsOld("max-windows", cl::desc("Alias for --chunks"), cl::NotHidden, cl::aliasopt(PplMaxWindows));
memra::tools::ChoiceOption PplBackend("backend", {"cpu", "cuda"}, "Executor; auto = cuda when a GPU is present",
                                      cl::init(""), cl::sub(kPerplexity));
memra::tools::IntOption<int> PplThreads("threads", {0, memra::tools::HardwareThreads()},
                                        "CPU threads, 0 = all hardware threads", cl::init(0), cl::sub(kPerplexity));
cl::alias PplThreadsLong("t", cl::desc("Alias for --threads"), cl::NotHidden, cl::aliasopt(PplThreads));

int Fail(const absl::Status& s) {
  llvm::errs() << "memra perplexity: " << s.ToString() << "\n";
  return 1;
}

int RunPerplexity() {
  using namespace memra;
  std::string model_path, model_error;
  if (!PplModelArg.Resolve(model_path, model_error)) return Fail(absl::InvalidArgumentError(model_error));
  if (PplFile.empty()) return Fail(absl::InvalidArgumentError("-f FILE: the text to score is required"));
  runtime::Backend backend = runtime::DefaultBackend();
  if (!PplBackend.empty()) {
    auto b = runtime::ParseBackend(PplBackend);
    if (!b.ok()) return Fail(b.status());
    backend = *b;
  }
  std::ifstream in(PplFile, std::ios::binary);
  if (!in) return Fail(absl::NotFoundError(absl::StrCat("cannot open ", std::string(PplFile))));
  std::stringstream text;
  text << in.rdbuf();

  runtime::SessionOptions so;
  so.threads = PplThreads;
  so.n_ctx = PplCtx;
  so.chunk = PplCtx;
  so.prompt_logits = true;
  so.backend = backend;
  auto session = runtime::Session::Open(model_path, so);
  if (!session.ok()) return Fail(session.status());
  runtime::Session& s = **session;
  auto ids = s.Tokenize(text.str());
  if (!ids.ok()) return Fail(ids.status());
  if (ids->size() < 2)
    return Fail(absl::InvalidArgumentError(absl::StrCat(std::string(PplFile), ": fewer than 2 tokens")));
  llvm::errs() << llvm::formatv("memra perplexity: {0}: {1} tokens, windows of {2}\n", std::string(PplFile),
                                ids->size(), int64_t(PplCtx));

  const int64_t V = s.n_vocab();
  double nll = 0, nll2 = 0;
  int64_t n = 0, windows = 0;
  for (size_t start = 0; start + 1 < ids->size(); start += PplCtx) {
    if (PplMaxWindows > 0 && windows >= PplMaxWindows) break;
    const size_t len = std::min<size_t>(PplCtx, ids->size() - 1 - start);  // inputs; targets are +1
    if (auto st = s.Reset(); !st.ok()) return Fail(st);
    std::vector<float> logits;
    auto last = s.Prefill(absl::MakeConstSpan(ids->data() + start, len), &logits);
    if (!last.ok()) return Fail(last.status());
    for (size_t i = 0; i < len; ++i) {
      const float* row = logits.data() + i * V;
      double mx = row[0];
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double(row[v]));
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
      const double l = std::log(sum) + mx - double(row[(*ids)[start + i + 1]]);
      if (!std::isfinite(l))
        return Fail(absl::DataLossError(absl::StrCat("window ", windows + 1, ", token ", i,
                                                     ": the logits are not finite (NaN/inf from the model's weights or "
                                                     "its computation); no perplexity")));
      nll += l;
      nll2 += l * l;
      ++n;
    }
    ++windows;
    llvm::errs() << llvm::formatv("[{0}]{1:F4} ", windows, std::exp(nll / n));
  }
  llvm::errs() << "\n";
  const double mean = nll / n;
  // Standard error of the mean NLL, carried to the perplexity (as llama-perplexity prints it).
  const double var = std::max(0.0, nll2 / n - mean * mean);
  const double ppl = std::exp(mean);
  llvm::outs() << llvm::formatv("PPL = {0:F4} +/- {1:F4} over {2} tokens ({3} windows of {4})\n", ppl,
                                ppl * std::sqrt(var / n), n, windows, int64_t(PplCtx));
  return 0;
}

}  // namespace

MEMRA_REGISTER_COMMAND(kPerplexity, RunPerplexity);
