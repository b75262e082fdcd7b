// Writes GGUF v3 files: metadata in insertion order, tensor infos, aligned tensor data.
//
// Tensor bytes are produced on demand by a callback, in info order, one tensor at a time, so
// multi-GB files are written streaming without being held in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "frontends/gguf/GgmlType.h"
#include "frontends/gguf/GgufValue.h"

namespace memra::gguf {

class GgufWriter {
 public:
  // Fills `out` (exactly the tensor's byte size) with the tensor's data.
  using TensorSource = std::function<absl::Status(absl::Span<uint8_t> out)>;
  // Called after each tensor is written: (bytes written so far, total bytes).
  using Progress = std::function<void(uint64_t done, uint64_t total)>;

  // Alignment of tensor data (power of two). Also written as `general.alignment` when not 32.
  absl::Status SetAlignment(uint32_t alignment);
  // Adds or replaces a metadata key (keys keep their first insertion position).
  void Set(const std::string& key, Value value);
  // Declares a tensor (`ne` in ggml order); error on a duplicate name or a bad shape for `type`.
  absl::Status AddTensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                         TensorSource source);
  // Convenience: a tensor whose bytes are already in memory (copied).
  absl::Status AddTensorBytes(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                              absl::Span<const uint8_t> bytes);

  uint64_t TotalDataBytes() const;
  // Writes the file (to `path`.tmp, renamed on success).
  absl::Status Write(const std::string& path, const Progress& progress = nullptr) const;
  // The whole file in memory (tests, small files).
  absl::StatusOr<std::vector<uint8_t>> WriteToBytes() const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t nbytes;
    TensorSource source;
  };
  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace memra::gguf
