#include "runtime/Detokenizer.h"

#include <utility>

#include "frontends/tokenizer/Tokenizer.h"

namespace memra::runtime {
namespace {

using PieceFn = std::function<std::string(int32_t)>;

class PieceDetok : public Detokenizer {
 public:
  explicit PieceDetok(std::shared_ptr<const PieceFn> piece) : piece_(std::move(piece)) {}
  std::string Push(int32_t id) override { return (*piece_)(id); }

 private:
  std::shared_ptr<const PieceFn> piece_;  // shared by every Detokenizer of one factory
};

class StreamingDetok : public Detokenizer {
 public:
  explicit StreamingDetok(const tokenizer::Tokenizer& tok) : dec_(tok, Options()) {}
  // Ids outside the vocabulary never reach here (the scheduler samples from the logits' range);
  // an error would only drop that token's text.
  std::string Push(int32_t id) override {
    auto piece = dec_.Push(id);
    return piece.ok() ? std::move(*piece) : std::string();
  }
  std::string Flush() override { return dec_.Flush(); }

 private:
  static tokenizer::DecodeOptions Options() {
    tokenizer::DecodeOptions o;
    o.render_special = false;
    o.strip_space_prefix = false;
    return o;
  }
  tokenizer::StreamingDecoder dec_;
};

}  // namespace

DetokenizerFactory PieceDetokenizer(std::function<std::string(int32_t)> piece) {
  auto shared = std::make_shared<const PieceFn>(std::move(piece));
  return [shared]() -> std::unique_ptr<Detokenizer> { return std::make_unique<PieceDetok>(shared); };
}

DetokenizerFactory TokenizerDetokenizer(const tokenizer::Tokenizer& tok) {
  return [&tok]() -> std::unique_ptr<Detokenizer> { return std::make_unique<StreamingDetok>(tok); };
}

}  // namespace memra::runtime
