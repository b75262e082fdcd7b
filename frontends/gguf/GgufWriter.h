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
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufValue.h"
#include "kernels/formats/GgmlType.h"

namespace memra::gguf {
namespace detail {
class GgufSink;  // where Write / WriteToBytes put the bytes (GgufWriter.cc)
}  // namespace detail

// Usage: Set() metadata, AddTensor() each tensor, then Write(). Everything is validated so that
// what is written reads back with GgufFile as the same values: integer ranges, array element
// types, nesting depth, tensor names (unique, 1..63 bytes), shapes (<= 4 dims, ne >= 0,
// ne[0] a multiple of the block size).
// Whether `path` can be written as a file: not a folder, its folder exists and is writable.
// Writers call it before any work, so a bad -o fails at once with the reason.
absl::Status CheckWritableDestination(const std::string& path);

class GgufWriter {
 public:
  // Fills `out` (exactly the tensor's byte size) with the tensor's data.
  using TensorSource = std::function<absl::Status(absl::Span<uint8_t> out)>;
  // Called after each tensor is written: (bytes written so far, total bytes).
  using Progress = std::function<void(uint64_t done, uint64_t total)>;

  // Largest alignment the writer accepts: larger values are legal GGUF but would make it write
  // (and, for WriteToBytes, allocate) that much padding; a fuzzer found a file asking for 2 GiB.
  static constexpr uint32_t kMaxWriterAlignment = 1u << 20;

  // Alignment of tensor data (power of two, at most kMaxWriterAlignment). Also stored as the `general.alignment` (u32)
  // key when not 32 (the key is added at that point of the metadata order, or updated if present).
  absl::Status SetAlignment(uint32_t alignment);
  // Adds or replaces a metadata key (keys keep their first insertion position). A valid u32
  // `general.alignment` also sets the alignment; any other value for it makes Write fail.
  void Set(const std::string& key, Value value);
  // Declares a tensor (`ne` in ggml order); error on a duplicate name or a bad shape for `type`.
  absl::Status AddTensor(const std::string& name, GgmlType type, std::vector<int64_t> ne, TensorSource source);
  // Convenience: a tensor whose bytes are already in memory (copied).
  absl::Status AddTensorBytes(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                              absl::Span<const uint8_t> bytes);

  // Size of the data section: every tensor's bytes, each padded to the alignment.
  uint64_t TotalDataBytes() const;
  // Writes the file (to `path`.tmp, renamed on success; the .tmp is removed on failure).
  // `progress` is called after each tensor with padded data bytes written so far and in total.
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
  absl::StatusOr<std::vector<uint8_t>> EncodeHeader() const;
  absl::Status WriteTo(detail::GgufSink& sink, const Progress& progress) const;

  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace memra::gguf
