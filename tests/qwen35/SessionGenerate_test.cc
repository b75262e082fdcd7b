// Session::Generate's decode loop on the CPU executor (the tiny f32 fixture, memra run's
// pipeline): greedy generation through Executor::DecodeGreedy (decode_chunk > 0) and through the
// host-sampled loop (decode_chunk 0) give llama.cpp's greedy continuation token for token; a stop
// from the callback leaves no decode steps past it on the CPU (its chunks are one step), so the
// session continues; non-finite logits stop both loops with the same error naming the same step.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/Sampling.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/Session.h"
#include "tests/TestUtil.h"

namespace memra::runtime {
namespace {

using memra::testing::FileExists;
using memra::testing::FirstFreshToken;
using memra::testing::kFixturePrompt;
using memra::testing::TestDataPath;
using memra::testing::UniqueTempPath;

std::string Model() { return TestDataPath("models/qwen35-tiny-f32.gguf"); }

SessionOptions Opts(int64_t decode_chunk) {
  SessionOptions so;
  so.threads = 2;
  so.backend = Backend::kCpu;
  so.decode_chunk = decode_chunk;
  so.compile = [](ir::Module& m) -> absl::Status {
    passes::PassManagerOptions o;
    o.pipeline = passes::WithBucketLadder(passes::kDefaultPipeline, "16");
    auto pm = passes::PassManager::Create(o);
    if (!pm.ok()) return pm.status();
    return (*pm)->Run(m);
  };
  return so;
}

TEST(SessionGenerate, GreedyLoopsMatchLlamaCpp) {
  if (!FileExists(Model())) GTEST_SKIP() << "fixture not found: " << Model();
  auto want = memra::testing::ReadI32File(TestDataPath("ref/qwen35-tiny-f32/greedy_tokens.i32"));
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_GE(want->size(), 32u);
  for (int64_t chunk : {int64_t{16}, int64_t{0}}) {
    auto s = Session::Open(Model(), Opts(chunk));
    ASSERT_TRUE(s.ok()) << s.status();
    GenerationParams gp;
    gp.n_predict = 32;
    gp.stop_at_eog = false;
    std::vector<int32_t> streamed;
    auto st = (*s)->Generate(kFixturePrompt, gp, [&](int32_t id, absl::string_view) {
      if (id >= 0) streamed.push_back(id);
      return true;
    });
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(st->tokens, std::vector<int32_t>(want->begin(), want->begin() + 32)) << "decode_chunk " << chunk;
    EXPECT_EQ(streamed, st->tokens);
    EXPECT_EQ(st->n_generated, 32);
    EXPECT_EQ(st->n_decode_calls, 31);  // the last token is not decoded
    EXPECT_EQ((*s)->position(), static_cast<int64_t>(kFixturePrompt.size()) + 31);
    EXPECT_EQ((*s)->overrun_steps(), 0);
  }
}

TEST(SessionGenerate, DecodeGreedyEqualsTheHostLoop) {
  if (!FileExists(Model())) GTEST_SKIP() << "fixture not found: " << Model();
  auto s = Session::Open(Model(), Opts(16));
  ASSERT_TRUE(s.ok()) << s.status();
  auto logits = (*s)->Prefill(kFixturePrompt);
  ASSERT_TRUE(logits.ok()) << logits.status();
  const int32_t first = kernels::cpu::Argmax(logits->data(), (*s)->n_vocab());
  std::vector<int32_t> host;
  int32_t t = first;
  for (int i = 0; i < 12; ++i) {
    auto l = (*s)->Decode(t);
    ASSERT_TRUE(l.ok()) << l.status();
    t = kernels::cpu::Argmax(l->data(), (*s)->n_vocab());
    host.push_back(t);
  }
  ASSERT_TRUE((*s)->Reset().ok());
  ASSERT_TRUE((*s)->Prefill(kFixturePrompt).ok());
  auto dev = (*s)->executor().DecodeGreedy(first, 12);
  ASSERT_TRUE(dev.ok()) << dev.status();
  EXPECT_EQ(*dev, host);
  EXPECT_EQ((*s)->position(), static_cast<int64_t>(kFixturePrompt.size()) + 12);
}

TEST(SessionGenerate, StopFromTheCallbackLeavesAContinuableState) {
  if (!FileExists(Model())) GTEST_SKIP() << "fixture not found: " << Model();
  auto s = Session::Open(Model(), Opts(16));
  ASSERT_TRUE(s.ok()) << s.status();
  GenerationParams gp;
  gp.n_predict = 32;
  gp.stop_at_eog = false;
  int seen = 0;
  auto st = (*s)->Generate(kFixturePrompt, gp, [&](int32_t id, absl::string_view) { return id < 0 || ++seen < 5; });
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->n_generated, 5);
  EXPECT_EQ((*s)->overrun_steps(), 0);  // the CPU decodes one step per call
  EXPECT_EQ((*s)->position(), static_cast<int64_t>(kFixturePrompt.size()) + 4);
  EXPECT_TRUE((*s)->Decode(st->tokens.back()).ok());
}

// Greedy with penalties is the argmax of the penalized logits every step (the device loop, a
// plain argmax, is not used even with decode_chunk 16), the prompt counts as history, and
// history() is what the state holds.
TEST(SessionGenerate, GreedyWithPenaltiesSamplesOnTheHost) {
  if (!FileExists(Model())) GTEST_SKIP() << "fixture not found: " << Model();
  auto s = Session::Open(Model(), Opts(16));
  ASSERT_TRUE(s.ok()) << s.status();
  GenerationParams gp;
  gp.n_predict = 24;
  gp.stop_at_eog = false;
  gp.sampling.presence_penalty = 1000.0f;  // any token seen before loses against any unseen one
  gp.sampling.repeat_last_n = -1;
  auto st = (*s)->Generate(kFixturePrompt, gp);
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_EQ(st->n_generated, 24);
  std::vector<int32_t> seen(kFixturePrompt.begin(), kFixturePrompt.end());
  for (int32_t id : st->tokens) {
    EXPECT_EQ(std::count(seen.begin(), seen.end(), id), 0) << "token " << id << " repeated";
    seen.push_back(id);
  }
  std::vector<int32_t> want(kFixturePrompt.begin(), kFixturePrompt.end());
  want.insert(want.end(), st->tokens.begin(), st->tokens.end() - 1);  // the last is not decoded
  EXPECT_EQ((*s)->history(), want);
  EXPECT_EQ(static_cast<int64_t>((*s)->history().size()), (*s)->position());
  // The window: with repeat_last_n 1 only the newest token is penalized.
  ASSERT_TRUE((*s)->Reset().ok());
  EXPECT_TRUE((*s)->history().empty());
  gp.sampling.repeat_last_n = 1;
  st = (*s)->Generate(kFixturePrompt, gp);
  ASSERT_TRUE(st.ok()) << st.status();
  for (size_t i = 1; i < st->tokens.size(); ++i) EXPECT_NE(st->tokens[i], st->tokens[i - 1]);
  // The same steps by hand: Prefill / Decode and SampleToken over the state's tokens.
  ASSERT_TRUE((*s)->Reset().ok());
  auto logits = (*s)->Prefill(kFixturePrompt);
  ASSERT_TRUE(logits.ok()) << logits.status();
  std::mt19937_64 rng(0);
  std::vector<int32_t> by_hand;
  for (int i = 0; i < 24; ++i) {
    by_hand.push_back(kernels::cpu::SampleToken(logits->data(), (*s)->n_vocab(), gp.sampling, rng, (*s)->history()));
    if (i + 1 < 24) {
      logits = (*s)->Decode(by_hand.back());
      ASSERT_TRUE(logits.ok()) << logits.status();
    }
  }
  EXPECT_EQ(by_hand, st->tokens);
  // Out-of-range parameters are refused before anything runs.
  gp.sampling.repeat_penalty = 0.0f;
  ASSERT_TRUE((*s)->Reset().ok());
  auto bad = (*s)->Generate(kFixturePrompt, gp);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*s)->position(), 0);
}

TEST(SessionGenerate, NonFiniteLogitsStopBothLoopsAtTheSameStep) {
  if (!FileExists(Model())) GTEST_SKIP() << "fixture not found: " << Model();
  GenerationParams gp;
  gp.n_predict = 12;
  gp.stop_at_eog = false;
  std::vector<int32_t> clean;
  {
    auto s = Session::Open(Model(), Opts(16));
    ASSERT_TRUE(s.ok()) << s.status();
    auto st = (*s)->Generate(kFixturePrompt, gp, nullptr);
    ASSERT_TRUE(st.ok()) << st.status();
    clean = st->tokens;
  }
  const int64_t j = FirstFreshToken(clean);
  ASSERT_GE(j, 2) << "no fresh token in the greedy continuation";
  const std::string nan_model = UniqueTempPath("nan_embd.gguf");
  ASSERT_TRUE(memra::testing::WriteWithNanRow(Model(), "token_embd.weight", clean[j], nan_model).ok());
  std::string messages[2];
  for (int64_t chunk : {int64_t{16}, int64_t{0}}) {  // Executor::DecodeGreedy, then the host-sampled loop
    SCOPED_TRACE(absl::StrCat("decode_chunk ", chunk));
    auto s = Session::Open(nan_model, Opts(chunk));
    ASSERT_TRUE(s.ok()) << s.status();
    std::vector<int32_t> seen;
    auto st = (*s)->Generate(kFixturePrompt, gp, [&](int32_t id, absl::string_view) {
      if (id >= 0) seen.push_back(id);
      return true;
    });
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.status().code(), absl::StatusCode::kDataLoss);
    const std::string msg(st.status().message());
    EXPECT_TRUE(absl::StartsWith(msg, absl::StrCat("the logits after decode step ", j + 1, " are not finite (")))
        << msg;
    EXPECT_NE(msg.find("at vocabulary id 0): the model's weights or its computation produced NaN/inf"),
              std::string::npos)
        << msg;
    EXPECT_EQ(seen, std::vector<int32_t>(clean.begin(), clean.begin() + j + 1));  // up to the poisoned token
    messages[chunk == 0] = msg;
  }
  EXPECT_EQ(messages[0], messages[1]);
  std::remove(nan_model.c_str());
}

// One NaN logit in a row whose maximum is finite (output.weight's row b): DecodeGreedy on the CPU
// checks every logit, as the host loop does, and numbers the steps from first_step.
TEST(SessionGenerate, DecodeGreedyStopsOnOneNanLogit) {
  if (!FileExists(Model())) GTEST_SKIP() << "fixture not found: " << Model();
  const int32_t b = 200;
  const std::string nan_model = UniqueTempPath("nan_output_row.gguf");
  ASSERT_TRUE(memra::testing::WriteWithNanRow(Model(), "output.weight", b, nan_model).ok());
  auto s = Session::Open(nan_model, Opts(16));
  ASSERT_TRUE(s.ok()) << s.status();
  auto logits = (*s)->Prefill(kFixturePrompt);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_TRUE(std::isnan((*logits)[b]));
  const int32_t first = kernels::cpu::Argmax(logits->data(), (*s)->n_vocab());
  EXPECT_NE(first, b);  // the maximum is finite: only a check of every value sees the NaN
  auto out = (*s)->executor().DecodeGreedy(first, 4, 7);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StartsWith(out.status().message(), "the logits after decode step 7 are not finite ("))
      << out.status();
  EXPECT_NE(out.status().message().find(absl::StrCat("at vocabulary id ", b, ")")), std::string::npos) << out.status();
  EXPECT_EQ((*s)->position(), static_cast<int64_t>(kFixturePrompt.size()) + 1);  // the step that ran
  std::remove(nan_model.c_str());
}

}  // namespace
}  // namespace memra::runtime
