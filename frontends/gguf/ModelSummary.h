// What `memra inspect` reports about a GGUF: architecture, file type, hyperparameters, tokenizer,
// tensors, totals. Rendered as a human-readable report or as JSON (typed values: metadata numbers
// as JSON numbers, bools as bools, strings unquoted, arrays as arrays up to kJsonMaxArrayElems).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontends/gguf/GgufFile.h"
#include "llvm/Support/JSON.h"

namespace memra::gguf {

struct TokenizerSummary {
  bool present = false;
  std::string model;  // tokenizer.ggml.model: "gpt2", "llama", ...
  std::string pre;    // tokenizer.ggml.pre
  uint64_t vocab_size = 0;
  uint64_t n_merges = 0;
  bool has_chat_template = false;
  // Named special ids (bos, eos, eot, pad, unknown, ...) present in the metadata.
  std::vector<std::pair<std::string, int64_t>> special_ids;
  std::map<std::string, uint64_t> token_type_counts;  // "normal", "control", "byte", ...
};

struct TensorRow {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
  uint64_t nbytes;
  int64_t n_elements;
};

// One metadata key/value pair, its key without the "<architecture>." / "general." prefix.
struct MetadataEntry {
  std::string key;
  Value value;       // as stored (typed)
  std::string text;  // rendered for the report (arrays abbreviated)
};

struct ModelSummary {
  std::string path;
  uint64_t file_size = 0;
  uint32_t version = 0;
  uint32_t alignment = 0;
  uint64_t data_offset = 0;
  std::string architecture;  // empty when general.architecture is absent
  std::string name;
  // general.file_type (llama.cpp's llama_ftype), when present and an integer.
  std::optional<int64_t> file_type;
  // Every "<architecture>.*" key (hyperparameters) and every "general.*" key.
  std::vector<MetadataEntry> hyperparameters;
  std::vector<MetadataEntry> general;
  size_t n_metadata = 0;
  TokenizerSummary tokenizer;
  std::vector<TensorRow> tensors;  // file order
  int64_t total_params = 0;
  uint64_t total_tensor_bytes = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // type -> (count, bytes)
};

// Arrays longer than this are summarized in the JSON as {"elem_type": "i32", "length": N} (token
// lists, merges): every per-layer array of any model fits, no vocabulary does.
inline constexpr size_t kJsonMaxArrayElems = 256;

absl::StatusOr<ModelSummary> Summarize(const GgufFile& file);
std::string RenderText(const ModelSummary& s, bool show_tensors = true);
llvm::json::Value RenderJson(const ModelSummary& s);

// The name of a general.file_type value: llama.cpp's `enum llama_ftype` (include/llama.h) without
// its LLAMA_FTYPE_ALL_ / LLAMA_FTYPE_MOSTLY_ prefix ("F32", "Q8_0", "Q4_K_M"), " (guessed)" appended
// for the LLAMA_FTYPE_GUESSED bit; "unknown (N)" for values the enum does not have.
std::string FileTypeName(int64_t file_type);

// A metadata value as JSON: integers as integers, floats as numbers (an f32 as its shortest decimal
// form; NaN / inf, which JSON cannot hold, as null), bools, strings (invalid UTF-8 replaced by
// U+FFFD), arrays of at most kJsonMaxArrayElems elements as arrays, longer ones summarized.
llvm::json::Value ValueToJson(const Value& v);

// "1.23 GiB", "512.0 KiB": sizes for people.
std::string HumanBytes(uint64_t bytes);
// "4096 x 248320": a ggml ne shape for people (ne order, as llama.cpp prints it).
std::string ShapeString(const std::vector<int64_t>& ne);

}  // namespace memra::gguf
