// libFuzzer target: GgufFile::FromBytes on arbitrary bytes must return a status, never crash,
// overflow, read out of bounds or allocate absurdly. When a file parses, everything it exposes is
// touched, and it is re-written with GgufWriter: if the writer accepts it, the result must parse
// back to the same metadata and tensors.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufWriter.h"

namespace {

using memra::gguf::GgufFile;
using memra::gguf::GgufWriter;
using memra::gguf::TensorInfo;

void Check(bool cond) {
  if (!cond) __builtin_trap();
}

uint64_t Touch(const GgufFile& f) {
  uint64_t h = f.version() + f.alignment() + f.data_offset();
  for (uint8_t b : f.header_bytes()) h = h * 31 + b;
  for (const auto& [key, value] : f.metadata()) {
    h += value.ToString().size();
    h += f.GetU32(key).ok() + f.GetI64(key).ok() + f.GetF32(key).ok() + f.GetString(key).ok();
    h += f.GetStringArray(key).ok() + f.GetIntArray(key).ok() + f.GetF32Array(key).ok();
    Check(f.Find(key) == &value);
  }
  for (const TensorInfo& t : f.tensors()) {
    Check(t.data.size() == t.nbytes);
    Check(f.FindTensor(t.name) == &t);
    h += static_cast<uint64_t>(t.NumElements()) + t.RowMajorShape().size();
    for (uint8_t b : t.data) h += b;
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = GgufFile::FromBytes(absl::MakeConstSpan(data, size), "fuzz");
  if (!f.ok()) {
    Check(!f.status().message().empty());
    return 0;
  }
  static volatile uint64_t sink;
  sink = Touch(**f);

  GgufWriter w;
  for (const auto& [key, value] : (*f)->metadata()) w.Set(key, value);
  if (!w.SetAlignment((*f)->alignment()).ok()) return 0;
  for (const TensorInfo& t : (*f)->tensors())
    if (!w.AddTensorBytes(t.name, t.type, t.ne, t.data).ok()) return 0;
  auto bytes = w.WriteToBytes();
  if (!bytes.ok()) return 0;
  auto g = GgufFile::FromBytes(*bytes, "rewritten");
  Check(g.ok());
  Check((*g)->alignment() == (*f)->alignment());
  Check((*g)->metadata().size() == (*f)->metadata().size());
  for (size_t k = 0; k < (*f)->metadata().size(); ++k) Check((*g)->metadata()[k] == (*f)->metadata()[k]);
  Check((*g)->tensors().size() == (*f)->tensors().size());
  for (size_t k = 0; k < (*f)->tensors().size(); ++k) {
    const TensorInfo& a = (*f)->tensors()[k];
    const TensorInfo& b = (*g)->tensors()[k];
    Check(a.name == b.name && a.type == b.type && a.ne == b.ne && a.nbytes == b.nbytes);
    Check(std::equal(a.data.begin(), a.data.end(), b.data.begin(), b.data.end()));
  }
  return 0;
}
