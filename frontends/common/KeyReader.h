// Reading an architecture's GGUF hyperparameter keys (`<arch>.<key>`) as llama.cpp's loader reads
// them: required / optional u32 keys and "u32 or per-layer array" keys, with errors naming the key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memra::gguf {
class GgufFile;
}

namespace memra::frontends {

class KeyReader {
 public:
  KeyReader(const gguf::GgufFile& f, std::string prefix) : f_(f), prefix_(std::move(prefix)) {}

  // The file's block_count, MTP layers included: a per-layer array must hold exactly this many
  // entries (llama.cpp's get_key_or_arr refuses any other length), whatever the n_layer a read asks
  // for (the trunk's layers, its first entries). Unset: exactly n_layer.
  void set_block_count(int64_t n) { block_count_ = n; }
  // The length a per-layer array must have for a read of n_layer layers.
  int64_t ArrayLength(int64_t n_layer) const { return block_count_ > 0 ? block_count_ : n_layer; }

  // "<prefix>.<k>"
  std::string Key(absl::string_view k) const;
  // A u32 key (NotFound when absent, InvalidArgument for another type).
  absl::StatusOr<int64_t> Required(absl::string_view k) const;
  // A u32 key, `def` when absent.
  absl::StatusOr<int64_t> Optional(absl::string_view k, int64_t def) const;
  // A key llama.cpp reads as "u32 or per-layer array": an array must hold one value for every
  // layer, and memra supports only uniform arrays (one shape per layer kind).
  absl::StatusOr<int64_t> UniformPerLayer(absl::string_view k, int64_t n_layer, std::optional<int64_t> def) const;
  // The same key as one value per layer (a u32 repeated, or an array of ArrayLength(n_layer)
  // entries, its first n_layer taken, as llama.cpp's get_key_or_arr).
  absl::StatusOr<std::vector<int64_t>> PerLayer(absl::string_view k, int64_t n_layer, std::optional<int64_t> def) const;
  // An f32 key that must be finite and > 0, or `def` when absent (required when `def` is empty).
  absl::StatusOr<double> PositiveF32(absl::string_view k, std::optional<float> def) const;
  // A bool per layer: an array of ArrayLength(n_layer) entries (its first n_layer taken) or one bool
  // for every layer (llama.cpp's get_key_or_arr); required.
  absl::StatusOr<std::vector<bool>> LayerFlags(absl::string_view k, int64_t n_layer) const;
  // Unimplemented when `rope.scaling.type` names a scaling or `rope.scaling.factor` is not 0 or 1
  // (memra runs RoPE unscaled).
  absl::Status RejectRopeScaling() const;

 private:
  // InvalidArgument naming the key when an array of `n` entries is not ArrayLength(n_layer) long.
  absl::Status CheckArrayLength(absl::string_view k, size_t n, int64_t n_layer) const;

  const gguf::GgufFile& f_;
  std::string prefix_;
  int64_t block_count_ = 0;
};

// InvalidArgument "<file>: inconsistent hyperparameters: <what>".
absl::Status Inconsistent(const gguf::GgufFile& f, absl::string_view what);

}  // namespace memra::frontends
