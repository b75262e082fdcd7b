#include "frontends/gguf/ModelSummary.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace memra::gguf {
namespace {

// llama.cpp's llama_token_type (tokenizer.ggml.token_type values).
const char* TokenTypeName(int64_t t) {
  switch (t) {
    case 0:
      return "undefined";
    case 1:
      return "normal";
    case 2:
      return "unknown";
    case 3:
      return "control";
    case 4:
      return "user_defined";
    case 5:
      return "unused";
    case 6:
      return "byte";
    default:
      return "invalid";
  }
}

TokenizerSummary SummarizeTokenizer(const GgufFile& f) {
  TokenizerSummary t;
  if (const Value* m = f.Find("tokenizer.ggml.model"); m && m->type == ValueType::kString) {
    t.present = true;
    t.model = m->s;
  }
  if (const Value* p = f.Find("tokenizer.ggml.pre"); p && p->type == ValueType::kString) t.pre = p->s;
  if (const Value* toks = f.Find("tokenizer.ggml.tokens"); toks && toks->type == ValueType::kArray) {
    t.present = true;
    t.vocab_size = toks->array.size();
  }
  if (const Value* m = f.Find("tokenizer.ggml.merges"); m && m->type == ValueType::kArray) t.n_merges = m->array.size();
  t.has_chat_template = f.Has("tokenizer.chat_template");
  if (const Value* tt = f.Find("tokenizer.ggml.token_type"); tt && tt->type == ValueType::kArray)
    for (const Value& v : tt->array) t.token_type_counts[TokenTypeName(v.IsInteger() ? v.i + int64_t(v.u) : -1)]++;
  for (const auto& [key, value] : f.metadata()) {
    if (!absl::StartsWith(key, "tokenizer.ggml.") || !absl::EndsWith(key, "_token_id")) continue;
    if (!value.IsInteger()) continue;
    std::string name = key.substr(15, key.size() - 15 - 9);  // between the prefix and "_token_id"
    t.special_ids.emplace_back(name, value.i + static_cast<int64_t>(value.u));
  }
  return t;
}

// JSON strings must be UTF-8; a hostile file's bytes need not be.
std::string Utf8(const std::string& s) { return llvm::json::isUTF8(s) ? s : llvm::json::fixUTF8(s); }

// The double whose shortest decimal form reads back as the f32 `f` (1e-06, not 9.99999997e-07):
// the value the writer meant, which JSON readers then print as such.
double ShortestF32(double f) {
  char buf[32];
  for (int p = 1; p < 9; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, f);
    const double d = std::strtod(buf, nullptr);
    if (static_cast<float>(d) == static_cast<float>(f)) return d;
  }
  return f;
}

std::string TokenText(const GgufFile& f, int64_t id) {
  const Value* toks = f.Find("tokenizer.ggml.tokens");
  if (!toks || toks->type != ValueType::kArray || id < 0 || id >= (int64_t)toks->array.size()) return "?";
  return toks->array[id].s;
}

}  // namespace

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.2f %s", v, units[u]);
}

std::string ShapeString(const std::vector<int64_t>& ne) { return absl::StrJoin(ne, " x "); }

std::string FileTypeName(int64_t file_type) {
  // llama.cpp include/llama.h `enum llama_ftype` (the ids that are not commented out there).
  static const std::map<int64_t, const char*> kNames = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},       {3, "Q4_1"},    {7, "Q8_0"},     {8, "Q5_0"},
      {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"},    {12, "Q3_K_M"}, {13, "Q3_K_L"},  {14, "Q4_K_S"},
      {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},    {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},
      {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"},   {24, "IQ1_S"},  {25, "IQ4_NL"},  {26, "IQ3_S"},
      {27, "IQ3_M"},  {28, "IQ2_S"},  {29, "IQ2_M"},     {30, "IQ4_XS"}, {31, "IQ1_M"},   {32, "BF16"},
      {36, "TQ1_0"},  {37, "TQ2_0"},  {38, "MXFP4_MOE"}, {39, "NVFP4"},  {40, "Q1_0"},    {41, "Q2_0"}};
  constexpr int64_t kGuessed = 1024;  // LLAMA_FTYPE_GUESSED: not in the file, inferred
  const bool guessed = file_type >= 0 && (file_type & kGuessed) != 0;
  auto it = kNames.find(guessed ? file_type & ~kGuessed : file_type);
  if (it == kNames.end()) return absl::StrCat("unknown (", file_type, ")");
  return guessed ? absl::StrCat(it->second, " (guessed)") : std::string(it->second);
}

llvm::json::Value ValueToJson(const Value& v) {
  switch (v.type) {
    case ValueType::kU8:
    case ValueType::kU16:
    case ValueType::kU32:
    case ValueType::kU64:
      // int64 where it fits: LLVM's getAsInteger() does not read a uint64 value.
      if (v.u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(v.u);
      return v.u;
    case ValueType::kI8:
    case ValueType::kI16:
    case ValueType::kI32:
    case ValueType::kI64:
      return v.i;
    case ValueType::kBool:
      return v.u != 0;
    case ValueType::kF32:
    case ValueType::kF64:
      if (!std::isfinite(v.f)) return nullptr;
      return v.type == ValueType::kF32 ? ShortestF32(v.f) : v.f;
    case ValueType::kString:
      return Utf8(v.s);
    case ValueType::kArray: {
      if (v.array.size() > kJsonMaxArrayElems)
        return llvm::json::Object{{"elem_type", std::string(ValueTypeName(v.elem_type))},
                                  {"length", static_cast<int64_t>(v.array.size())}};
      llvm::json::Array a;
      for (const Value& e : v.array) a.push_back(ValueToJson(e));
      return a;
    }
  }
  return nullptr;
}

absl::StatusOr<ModelSummary> Summarize(const GgufFile& f) {
  ModelSummary s;
  s.path = f.path();
  s.file_size = f.file_size();
  s.version = f.version();
  s.alignment = f.alignment();
  s.data_offset = f.data_offset();
  s.n_metadata = f.metadata().size();
  if (const Value* a = f.Find("general.architecture"); a && a->type == ValueType::kString) s.architecture = a->s;
  if (const Value* n = f.Find("general.name"); n && n->type == ValueType::kString) s.name = n->s;
  const std::string prefix = s.architecture.empty() ? std::string("\x01") : s.architecture + ".";
  if (const Value* t = f.Find("general.file_type"); t && t->IsInteger()) s.file_type = t->i + int64_t(t->u);
  for (const auto& [key, value] : f.metadata()) {
    if (absl::StartsWith(key, prefix))
      s.hyperparameters.push_back({key.substr(prefix.size()), value, value.ToString(16)});
    else if (absl::StartsWith(key, "general."))
      s.general.push_back({key.substr(8), value, value.ToString(16)});
  }
  s.tokenizer = SummarizeTokenizer(f);
  for (const TensorInfo& t : f.tensors()) {
    s.tensors.push_back({t.name, t.type, t.ne, t.nbytes, t.NumElements()});
    s.total_params += t.NumElements();
    s.total_tensor_bytes += t.nbytes;
    auto& [count, bytes] = s.by_type[std::string(GgmlTypeName(t.type))];
    ++count;
    bytes += t.nbytes;
  }
  return s;
}

std::string RenderText(const ModelSummary& s, bool show_tensors) {
  std::string out;
  absl::StrAppendFormat(&out, "file          %s (%s, GGUF v%u, alignment %u, data at %u)\n", s.path,
                        HumanBytes(s.file_size), s.version, s.alignment, s.data_offset);
  absl::StrAppendFormat(&out, "architecture  %s\n", s.architecture.empty() ? "(none)" : s.architecture);
  if (!s.name.empty()) absl::StrAppendFormat(&out, "name          %s\n", s.name);
  absl::StrAppendFormat(&out, "file type     %s\n", s.file_type ? FileTypeName(*s.file_type) : "(not set)");
  absl::StrAppendFormat(&out, "parameters    %d (%.3f B)\n", s.total_params, s.total_params / 1e9);
  absl::StrAppendFormat(&out, "tensor bytes  %d (%s, %.2f bits/weight)\n", s.total_tensor_bytes,
                        HumanBytes(s.total_tensor_bytes),
                        s.total_params ? 8.0 * s.total_tensor_bytes / s.total_params : 0.0);
  out += "\nhyperparameters\n";
  size_t w = 0;
  for (const MetadataEntry& e : s.hyperparameters) w = std::max(w, e.key.size());
  for (const MetadataEntry& e : s.hyperparameters) absl::StrAppendFormat(&out, "  %-*s  %s\n", w, e.key, e.text);
  out += "\ngeneral\n";
  w = 0;
  for (const MetadataEntry& e : s.general) w = std::max(w, e.key.size());
  for (const MetadataEntry& e : s.general) {
    absl::StrAppendFormat(&out, "  %-*s  %s", w, e.key, e.text);
    if (e.key == "file_type" && e.value.IsInteger()) absl::StrAppend(&out, " (", FileTypeName(*s.file_type), ")");
    out += '\n';
  }
  out += "\ntokenizer\n";
  if (!s.tokenizer.present) {
    out += "  (none)\n";
  } else {
    const TokenizerSummary& t = s.tokenizer;
    absl::StrAppendFormat(&out, "  model %s, pre %s, vocab %d, merges %d, chat template %s\n",
                          t.model.empty() ? "?" : t.model, t.pre.empty() ? "-" : t.pre, t.vocab_size, t.n_merges,
                          t.has_chat_template ? "yes" : "no");
    if (!t.token_type_counts.empty()) {
      std::vector<std::string> parts;
      for (const auto& [k, v] : t.token_type_counts) parts.push_back(absl::StrCat(k, " ", v));
      absl::StrAppendFormat(&out, "  token types: %s\n", absl::StrJoin(parts, ", "));
    }
    for (const auto& [k, v] : t.special_ids) absl::StrAppendFormat(&out, "  %-10s %d\n", k, v);
  }
  if (show_tensors) {
    absl::StrAppendFormat(&out, "\ntensors (%d)\n", s.tensors.size());
    size_t nw = 4;
    for (const auto& t : s.tensors) nw = std::max(nw, t.name.size());
    absl::StrAppendFormat(&out, "  %-*s  %-7s  %-18s  %12s\n", nw, "name", "type", "shape (ne)", "bytes");
    for (const auto& t : s.tensors)
      absl::StrAppendFormat(&out, "  %-*s  %-7s  %-18s  %12d\n", nw, t.name, GgmlTypeName(t.type), ShapeString(t.ne),
                            t.nbytes);
  }
  out += "\nby type\n";
  absl::StrAppendFormat(&out, "  %-7s  %7s  %14s  %10s\n", "type", "tensors", "bytes", "");
  for (const auto& [type, cb] : s.by_type)
    absl::StrAppendFormat(&out, "  %-7s  %7d  %14d  %10s\n", type, cb.first, cb.second, HumanBytes(cb.second));
  return out;
}

llvm::json::Value RenderJson(const ModelSummary& s) {
  llvm::json::Object hp, gen;
  for (const MetadataEntry& e : s.hyperparameters) hp[Utf8(e.key)] = ValueToJson(e.value);
  for (const MetadataEntry& e : s.general) gen[Utf8(e.key)] = ValueToJson(e.value);
  llvm::json::Array tensors;
  for (const auto& t : s.tensors) {
    llvm::json::Array ne;
    for (int64_t d : t.ne) ne.push_back(d);
    tensors.push_back(llvm::json::Object{{"name", Utf8(t.name)},
                                         {"type", std::string(GgmlTypeName(t.type))},
                                         {"ne", std::move(ne)},
                                         {"n_elements", t.n_elements},
                                         {"bytes", static_cast<int64_t>(t.nbytes)}});
  }
  llvm::json::Object by_type;
  for (const auto& [type, cb] : s.by_type)
    by_type[type] =
        llvm::json::Object{{"tensors", static_cast<int64_t>(cb.first)}, {"bytes", static_cast<int64_t>(cb.second)}};
  llvm::json::Object tok{{"present", s.tokenizer.present},
                         {"model", Utf8(s.tokenizer.model)},
                         {"pre", Utf8(s.tokenizer.pre)},
                         {"vocab_size", static_cast<int64_t>(s.tokenizer.vocab_size)},
                         {"merges", static_cast<int64_t>(s.tokenizer.n_merges)},
                         {"chat_template", s.tokenizer.has_chat_template}};
  llvm::json::Object special;
  for (const auto& [k, v] : s.tokenizer.special_ids) special[Utf8(k)] = v;
  tok["special_ids"] = std::move(special);
  llvm::json::Object types;
  for (const auto& [k, v] : s.tokenizer.token_type_counts) types[k] = static_cast<int64_t>(v);
  tok["token_types"] = std::move(types);
  return llvm::json::Object{
      {"path", Utf8(s.path)},
      {"file_size", static_cast<int64_t>(s.file_size)},
      {"gguf_version", static_cast<int64_t>(s.version)},
      {"alignment", static_cast<int64_t>(s.alignment)},
      {"data_offset", static_cast<int64_t>(s.data_offset)},
      {"architecture", Utf8(s.architecture)},
      {"name", Utf8(s.name)},
      // The name, and null when general.file_type is absent; the id stays in general.
      {"file_type", s.file_type ? llvm::json::Value(FileTypeName(*s.file_type)) : llvm::json::Value(nullptr)},
      {"n_kv", static_cast<int64_t>(s.n_metadata)},
      {"hyperparameters", std::move(hp)},
      {"general", std::move(gen)},
      {"tokenizer", std::move(tok)},
      {"n_tensors", static_cast<int64_t>(s.tensors.size())},
      {"tensors", std::move(tensors)},
      {"total_params", s.total_params},
      {"total_tensor_bytes", static_cast<int64_t>(s.total_tensor_bytes)},
      {"by_type", std::move(by_type)}};
}

}  // namespace memra::gguf
