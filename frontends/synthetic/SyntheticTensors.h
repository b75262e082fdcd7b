// What every synthetic-weight model generator shares: how a tensor's values are drawn
// (deterministic per seed, tensor name and chunk, so a file is reproducible on any thread count),
// llama-quantize's type mix applied to the drawn tensors, and the streaming GGUF write.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "frontends/synthetic/QuantMix.h"
#include "kernels/formats/GgmlType.h"

namespace memra::gguf {
class GgufWriter;
}

namespace memra::synthetic {

struct SyntheticOptions {
  // A llama.cpp file type (QuantMixNames(): f32, bf16, q8_0, q4_k_m, ...): the type of each matrix
  // is what llama-quantize picks for that file type; norms, biases and the like stay f32.
  // Block-quantized tensors are quantized from the bf16-rounded draws, so a quantized file is byte
  // for byte what `llama-quantize` makes of the bf16 file of the same seed.
  std::string dtype = "f32";
  uint64_t seed = 1;
  int threads = 0;  // 0 = hardware concurrency
  bool progress = true;
  // 0: every element drawn. > 0: a tensor drawn from a normal or uniform law with more elements
  // draws only its first tile_elems (rounded up to whole random streams of 65,536) and repeats
  // their bytes to its end: the same shapes, types and bytes a weight, written several times faster, for
  // speed benchmarks (`memra gen --fill tiled`); rows then repeat with that period.
  int64_t tile_elems = 0;
};

struct SyntheticStats {
  uint64_t n_params = 0;
  uint64_t data_bytes = 0;
  size_t n_tensors = 0;
};

// Each tensor's name, ggml ne and type in the file `dtype` would give (no file written), in file order.
struct SyntheticTensorType {
  std::string name;
  std::vector<int64_t> ne;
  formats::GgmlType type;
};

// How a tensor's values are drawn.
struct Init {
  enum Kind { kNormal, kUniform, kNegExpUniform, kConstant, kStep, kValues } kind = kNormal;
  // normal: mean a, std b; uniform: [a, b); neg-exp-uniform: -exp(U(a, b)); constant: a;
  // step: a for the first `split` elements, b after (e.g. rope_freqs' rotated / unrotated pairs);
  // values: element i is values[i] (a small f32 table such as llama3 rope factors).
  double a = 0, b = 1;
  int64_t split = 0;
  std::vector<double> values = {};
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;
  formats::GgmlType type;
  Init init;
};

// A matrix of `in` x `out` (ggml ne {in, out}) drawn N(0, gain / sqrt(in)), so y = W x keeps x's scale.
TensorSpec Matrix(std::string name, int64_t in, int64_t out, formats::GgmlType type, double gain = 1.0);
// A norm weight U(lo, hi), f32.
TensorSpec NormWeight(std::string name, int64_t n, double lo = 0.8, double hi = 1.2);

// `specs` (drawn as bf16 matrices) typed as llama-quantize types them in `mix`'s file type.
absl::Status ApplyMix(const QuantMix& mix, const MixModel& model, std::vector<TensorSpec>& specs);
// Error naming the first tensor whose type memra cannot quantize to.
absl::Status CheckQuantizable(const QuantMix& mix, absl::Span<const TensorSpec> specs);
std::vector<SyntheticTensorType> TypesOf(absl::Span<const TensorSpec> specs);

// Before anything is drawn: an error when a tensor's type of `mix` has no quantizer or `path`
// cannot be written; then the general.* keys every generated file carries (architecture, name,
// the seed in the description, llama.cpp's file type of the mix).
absl::Status BeginSyntheticFile(gguf::GgufWriter& w, const std::string& arch, const std::string& name,
                                const QuantMix& mix, absl::Span<const TensorSpec> specs,
                                const SyntheticOptions& options, const std::string& path);

// Adds the tensors to `w` (their data drawn while writing) and writes `path`, with a progress bar
// when options.progress.
absl::StatusOr<SyntheticStats> WriteSynthetic(gguf::GgufWriter& w, absl::Span<const TensorSpec> specs,
                                              const SyntheticOptions& options, const std::string& path);

// GPT-2's reversible byte -> printable code point mapping used by byte-level BPE vocabularies.
std::string ByteLevelToken(int byte);

}  // namespace memra::synthetic
