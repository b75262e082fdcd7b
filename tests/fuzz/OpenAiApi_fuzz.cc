// libFuzzer target for the server's request bodies (server/OpenAiApi: JSON -> scheduler Request,
// then the reply built from token events), over the Qwen3 vocabulary and its chat template in
// tests/data/tokenizer. The first byte picks /v1/chat/completions (odd) or /v1/completions; the
// rest is the body. Nothing may crash, hang or read out of bounds, and:
//  * a refusal carries a message and a 4xx status, and its error object is valid JSON;
//  * an accepted request holds only vocabulary ids, a prompt within the slot's context and a
//    max_tokens of at least 0;
//  * the reply to three token events is valid JSON (each SSE frame's payload when streaming).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "frontends/gguf/GgufFile.h"
#include "frontends/tokenizer/ChatTemplate.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/OpenAiApi.h"
#include "tests/fuzz/ReplyChecks.h"

#ifndef MEMRA_TEST_DATA_DIR
#define MEMRA_TEST_DATA_DIR "tests/data"
#endif

namespace {

using memra::fuzz::FramesAreJson;
using memra::fuzz::IsJson;
using namespace memra;

void Check(bool cond, const char* what) {
  if (!cond) {
    std::fprintf(stderr, "OpenAiApi_fuzz: %s\n", what);
    std::abort();
  }
}

tokenizer::Tokenizer* g_tok = nullptr;
tokenizer::ChatTemplate* g_chat = nullptr;
constexpr int64_t kCtxPerSlot = 256;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string path = MEMRA_TEST_DATA_DIR "/tokenizer/qwen3-vocab.gguf";
  auto file = gguf::GgufFile::Open(path);
  Check(file.ok(), "cannot open the Qwen3 vocabulary");
  auto tok = tokenizer::Tokenizer::FromGguf(**file);
  Check(tok.ok(), "cannot build the tokenizer");
  g_tok = tok->release();
  auto chat = tokenizer::ChatTemplate::FromTokenizer(*g_tok);
  Check(chat.ok(), "the vocabulary has no usable chat template");
  g_chat = chat->release();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 64 * 1024) return 0;
  const bool chat = (data[0] & 1) != 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  const server::ApiContext ctx{g_tok, g_chat, "fuzz", kCtxPerSlot};
  auto job = chat ? server::ParseChatRequest(body, ctx) : server::ParseCompletionRequest(body, ctx);
  if (!job.ok()) {
    Check(!job.status().message().empty(), "a refusal without a message");
    const int http = server::HttpStatusOf(job.status());
    Check(http >= 400 && http < 500, "a refusal that is not a 4xx");
    Check(IsJson(server::ErrorJson(job.status())), "an error object that is not JSON");
    return 0;
  }
  const runtime::Request& r = job->request;
  for (int32_t id : r.prompt) Check(g_tok->IsValidId(id), "a prompt id outside the vocabulary");
  Check(static_cast<int64_t>(r.prompt.size()) <= kCtxPerSlot, "a prompt over the slot's context");
  Check(r.max_tokens >= 0, "a negative max_tokens");

  // Three generated tokens (ids and texts from the vocabulary), the last one finishing.
  server::ReplyBuilder reply(*job, "fuzz-1", 1);
  const int32_t ids[3] = {g_tok->n_vocab() / 3, 1, g_tok->eog_ids().empty() ? 2 : g_tok->eog_ids()[0]};
  for (int i = 0; i < 3; ++i) {
    runtime::TokenEvent e;
    e.id = 1;
    e.token = ids[i];
    auto text = g_tok->Decode(absl::Span<const int32_t>(&ids[i], 1));
    e.text = text.ok() ? *text : std::string();
    e.logprob = -0.5f;
    if (r.logprobs > 0) e.top.push_back({ids[i], -0.5f});
    e.last = i == 2;
    e.reason = e.last ? runtime::FinishReason::kLength : runtime::FinishReason::kNone;
    e.usage = {static_cast<int64_t>(r.prompt.size()), i + 1};
    if (job->stream) {
      Check(FramesAreJson(reply.Chunk(e)), "an SSE frame that is not JSON");
    } else {
      reply.Add(e);
    }
  }
  if (!job->stream) Check(IsJson(reply.Json()), "a reply that is not JSON");
  return 0;
}
