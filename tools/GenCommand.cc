// `memra gen`: writes a synthetic-weight qwen35 / qwen35moe / gemma4 / step35 model (preset shapes, chosen
// dtype, seeded).
#include <functional>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontends/gguf/ModelSummary.h"
#include "frontends/synthetic/Gemma4Synthetic.h"
#include "frontends/synthetic/Qwen35Synthetic.h"
#include "frontends/synthetic/Step35Synthetic.h"
#include "ir/StatusMacros.h"
#include "kernels/formats/GgmlType.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"
#include "tools/Command.h"
#include "tools/Options.h"

namespace cl = llvm::cl;

namespace {

cl::SubCommand kGen("gen",
                    "Write a synthetic-weight model (qwen35: tiny, 0.8b, 2b, 4b, 9b, 27b; qwen35moe: moe-tiny, "
                    "35b-a3b; gemma4: gemma4-tiny, gemma4-e2b, gemma4-e4b, gemma4-26b-a4b, gemma4-31b; step35: "
                    "step35-tiny, step35-flash-8l, step35-flash)");
cl::opt<std::string> GenPreset("preset",
                               cl::desc("Model shape preset: tiny, 0.8b, 2b, 4b, 9b, 27b, moe-tiny, 35b-a3b, "
                                        "gemma4-tiny, gemma4-e2b, gemma4-e4b, gemma4-26b-a4b, gemma4-31b, "
                                        "step35-tiny, step35-flash-8l (Step 3.5 Flash in 8 layers), "
                                        "step35-flash (default: tiny)"),
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
cl::opt<std::string> GenOut("o",
                            cl::desc("Output path (default: <arch>-<preset>-<dtype>.gguf; gemma4, step35: "
                                     "<preset>-<dtype>.gguf)"),
                            cl::init(""), cl::sub(kGen));
cl::opt<bool> GenQuiet("quiet", cl::desc("No progress bar (default: false)"), cl::init(false), cl::sub(kGen));
memra::tools::ChoiceOption GenFill("fill", {"drawn", "tiled"},
                                   "How weights are drawn: drawn (every value) or tiled (each tensor of more than "
                                   "1 Mi values draws its first 1 Mi and repeats their bytes: the same shapes, types "
                                   "and bytes, several times faster to write; for speed benchmarks, not for numerics)",
                                   cl::init("drawn"), cl::sub(kGen));

// The family's generator for the preset: (file stem, arch, write).
struct Generator {
  std::string stem, arch;
  std::function<absl::StatusOr<memra::synthetic::SyntheticStats>(const memra::synthetic::SyntheticOptions&,
                                                                 const std::string&)>
      write;
};

absl::StatusOr<Generator> GeneratorFor(const std::string& preset) {
  using namespace memra::synthetic;
  if (absl::StartsWith(preset, "gemma4")) {
    MEMRA_ASSIGN_OR_RETURN(Gemma4Shape shape, Gemma4Preset(preset));
    return Generator{preset, "gemma4", [shape](const SyntheticOptions& o, const std::string& path) {
                       return WriteSyntheticGemma4(shape, o, path);
                     }};
  }
  if (absl::StartsWith(preset, "step35")) {
    MEMRA_ASSIGN_OR_RETURN(Step35Shape shape, Step35Preset(preset));
    return Generator{preset, "step35", [shape](const SyntheticOptions& o, const std::string& path) {
                       return WriteSyntheticStep35(shape, o, path);
                     }};
  }
  absl::StatusOr<Qwen35Shape> found = Qwen35Preset(preset);
  if (!found.ok())  // every family's presets, not only qwen35's
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown preset '", preset,
        "' (qwen35: tiny, 0.8b, 2b, 4b, 9b, 27b; qwen35moe: moe-tiny, 35b-a3b; gemma4: gemma4-tiny, gemma4-e2b, "
        "gemma4-e4b, gemma4-26b-a4b, gemma4-31b; step35: step35-tiny, step35-flash-8l, step35-flash)"));
  const Qwen35Shape shape = *found;
  return Generator{
      shape.arch() + "-" + preset, shape.arch(),
      [shape](const SyntheticOptions& o, const std::string& path) { return WriteSyntheticQwen35(shape, o, path); }};
}

int RunGen() {
  using namespace memra;
  auto gen = GeneratorFor(GenPreset);
  if (!gen.ok()) {
    llvm::errs() << "memra gen: " << gen.status().ToString() << "\n";
    return 1;
  }
  synthetic::SyntheticOptions opt;
  opt.dtype = GenDtype;
  opt.seed = static_cast<uint64_t>(int64_t(GenSeed));
  opt.threads = GenThreads;
  opt.progress = !GenQuiet;
  if (std::string(GenFill) == "tiled") opt.tile_elems = int64_t{1} << 20;
  std::string out = GenOut.empty() ? gen->stem + "-" + std::string(GenDtype) + ".gguf" : std::string(GenOut);
  auto stats = gen->write(opt, out);
  if (!stats.ok()) {
    llvm::errs() << "memra gen: " << stats.status().ToString() << "\n";
    return 1;
  }
  llvm::outs() << llvm::formatv("wrote {0}: {6} {1}, {2} tensors, {3} parameters, {4} of {5} weights\n", out, GenPreset,
                                stats->n_tensors, stats->n_params, gguf::HumanBytes(stats->data_bytes), GenDtype,
                                gen->arch);
  return 0;
}

}  // namespace

MEMRA_REGISTER_COMMAND(kGen, RunGen);
