// `memra perplexity MODEL -f FILE`: perplexity of a text under the model, computed exactly as
// llama.cpp's llama-perplexity computes it (runtime/Perplexity.h), so the numbers are comparable:
// chunks of -c/--ctx-size tokens (no partial chunk; the text must make at least 2), each from an empty
// state with its first token replaced by BOS when the vocabulary adds BOS, only the second half of
// each chunk scored. Prints llama-perplexity's running "[chunk]ppl," line (stderr) and its
// "Final estimate: PPL = X +/- Y" (stdout).
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"
#include "runtime/Executor.h"
#include "runtime/Perplexity.h"
#include "runtime/Session.h"
#include "tools/Command.h"
#include "tools/Options.h"

namespace cl = llvm::cl;

namespace {

cl::SubCommand kPerplexity(
    "perplexity",
    "Perplexity of a text file, computed as llama.cpp's llama-perplexity does so the numbers compare (chunks of -c "
    "tokens, each starting with BOS when the model adds BOS, the second half of each scored)");
memra::tools::ModelArgument PplModelArg(kPerplexity, "<model.gguf>");
cl::opt<std::string> PplFile("f", cl::desc("Text file to score (required)"), cl::init(""), cl::value_desc("path"),
                             cl::sub(kPerplexity));
cl::alias PplFileLong("file", cl::desc("Alias for -f"), cl::NotHidden, cl::aliasopt(PplFile));
memra::tools::IntOption<int64_t> PplCtx("ctx-size", {3, memra::tools::kMaxContext},
                                        "Chunk length in tokens (llama-perplexity's -c); the text must have at least "
                                        "2 x this many tokens",
                                        cl::init(512), cl::sub(kPerplexity));
cl::alias PplCtxLong("c", cl::desc("Alias for --ctx-size"), cl::NotHidden, cl::aliasopt(PplCtx));
cl::alias PplCtxOld("ctx", cl::desc("Alias for --ctx-size"), cl::NotHidden, cl::aliasopt(PplCtx));
memra::tools::CacheTypeOptions PplCacheTypes(kPerplexity);
memra::tools::MemoryBudgetOptions PplMemory(kPerplexity);
memra::tools::IntOption<int64_t> PplMaxWindows(
    "chunks", {-1, std::numeric_limits<int32_t>::max()},
    "Score at most this many chunks (llama-perplexity's --chunks), 0 or -1 = all", cl::init(0), cl::sub(kPerplexity));
cl::alias PplMaxWindowsOld("max-windows", cl::desc("Alias for --chunks"), cl::NotHidden, cl::aliasopt(PplMaxWindows));
memra::tools::ChoiceOption PplBackend("backend", {"cpu", "cuda"}, "Executor; auto = cuda when a GPU is present",
                                      cl::init(""), cl::sub(kPerplexity));
memra::tools::ChoiceOption PplWeights("weights", {"blocks", "bf16", "per-row", "dequant"}, memra::tools::kWeightsHelp,
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
  // The options layer allows 2; a chunk of 2 scores nothing (the library checks it too, by its name).
  if (PplCtx < 3)
    return Fail(absl::InvalidArgumentError(
        "-c/--ctx-size must be at least 3 for perplexity (each chunk scores its tokens after the first c/2, as "
        "llama-perplexity)"));
  runtime::Backend backend = runtime::DefaultBackend();
  if (!PplBackend.empty()) {
    auto b = runtime::ParseBackend(PplBackend);
    if (!b.ok()) return Fail(b.status());
    backend = *b;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(std::string(PplFile), ec))
    return Fail(
        absl::InvalidArgumentError(absl::StrCat("-f ", std::string(PplFile), ": is a directory, not a text file")));
  std::ifstream in(PplFile, std::ios::binary);
  if (!in) return Fail(absl::NotFoundError(absl::StrCat("cannot open ", std::string(PplFile))));
  std::stringstream text;
  text << in.rdbuf();

  std::string weights_error;
  const std::string weights = memra::tools::WeightsForBackend(PplWeights, runtime::BackendName(backend), weights_error);
  if (!weights_error.empty()) return Fail(absl::InvalidArgumentError(weights_error));

  runtime::SessionOptions so;
  so.weight_mode = weights == "dequant" ? runtime::WeightMode::kDequantizeAtLoad : runtime::WeightMode::kPerRow;
  so.cuda.weights = weights == "bf16" ? kernels::cuda::WeightMode::kBf16 : kernels::cuda::WeightMode::kBlocks;
  so.threads = PplThreads;
  so.n_ctx = PplCtx;
  so.cache_types = PplCacheTypes.Types();
  so.chunk = PplCtx;
  so.prompt_logits = true;
  so.backend = backend;
  so.host_memory_budget = PplMemory.host_bytes();
  so.cuda.memory_budget = PplMemory.device_bytes();
  auto session = runtime::Session::Open(model_path, so);
  if (!session.ok()) return Fail(session.status());
  runtime::Session& s = **session;
  auto ids = runtime::PerplexityTokens(s, text.str());
  if (!ids.ok()) return Fail(ids.status());
  const int64_t n_ctx = PplCtx;
  const int64_t n_chunks = int64_t(ids->size()) / n_ctx;
  if (n_chunks >= 2)  // else the library's error says how many tokens are needed
    llvm::errs() << llvm::formatv(
        "memra perplexity: {0}: {1} tokens; calculating perplexity over {2} chunks, n_ctx={3}, scoring the last {4} "
        "tokens of each\n",
        std::string(PplFile), ids->size(), PplMaxWindows > 0 ? std::min<int64_t>(PplMaxWindows, n_chunks) : n_chunks,
        n_ctx, n_ctx - 1 - n_ctx / 2);

  runtime::PerplexityOptions po;
  po.n_ctx = n_ctx;
  po.max_chunks = PplMaxWindows > 0 ? int64_t(PplMaxWindows) : 0;  // --chunks 0 or -1: all
  po.progress = [](const runtime::PerplexityProgress& p) {
    if (p.chunk == 1)  // as llama-perplexity, an estimate from the first pass
      llvm::errs() << llvm::formatv("memra perplexity: {0:F2} seconds per pass - ETA {1:F2} minutes\n", p.seconds,
                                    p.seconds * p.n_chunks / 60);
    llvm::errs() << llvm::formatv("[{0}]{1:F4},", p.chunk, p.ppl);
    llvm::errs().flush();
  };
  auto r = runtime::Perplexity(s, *ids, po);
  if (!r.ok()) {
    const absl::Status& st = r.status();
    return Fail(absl::Status(st.code(), absl::StrCat(std::string(PplFile), ": ", st.message())));
  }
  llvm::errs() << "\n";
  llvm::errs() << llvm::formatv("memra perplexity: {0} tokens scored in {1} chunks of {2}{3}\n", r->tokens_scored,
                                r->chunks, n_ctx, r->bos_replaced ? ", each starting with BOS" : "");
  if (r->uncertainty) {
    llvm::outs() << absl::StrFormat("Final estimate: PPL = %.4f +/- %.5f\n", r->ppl, *r->uncertainty);
  } else {
    llvm::errs() << "memra perplexity: Unexpected negative standard deviation of log(prob) (every scored token has "
                    "the same NLL): no uncertainty\n";
    llvm::outs() << absl::StrFormat("Final estimate: PPL = %.4f\n", r->ppl);
  }
  return 0;
}

}  // namespace

MEMRA_REGISTER_COMMAND(kPerplexity, RunPerplexity);
