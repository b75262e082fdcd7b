// Edited copies of a GGUF for the lowering tests: keys changed, dropped or added, tensors
// reshaped or dropped, written to memory and opened again (malformed-model tests).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frontends/gguf/GgufFile.h"

namespace memra::testing {

struct GgufEdits {
  // May change a key's value, or drop the key (return false).
  std::function<bool(const std::string& key, gguf::Value& v)> kv;
  // May change a tensor's shape (and bytes), or drop it (return false).
  std::function<bool(const std::string& name, std::vector<int64_t>& ne, std::vector<uint8_t>& bytes)> tensor;
  std::vector<std::pair<std::string, gguf::Value>> add;  // keys added after the others
};

// The edited copy (named "edited.gguf"); null, with a test failure, if it cannot be written.
std::unique_ptr<gguf::GgufFile> EditedGguf(const gguf::GgufFile& src, const GgufEdits& e);
GgufEdits DropKey(const std::string& key);
GgufEdits SetKey(const std::string& key, gguf::Value value);

}  // namespace memra::testing
