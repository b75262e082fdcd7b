#include "tests/GgufEdit.h"

#include "frontends/gguf/GgufWriter.h"
#include "gtest/gtest.h"

namespace memra::testing {

std::unique_ptr<gguf::GgufFile> EditedGguf(const gguf::GgufFile& src, const GgufEdits& e) {
  gguf::GgufWriter w;
  for (auto [key, v] : src.metadata()) {
    if (e.kv && !e.kv(key, v)) continue;
    w.Set(key, v);
  }
  for (const auto& [key, v] : e.add) w.Set(key, v);
  for (const gguf::TensorInfo& t : src.tensors()) {
    std::vector<int64_t> ne = t.ne;
    std::vector<uint8_t> bytes(t.data.begin(), t.data.end());
    if (e.tensor && !e.tensor(t.name, ne, bytes)) continue;
    EXPECT_TRUE(w.AddTensorBytes(t.name, t.type, ne, bytes).ok()) << t.name;
  }
  auto bytes = w.WriteToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok()) return nullptr;
  auto f = gguf::GgufFile::FromBytes(*bytes, "edited.gguf");
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(*f) : nullptr;
}

GgufEdits DropKey(const std::string& key) {
  GgufEdits e;
  e.kv = [key](const std::string& k, gguf::Value&) { return k != key; };
  return e;
}

GgufEdits SetKey(const std::string& key, gguf::Value value) {
  GgufEdits e;
  e.kv = [key, value](const std::string& k, gguf::Value& v) {
    if (k == key) v = value;
    return true;
  };
  return e;
}

}  // namespace memra::testing
