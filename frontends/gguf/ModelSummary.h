// What `memra inspect` reports about a GGUF: architecture, hyperparameters, tokenizer, tensors,
// totals. Rendered as a human-readable report or as JSON.
#pragma once

#include <cstdint>
#include <map>
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

struct ModelSummary {
  std::string path;
  uint64_t file_size = 0;
  uint32_t version = 0;
  uint32_t alignment = 0;
  uint64_t data_offset = 0;
  std::string architecture;  // empty when general.architecture is absent
  std::string name;
  // Every "<architecture>.*" key (hyperparameters) and every "general.*" key, rendered.
  std::vector<std::pair<std::string, std::string>> hyperparameters;
  std::vector<std::pair<std::string, std::string>> general;
  size_t n_metadata = 0;
  TokenizerSummary tokenizer;
  std::vector<TensorRow> tensors;  // file order
  int64_t total_params = 0;
  uint64_t total_tensor_bytes = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // type -> (count, bytes)
};

absl::StatusOr<ModelSummary> Summarize(const GgufFile& file);
std::string RenderText(const ModelSummary& s, bool show_tensors = true);
llvm::json::Value RenderJson(const ModelSummary& s);

// "1.23 GiB", "512.0 KiB": sizes for people.
std::string HumanBytes(uint64_t bytes);
// "4096 x 248320": a ggml ne shape for people (ne order, as llama.cpp prints it).
std::string ShapeString(const std::vector<int64_t>& ne);

}  // namespace memra::gguf
