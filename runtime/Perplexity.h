// Perplexity of a text under a model, computed exactly as llama.cpp's llama-perplexity computes it
// (tools/perplexity/perplexity.cpp, perplexity()), so the numbers are comparable:
//
// - the text is tokenized as common_tokenize(ctx, text, true) does: BOS when the vocabulary adds
//   it, special-token texts in the input read as plain text;
// - it is cut into tokens.size() / n_ctx chunks of n_ctx tokens (the partial tail is dropped);
//   fewer than 2 * n_ctx tokens is an error;
// - each chunk is evaluated from an empty state, its first token replaced by BOS when the
//   vocabulary adds BOS (so every chunk starts as a document does);
// - only the second half is scored: the logits at positions n_ctx/2 .. n_ctx-2 predict the tokens
//   after them (n_ctx - 1 - n_ctx/2 tokens per chunk), so every scored token has at least n_ctx/2
//   tokens of context;
// - PPL = exp(mean NLL); its uncertainty is llama-perplexity's "+/-": ppl * sqrt(var / (N - 1)),
//   var = mean(NLL^2) - mean(NLL)^2 over the N scored tokens.
//
//   PerplexityOptions o;
//   o.n_ctx = 512;
//   auto r = PerplexityOfText(*session, text, o);  // r->ppl, r->uncertainty, r->tokens_scored
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/Session.h"

namespace memra::runtime {

// Reported after each chunk (llama-perplexity prints "[chunk]ppl," from these).
struct PerplexityProgress {
  int64_t chunk = 0;     // 1-based
  int64_t n_chunks = 0;  // chunks that will be scored
  double ppl = 0;        // over the tokens scored so far
  double seconds = 0;    // this chunk's evaluation time
};

struct PerplexityOptions {
  int64_t n_ctx = 512;     // chunk length in tokens; at least 3 (so that a chunk scores a token)
  int64_t max_chunks = 0;  // score at most this many chunks; 0 = all
  std::function<void(const PerplexityProgress&)> progress;  // may be empty
};

struct PerplexityResult {
  double ppl = 0;
  // llama-perplexity's "+/-"; empty when the NLL variance is not positive (every scored token
  // has the same NLL), where llama-perplexity prints "Unexpected negative standard deviation".
  std::optional<double> uncertainty;
  double mean_nll = 0;        // natural log
  int64_t tokens_scored = 0;  // chunks * (n_ctx - 1 - n_ctx/2)
  int64_t chunks = 0;         // chunks scored
  int64_t n_tokens = 0;       // tokens of the input (BOS included)
  bool bos_replaced = false;  // the vocabulary adds BOS, so each chunk started with it
};

// Scores `tokens` (already tokenized, BOS included as the vocabulary adds it). The session must
// keep every prompt position's logits (SessionOptions::prompt_logits) and hold at least n_ctx
// tokens; its state is reset before each chunk and left holding the last one. BOS replacement
// follows the session's tokenizer (none without one).
absl::StatusOr<PerplexityResult> Perplexity(Session& session, absl::Span<const int32_t> tokens,
                                            const PerplexityOptions& options);

// `text` tokenized as llama-perplexity tokenizes it (common_tokenize(ctx, text, true)): BOS / EOS
// added as the vocabulary says, special-token texts ("<|endoftext|>") read as plain text. A
// vocabulary that adds EOS is refused, as llama-perplexity refuses it; so is a session without a
// tokenizer.
absl::StatusOr<std::vector<int32_t>> PerplexityTokens(const Session& session, absl::string_view text);

// PerplexityTokens(), then Perplexity().
absl::StatusOr<PerplexityResult> PerplexityOfText(Session& session, absl::string_view text,
                                                  const PerplexityOptions& options);

}  // namespace memra::runtime
