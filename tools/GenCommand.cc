// `memra gen`: writes a synthetic-weight qwen35 / qwen35moe model (preset shapes, chosen dtype, seeded).
#include <limits>

#include "absl/strings/str_join.h"
#include "frontends/gguf/ModelSummary.h"
#include "frontends/synthetic/Qwen35Synthetic.h"
#include "kernels/formats/GgmlType.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"
#include "tools/Command.h"
#include "tools/Options.h"

namespace cl = llvm::cl;

namespace {

cl::SubCommand kGen("gen",
                    "Write a synthetic-weight qwen35 / qwen35moe model (presets: tiny, 0.8b, 2b, 4b, 9b, 27b; MoE: "
                    "moe-tiny, 35b-a3b)");
cl::opt<std::string> GenPreset("preset",
                               cl::desc("Model shape preset: tiny, 0.8b, 2b, 4b, 9b, 27b, moe-tiny, 35b-a3b "
                                        "(default: tiny)"),
                               cl::init("tiny"), cl::sub(kGen));
// llama.cpp file types: each matrix gets the type llama-quantize gives it in that file type
// (frontends/synthetic/QuantMix.h); the list is synthetic::QuantMixNames().
memra::tools::ChoiceOption GenDtype("dtype", {"f32",    "f16",    "bf16",   "q8_0",   "q6_k",   "q5_k_m", "q5_k_s",
                                              "q4_k_m", "q4_k_s", "q3_k_l", "q3_k_m", "q3_k_s", "q2_k",   "q5_1",
                                              "q5_0",   "q4_1",   "q4_0",   "iq4_nl", "iq4_xs", "mxfp4",  "mxfp4_moe"},
                                    "Weight file type, llama-quantize's tensor-type mix (mxfp4 = its --pure MXFP4_MOE: "
                                    "every matrix mxfp4; mxfp4_moe: experts only, so all q8_0 here)",
                                    cl::init("f32"), cl::sub(kGen));
memra::tools::IntOption<int64_t> GenSeed("seed", {0, std::numeric_limits<int64_t>::max()},
                                         "Random seed; the same seed writes the same file", cl::init(1), cl::sub(kGen));
cl::alias GenSeedLong("s", cl::desc("Alias for --seed"), cl::NotHidden, cl::aliasopt(GenSeed));
memra::tools::IntOption<int> GenThreads("threads", {0, memra::tools::HardwareThreads()},
                                        "Worker threads, 0 = all hardware threads", cl::init(0), cl::sub(kGen));
cl::alias GenThreadsLong("t", cl::desc("Alias for --threads"), cl::NotHidden, cl::aliasopt(GenThreads));
cl::opt<std::string> GenOut("o", cl::desc("Output path (default: <arch>-<preset>-<dtype>.gguf)"), cl::init(""),
                            cl::sub(kGen));
cl::opt<bool> GenQuiet("quiet", cl::desc("No progress bar (default: false)"), cl::init(false), cl::sub(kGen));

int RunGen() {
  using namespace memra;
  auto shape = synthetic::Qwen35Preset(GenPreset);
  if (!shape.ok()) {
    llvm::errs() << "memra gen: " << shape.status().ToString() << "\n";
    return 1;
  }
  synthetic::SyntheticOptions opt;
  opt.dtype = GenDtype;
  opt.seed = static_cast<uint64_t>(int64_t(GenSeed));
  opt.threads = GenThreads;
  opt.progress = !GenQuiet;
  std::string out = GenOut.empty()
                        ? shape->arch() + "-" + std::string(GenPreset) + "-" + std::string(GenDtype) + ".gguf"
                        : std::string(GenOut);
  auto stats = synthetic::WriteSyntheticQwen35(*shape, opt, out);
  if (!stats.ok()) {
    llvm::errs() << "memra gen: " << stats.status().ToString() << "\n";
    return 1;
  }
  llvm::outs() << llvm::formatv("wrote {0}: {6} {1}, {2} tensors, {3} parameters, {4} of {5} weights\n", out, GenPreset,
                                stats->n_tensors, stats->n_params, gguf::HumanBytes(stats->data_bytes), GenDtype,
                                shape->arch());
  return 0;
}

}  // namespace

MEMRA_REGISTER_COMMAND(kGen, RunGen);
