// Tokenizer::FromGguf: the `tokenizer.ggml.*` keys llama.cpp's llama_vocab::load reads.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "ir/StatusMacros.h"

namespace memra::tokenizer {
namespace {

absl::Status WithFile(const gguf::GgufFile& file, absl::Status s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(file.path(), ": ", s.message()));
}

// An optional token id key: -1 when absent.
absl::StatusOr<int32_t> OptionalId(const gguf::GgufFile& file, absl::string_view key) {
  if (!file.Has(key)) return -1;
  MEMRA_ASSIGN_OR_RETURN(int64_t v, file.GetI64(key));
  return static_cast<int32_t>(std::max<int64_t>(-1, std::min<int64_t>(v, INT32_MAX)));
}

absl::StatusOr<VocabSpec> ReadSpec(const gguf::GgufFile& file) {
  VocabSpec spec;
  MEMRA_ASSIGN_OR_RETURN(std::string model, file.GetString("tokenizer.ggml.model"));
  if (model == "gpt2") {
    spec.model = ModelType::kGpt2;
  } else if (model == "llama") {
    spec.model = ModelType::kLlama;
  } else if (model == "gemma4") {
    spec.model = ModelType::kGemma4;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer.ggml.model = \"", model, "\" is not supported (supported: gpt2, llama, gemma4)"));
  }
  MEMRA_ASSIGN_OR_RETURN(spec.pre, file.GetStringOr("tokenizer.ggml.pre", "default"));
  if (spec.model == ModelType::kGemma4) spec.pre = "gemma4";  // llama.cpp sets it whatever the file says
  MEMRA_ASSIGN_OR_RETURN(spec.tokens, file.GetStringArray("tokenizer.ggml.tokens"));
  const size_t n = spec.tokens.size();
  if (file.Has("tokenizer.ggml.token_type")) {
    MEMRA_ASSIGN_OR_RETURN(std::vector<int64_t> types, file.GetIntArray("tokenizer.ggml.token_type"));
    if (types.size() != n)
      return absl::InvalidArgumentError(
          absl::StrFormat("tokenizer.ggml.token_type has %d entries for %d tokens", types.size(), n));
    spec.types.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (types[i] < 0 || types[i] > 6)
        return absl::InvalidArgumentError(
            absl::StrFormat("tokenizer.ggml.token_type[%d] = %d is not a llama_token_type (0..6)", i, types[i]));
      spec.types[i] = static_cast<TokenType>(types[i]);
    }
  }
  if (file.Has("tokenizer.ggml.scores")) {
    MEMRA_ASSIGN_OR_RETURN(spec.scores, file.GetF32Array("tokenizer.ggml.scores"));
    if (spec.scores.size() != n)
      return absl::InvalidArgumentError(
          absl::StrFormat("tokenizer.ggml.scores has %d entries for %d tokens", spec.scores.size(), n));
  }
  if (spec.model == ModelType::kGpt2 || spec.model == ModelType::kGemma4) {
    MEMRA_ASSIGN_OR_RETURN(spec.merges, file.GetStringArray("tokenizer.ggml.merges"));
  }
  MEMRA_ASSIGN_OR_RETURN(spec.bos_id, OptionalId(file, "tokenizer.ggml.bos_token_id"));
  MEMRA_ASSIGN_OR_RETURN(spec.eos_id, OptionalId(file, "tokenizer.ggml.eos_token_id"));
  MEMRA_ASSIGN_OR_RETURN(spec.eot_id, OptionalId(file, "tokenizer.ggml.eot_token_id"));
  MEMRA_ASSIGN_OR_RETURN(spec.pad_id, OptionalId(file, "tokenizer.ggml.padding_token_id"));
  MEMRA_ASSIGN_OR_RETURN(spec.unk_id, OptionalId(file, "tokenizer.ggml.unknown_token_id"));
  for (auto [key, id] : {std::pair<const char*, int32_t*>{"tokenizer.ggml.bos_token_id", &spec.bos_id},
                         {"tokenizer.ggml.eos_token_id", &spec.eos_id},
                         {"tokenizer.ggml.eot_token_id", &spec.eot_id},
                         {"tokenizer.ggml.padding_token_id", &spec.pad_id},
                         {"tokenizer.ggml.unknown_token_id", &spec.unk_id}}) {
    if (*id >= static_cast<int64_t>(n))
      return absl::InvalidArgumentError(absl::StrFormat("%s = %d is outside the vocabulary of %d tokens", key, *id, n));
  }
  // Defaults as llama.cpp: SPM adds BOS, BPE does not unless the file says so.
  MEMRA_ASSIGN_OR_RETURN(spec.add_bos, file.GetBoolOr("tokenizer.ggml.add_bos_token", spec.model == ModelType::kLlama));
  // llama.cpp turns add_bos on for gemma4 whatever the file says (its GGUFs were written without it).
  if (spec.model == ModelType::kGemma4) spec.add_bos = true;
  MEMRA_ASSIGN_OR_RETURN(spec.add_eos, file.GetBoolOr("tokenizer.ggml.add_eos_token", false));
  if (spec.add_bos && spec.bos_id < 0)
    return absl::InvalidArgumentError("tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is absent");
  if (spec.add_eos && spec.eos_id < 0)
    return absl::InvalidArgumentError("tokenizer.ggml.add_eos_token is true but tokenizer.ggml.eos_token_id is absent");
  if (file.Has("tokenizer.ggml.add_space_prefix")) {
    MEMRA_ASSIGN_OR_RETURN(bool asp, file.GetBool("tokenizer.ggml.add_space_prefix"));
    spec.add_space_prefix = asp;
  }
  MEMRA_ASSIGN_OR_RETURN(spec.chat_template, file.GetStringOr("tokenizer.chat_template", ""));
  return spec;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::GgufFile& file) {
  absl::StatusOr<VocabSpec> spec = ReadSpec(file);
  if (!spec.ok()) return WithFile(file, spec.status());
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Create(*std::move(spec));
  if (!tok.ok()) return WithFile(file, tok.status());
  return tok;
}

}  // namespace memra::tokenizer
