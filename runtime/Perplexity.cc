#include "runtime/Perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "ir/StatusMacros.h"
#include "runtime/Logits.h"

namespace memra::runtime {
namespace {

// -log p(tok) from one row of logits, with llama-perplexity's arithmetic (log_softmax(): the max
// and the differences in float, expf, the sum and the log in double), so the NLLs match its own
// to the last bits the logits allow.
double TokenNll(const float* logits, int64_t n_vocab, int32_t tok) {
  float max_logit = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum_exp = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) sum_exp += expf(logits[i] - max_logit);
  return -(logits[tok] - max_logit - std::log(sum_exp));
}

}  // namespace

absl::StatusOr<PerplexityResult> Perplexity(Session& session, absl::Span<const int32_t> tokens,
                                            const PerplexityOptions& options) {
  const int64_t n_ctx = options.n_ctx;
  // n_ctx/2 tokens of context, then at least one scored token.
  if (n_ctx < 3)
    return absl::InvalidArgumentError(absl::StrCat(
        "n_ctx ", n_ctx,
        " is too small: each chunk scores its tokens after the first n_ctx/2, so n_ctx must be at least 3"));
  if (options.max_chunks < 0)
    return absl::InvalidArgumentError(absl::StrCat("max_chunks ", options.max_chunks, " is negative (0 = all chunks)"));
  if (n_ctx > session.context_length())
    return absl::FailedPreconditionError(absl::StrCat("chunks of ", n_ctx, " tokens need a context of ", n_ctx,
                                                      "; the session holds ", session.context_length()));
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  // llama-perplexity's rule (it reports the same two figures).
  if (n_tokens < 2 * n_ctx)
    return absl::InvalidArgumentError(absl::StrCat("you need at least ", 2 * n_ctx,
                                                   " tokens to evaluate perplexity with a context of ", n_ctx,
                                                   "; the text tokenizes to only ", n_tokens, " tokens"));

  const tokenizer::Tokenizer* tok = session.tokenizer();
  const bool add_bos = tok != nullptr && tok->add_bos();
  const int64_t n_vocab = session.n_vocab();
  const int64_t n_chunk_max = n_tokens / n_ctx;
  const int64_t n_chunks = options.max_chunks > 0 ? std::min(options.max_chunks, n_chunk_max) : n_chunk_max;
  // The second half of each chunk: logits at positions first .. n_ctx-2 predict first+1 .. n_ctx-1.
  const int64_t first = n_ctx / 2;

  PerplexityResult r;
  r.n_tokens = n_tokens;
  r.bos_replaced = add_bos;
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  std::vector<int32_t> window(n_ctx);
  std::vector<float> logits;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t start = c * n_ctx;
    std::copy(tokens.begin() + start, tokens.begin() + start + n_ctx, window.begin());
    if (add_bos) window[0] = tok->bos_id();
    MEMRA_RETURN_IF_ERROR(session.Reset());
    logits.clear();
    auto last = session.Prefill(window, &logits);
    if (!last.ok())
      return absl::Status(last.status().code(),
                          absl::StrCat("chunk ", c + 1, " of ", n_chunks, ": ", last.status().message()));
    if (static_cast<int64_t>(logits.size()) != n_ctx * n_vocab)
      return absl::FailedPreconditionError(absl::StrCat(
          "the session returned ", logits.size() / std::max<int64_t>(n_vocab, 1), " logits rows for a chunk of ", n_ctx,
          " tokens; it must keep every prompt position's logits (SessionOptions::prompt_logits, or "
          "a plan compiled with all prefill logits)"));
    for (int64_t i = first; i + 1 < n_ctx; ++i) {
      // A NaN / inf would make the perplexity "nan": stop naming the row, as every decoding path does.
      MEMRA_RETURN_IF_ERROR(
          CheckFiniteLogits(logits.data() + i * n_vocab, n_vocab,
                            absl::StrCat("position ", i, " of chunk ", c + 1, " (of ", n_chunks, ")")));
      // The target is in the window (i + 1 >= 1: never the BOS slot), so Prefill checked its id.
      const double v = TokenNll(logits.data() + i * n_vocab, n_vocab, window[i + 1]);
      nll += v;
      nll2 += v * v;
      ++count;
    }
    if (options.progress)
      options.progress({c + 1, n_chunks, std::exp(nll / count),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
  }
  r.chunks = n_chunks;
  r.tokens_scored = count;
  r.mean_nll = nll / count;
  r.ppl = std::exp(r.mean_nll);
  // As llama-perplexity: the standard error of the mean NLL, carried to the perplexity.
  const double var = nll2 / count - r.mean_nll * r.mean_nll;
  if (var > 0 && count > 1) r.uncertainty = r.ppl * std::sqrt(var / (count - 1));
  return r;
}

absl::StatusOr<std::vector<int32_t>> PerplexityTokens(const Session& session, absl::string_view text) {
  const tokenizer::Tokenizer* tok = session.tokenizer();
  if (tok == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat("the model has no usable tokenizer (", session.tokenizer_status().message(), ")"));
  if (tok->add_eos())
    return absl::FailedPreconditionError(
        "the model's vocabulary appends EOS to every text (tokenizer.ggml.add_eos_token), which "
        "llama-perplexity does not support either");
  tokenizer::EncodeOptions eo;
  eo.add_special = true;
  eo.parse_special = false;  // common_tokenize's default: a text is scored as text
  return tok->Encode(text, eo);
}

absl::StatusOr<PerplexityResult> PerplexityOfText(Session& session, absl::string_view text,
                                                  const PerplexityOptions& options) {
  MEMRA_ASSIGN_OR_RETURN(std::vector<int32_t> ids, PerplexityTokens(session, text));
  return Perplexity(session, ids, options);
}

}  // namespace memra::runtime
