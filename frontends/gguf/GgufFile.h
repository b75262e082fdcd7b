// Read-only view of a GGUF file (v2, v3): metadata, tensor infos and tensor bytes, over an mmap.
//
// Every count, length, offset and size read from the file is checked (bounds and overflow) before
// use; a malformed file yields an absl::Status naming the field and its byte offset, never a
// crash and never an allocation larger than the file could justify.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "frontends/gguf/GgufValue.h"
#include "kernels/formats/GgmlType.h"

namespace memra::gguf {

// GGUF stores tensors in the ggml block formats (kernels/formats, below both the readers and the
// kernels); their names are used unqualified here.
using formats::GgmlType;
using formats::GgmlTypeName;
using formats::GgmlTypeTraits;
using formats::kGgmlTypeCount;
using formats::LookupGgmlType;
using formats::ParseGgmlType;
using formats::RowBytes;
using formats::TraitsOf;

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF"
inline constexpr uint32_t kDefaultAlignment = 32;
// Limits enforced by the reader (and the writer, so that whatever it writes reads back).
inline constexpr size_t kMaxTensorNameBytes = 63;  // llama.cpp GGML_MAX_NAME = 64 incl. the NUL
inline constexpr size_t kMaxDims = 4;              // GGML_MAX_DIMS
inline constexpr int kMaxArrayDepth = 8;           // levels of arrays nested in one value
// Total scalar/string/array values across all metadata (guards memory: a Value is ~100 bytes).
inline constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 23;

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous (innermost) dimension
  uint64_t offset = 0;      // relative to the data section
  uint64_t nbytes = 0;
  absl::Span<const uint8_t> data;  // the tensor's bytes inside the mapping (empty if nbytes == 0)
  uint64_t info_offset = 0;        // absolute file offset of this tensor's info (for messages)

  int64_t NumElements() const;  // product of ne (1 for n_dims 0); -1 if it overflows int64
  // Row-major (numpy) shape: ne reversed, outermost first. A {256, 259} tensor is [259][256].
  std::vector<int64_t> RowMajorShape() const;
  int64_t ne_at(size_t i) const { return i < ne.size() ? ne[i] : 1; }
};

// "{256, 259}" (ggml ne order), for messages.
std::string ShapeString(absl::Span<const int64_t> ne);

class GgufFile {
 public:
  // Maps and parses `path`.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses an in-memory image (copied); `label` stands in for the path in messages.
  // Malformed files give InvalidArgument ("<path>: <where>: <what> ... at offset N"); Open's
  // I/O failures give NotFound / PermissionDenied / Internal.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBytes(absl::Span<const uint8_t> bytes,
                                                             std::string label = "<memory>");
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute offset of the data section
  uint64_t file_size() const { return size_; }
  // Header + metadata + tensor-info bytes (everything before the data section).
  absl::Span<const uint8_t> header_bytes() const {
    return {base_, static_cast<size_t>(data_offset_ < size_ ? data_offset_ : size_)};
  }

  // --- metadata ---
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* Find(absl::string_view key) const;
  bool Has(absl::string_view key) const { return Find(key) != nullptr; }
  // Typed accessors. Integer getters accept any integer type whose value fits; a missing key is
  // NotFound, a wrong type or out-of-range value is InvalidArgument; messages name the key.
  absl::StatusOr<uint32_t> GetU32(absl::string_view key) const;
  absl::StatusOr<uint64_t> GetU64(absl::string_view key) const;
  absl::StatusOr<int32_t> GetI32(absl::string_view key) const;
  absl::StatusOr<int64_t> GetI64(absl::string_view key) const;
  absl::StatusOr<float> GetF32(absl::string_view key) const;  // f32 or f64
  absl::StatusOr<bool> GetBool(absl::string_view key) const;
  absl::StatusOr<std::string> GetString(absl::string_view key) const;
  absl::StatusOr<const Value*> GetArray(absl::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(absl::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(absl::string_view key) const;
  absl::StatusOr<std::vector<float>> GetF32Array(absl::string_view key) const;
  absl::StatusOr<std::vector<bool>> GetBoolArray(absl::string_view key) const;
  // Optional keys: the default when absent, an error when present with the wrong type.
  absl::StatusOr<uint32_t> GetU32Or(absl::string_view key, uint32_t def) const;
  absl::StatusOr<float> GetF32Or(absl::string_view key, float def) const;
  absl::StatusOr<bool> GetBoolOr(absl::string_view key, bool def) const;
  absl::StatusOr<std::string> GetStringOr(absl::string_view key, std::string def) const;
  // `general.architecture` (error if absent).
  absl::StatusOr<std::string> Architecture() const { return GetString("general.architecture"); }

  // --- tensors ---
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(absl::string_view name) const;
  // NotFound naming the tensor and the file when absent.
  absl::StatusOr<const TensorInfo*> GetTensor(absl::string_view name) const;

 private:
  GgufFile() = default;
  absl::Status Parse();
  absl::StatusOr<const Value*> FindTyped(absl::string_view key, absl::string_view expected,
                                         bool (*accept)(const Value&)) const;

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;     // mmap'ed region (Open) ...
  std::vector<uint8_t> owned_;  // ... or an owned copy (FromBytes)
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  absl::flat_hash_map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace memra::gguf
