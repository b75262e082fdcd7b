// CUDA graphs on the GPU: replaying the captured segments of a compiled plan is bit-identical to
// launching the same plan's ops eagerly (prefill bucket functions and decode, across a state
// reset, f32 weights and q8_0 weights in blocks, dequantized into the workspace per product), and
// the device greedy decode loop (decode step + greedy pick as one graph, token ring) produces
// exactly the host greedy loop's tokens and stops on non-finite logits with the host path's error
// naming the step. Skips without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "kernels/cpu/Sampling.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/Session.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaExecutor.h"
#include "tests/cuda/CudaTestUtil.h"

namespace memra::runtime {
namespace {

using memra::testing::CudaTestDataPath;
using memra::testing::FileExists;
using memra::testing::FirstFreshToken;
using memra::testing::kFixturePrompt;
using memra::testing::UniqueTempPath;

struct Compiled {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<ir::Module> module;
};

// The tiny model through memra run's pipeline with one prefill bucket (16) besides @decode.
absl::StatusOr<Compiled> Compile(const std::string& path, int64_t n_ctx) {
  Compiled c;
  auto f = gguf::GgufFile::Open(path);
  if (!f.ok()) return f.status();
  c.file = std::move(*f);
  frontends::LowerOptions lo;
  lo.n_ctx = n_ctx;
  auto m = frontends::LowerModel(*c.file, lo);
  if (!m.ok()) return m.status();
  c.module = std::move(*m);
  passes::PassManagerOptions o;
  o.pipeline = passes::WithBucketLadder(passes::kDefaultPipeline, "16");
  auto pm = passes::PassManager::Create(o);
  if (!pm.ok()) return pm.status();
  if (absl::Status st = (*pm)->Run(*c.module); !st.ok()) return st;
  return c;
}

std::vector<HostTensor> Ids(const std::vector<int32_t>& ids) {
  std::vector<HostTensor> a;
  a.push_back(HostTensor::FromI32(ids, {static_cast<int64_t>(ids.size())}));
  return a;
}

class CudaGraphTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    auto dev = cuda::CudaDevice::Open(0);
    if (!dev.ok()) GTEST_SKIP() << "no GPU: " << dev.status().message();
  }
};

// Every logits row of a fixed call sequence, eager vs graphs: memcmp-equal.
TEST_P(CudaGraphTest, ReplayIsBitIdenticalToEager) {
  const std::string model = CudaTestDataPath(std::string("models/") + GetParam());
  if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
  auto c = Compile(model, 256);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::vector<float>> rows[2];
  GraphStats stats[2];
  for (int graphs = 0; graphs < 2; ++graphs) {
    CudaExecutorOptions o;
    o.cuda_graphs = graphs == 1;
    o.poison_arena = true;  // a graph reading a value it never wrote would differ
    auto e = CudaExecutor::Create(*c->module, *c->file, o);
    ASSERT_TRUE(e.ok()) << e.status();
    for (int round = 0; round < 3; ++round) {  // round 0 eager everywhere, then capture, then replay
      ASSERT_TRUE((*e)->ResetState().ok());
      const std::vector<int32_t> prompt(kFixturePrompt.begin() + round, kFixturePrompt.begin() + round + 16);
      auto p = (*e)->Run("prefill_t16", Ids(prompt));
      ASSERT_TRUE(p.ok()) << p.status();
      rows[graphs].emplace_back((*p)[0].f32(), (*p)[0].f32() + (*p)[0].numel());
      for (int step = 0; step < 5; ++step) {
        auto d = (*e)->Run("decode", Ids({kFixturePrompt[20 + step + round]}));
        ASSERT_TRUE(d.ok()) << d.status();
        rows[graphs].emplace_back((*d)[0].f32(), (*d)[0].f32() + (*d)[0].numel());
      }
      EXPECT_EQ((*e)->position(), 21);
    }
    stats[graphs] = (*e)->graph_stats();
    EXPECT_TRUE((*e)->UsesMemoryPlan("prefill_t16"));  // plan-memory's offsets, not the executor's
    EXPECT_TRUE((*e)->UsesMemoryPlan("decode"));
  }
  std::printf("  %s: graphs: %lld captured (%.1f ms), %lld launches; eager: %lld segment runs\n", GetParam(),
              static_cast<long long>(stats[1].captured), stats[1].capture_ms, static_cast<long long>(stats[1].launches),
              static_cast<long long>(stats[0].eager_segments));
  EXPECT_EQ(stats[0].captured, 0);
  EXPECT_EQ(stats[0].launches, 0);
  EXPECT_EQ(stats[1].captured, 2);  // @prefill_t16 and @decode: one segment each
  EXPECT_EQ(stats[1].capture_failures, 0) << stats[1].last_capture_failure;
  EXPECT_GE(stats[1].launches, 2 + 14);
  ASSERT_EQ(rows[0].size(), rows[1].size());
  int differing = 0;
  for (size_t i = 0; i < rows[0].size(); ++i) {
    ASSERT_EQ(rows[0][i].size(), rows[1][i].size());
    if (std::memcmp(rows[0][i].data(), rows[1][i].data(), rows[0][i].size() * sizeof(float)) != 0) ++differing;
  }
  EXPECT_EQ(differing, 0) << "of " << rows[0].size() << " logits rows";
}

// The device loop (graph per step, token ring, one sync per chunk) = the host greedy loop.
TEST_P(CudaGraphTest, DeviceGreedyLoopMatchesHostGreedy) {
  const std::string model = CudaTestDataPath(std::string("models/") + GetParam());
  if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
  auto c = Compile(model, 256);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<int32_t> prompt(kFixturePrompt.begin(), kFixturePrompt.end());
  const int64_t n = 40;
  std::vector<int32_t> host, device[2];
  for (int graphs = 0; graphs < 2; ++graphs) {
    CudaExecutorOptions o;
    o.cuda_graphs = graphs == 1;
    auto e = CudaExecutor::Create(*c->module, *c->file, o);
    ASSERT_TRUE(e.ok()) << e.status();
    auto p = (*e)->Run("prefill", Ids(prompt));
    ASSERT_TRUE(p.ok()) << p.status();
    const int32_t first = kernels::cpu::Argmax((*p)[0].f32(), (*p)[0].numel());
    if (graphs == 0) {  // the host loop: logits downloaded, argmax on the host
      int32_t t = first;
      for (int64_t i = 0; i < n; ++i) {
        auto d = (*e)->Run("decode", Ids({t}));
        ASSERT_TRUE(d.ok()) << d.status();
        t = kernels::cpu::Argmax((*d)[0].f32(), (*d)[0].numel());
        host.push_back(t);
      }
      ASSERT_TRUE((*e)->ResetState().ok());
      ASSERT_TRUE((*e)->Run("prefill", Ids(prompt)).ok());
    }
    // Chunks of 1, 7 and the rest: the loop continues across calls from the last token.
    int32_t t = first;
    for (int64_t k : {int64_t{1}, int64_t{7}, n - 8}) {
      auto out = (*e)->DecodeGreedy(t, k);
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(static_cast<int64_t>(out->size()), k);
      device[graphs].insert(device[graphs].end(), out->begin(), out->end());
      t = out->back();
    }
    EXPECT_EQ((*e)->position(), static_cast<int64_t>(prompt.size()) + n);
    if (graphs == 1) {
      EXPECT_GE((*e)->graph_stats().launches, n - 2);
    }
  }
  EXPECT_EQ(device[0], host) << "eager device loop vs host loop";
  EXPECT_EQ(device[1], host) << "graph device loop vs host loop";
}

TEST_P(CudaGraphTest, DeviceGreedyLoopRefusesContextOverflowBeforeRunning) {
  const std::string model = CudaTestDataPath(std::string("models/") + GetParam());
  if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
  auto c = Compile(model, 64);
  ASSERT_TRUE(c.ok()) << c.status();
  auto e = CudaExecutor::Create(*c->module, *c->file, {});
  ASSERT_TRUE(e.ok()) << e.status();
  const std::vector<int32_t> prompt(kFixturePrompt.begin(), kFixturePrompt.end());
  ASSERT_TRUE((*e)->Run("prefill", Ids(prompt)).ok());
  auto out = (*e)->DecodeGreedy(1, 17);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(std::string(out.status().message()).find("context overflow"), std::string::npos) << out.status();
  EXPECT_EQ((*e)->position(), static_cast<int64_t>(prompt.size()));
  auto bad = (*e)->DecodeGreedy(-1, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("outside the vocabulary"), std::string::npos) << bad.status();
  auto ok = (*e)->DecodeGreedy(1, 16);  // exactly fills the cache
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*e)->position(), 64);
}

// Session over the device loop: a stop inside a chunk leaves the steps after it in the state, and
// the session refuses to continue until Reset (never a silent continuation from unseen tokens).
TEST_P(CudaGraphTest, SessionStopInsideAChunkRefusesToContinueUntilReset) {
  const std::string model = CudaTestDataPath(std::string("models/") + GetParam());
  if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
  SessionOptions so;
  so.backend = Backend::kCuda;
  so.decode_chunk = 8;
  so.cuda.progress = false;
  auto s = Session::Open(model, so);
  ASSERT_TRUE(s.ok()) << s.status();
  GenerationParams gp;
  gp.n_predict = 32;
  gp.stop_at_eog = false;
  int seen = 0;
  // Token 1 comes from the prefill, tokens 2..9 from the first chunk of 8: stop at token 3.
  auto st = (*s)->Generate(kFixturePrompt, gp, [&](int32_t id, absl::string_view) { return id < 0 || ++seen < 3; });
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->n_generated, 3);
  EXPECT_EQ((*s)->overrun_steps(), 6);  // steps that consumed tokens 3..8
  EXPECT_EQ((*s)->position(), static_cast<int64_t>(kFixturePrompt.size()) + 8);
  auto refused = (*s)->Decode(st->tokens.back());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(refused.status().message()).find("Reset()"), std::string::npos) << refused.status();
  ASSERT_TRUE((*s)->Reset().ok());
  EXPECT_EQ((*s)->overrun_steps(), 0);
  EXPECT_TRUE((*s)->Prefill(kFixturePrompt).ok());
}

// Expects runtime/Logits.h's DataLoss naming `step` and vocabulary id `id`.
void ExpectNonFinite(const absl::Status& st, int64_t step, int64_t id) {
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_TRUE(absl::StartsWith(st.message(), absl::StrCat("the logits after decode step ", step, " are not finite (")))
      << st;
  EXPECT_NE(st.message().find(absl::StrCat(" at vocabulary id ", id, "): ")), std::string::npos) << st;
}

// Non-finite logits stop the device loop (issue 12: it picked token 0 forever) with the host path's
// error, eager and replayed: one NaN logit in rows whose maximum is finite (a NaN row of
// output.weight: the device pick checks every value, not the maximum), and every logit NaN from the
// step that reads a token whose embedding row is NaN (mid-chunk; a later call reports its own first
// step, so the record is reset per chunk). Session's chunked device loop names the same step as
// its host loop.
TEST_P(CudaGraphTest, DeviceGreedyLoopStopsOnNonFiniteLogits) {
  const std::string model = CudaTestDataPath(std::string("models/") + GetParam());
  if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
  const std::vector<int32_t> prompt(kFixturePrompt.begin(), kFixturePrompt.end());
  const int64_t P = static_cast<int64_t>(prompt.size());
  // The clean continuation: seq[0] from the prefill, seq[i] from decode step i.
  std::vector<int32_t> seq;
  {
    auto c = Compile(model, 256);
    ASSERT_TRUE(c.ok()) << c.status();
    auto e = CudaExecutor::Create(*c->module, *c->file, {});
    ASSERT_TRUE(e.ok()) << e.status();
    auto p = (*e)->Run("prefill", Ids(prompt));
    ASSERT_TRUE(p.ok()) << p.status();
    seq.push_back(kernels::cpu::Argmax((*p)[0].f32(), (*p)[0].numel()));
    auto out = (*e)->DecodeGreedy(seq[0], 12);
    ASSERT_TRUE(out.ok()) << out.status();
    seq.insert(seq.end(), out->begin(), out->end());
  }
  const int64_t j = FirstFreshToken(seq);
  ASSERT_GE(j, 2) << "no fresh token in the greedy continuation";
  const int32_t b = 200;
  const std::string tag = std::string(GetParam()).find("q8_0") != std::string::npos ? "q8_0" : "f32";
  const std::string head_model = UniqueTempPath("nan_head_" + tag + ".gguf");
  const std::string embd_model = UniqueTempPath("nan_embd_" + tag + ".gguf");
  ASSERT_TRUE(memra::testing::WriteWithNanRow(model, "output.weight", b, head_model).ok());
  ASSERT_TRUE(memra::testing::WriteWithNanRow(model, "token_embd.weight", seq[j], embd_model).ok());
  for (int graphs = 0; graphs < 2; ++graphs) {
    SCOPED_TRACE(graphs ? "cuda graphs" : "eager");
    CudaExecutorOptions o;
    o.cuda_graphs = graphs == 1;
    {  // one NaN logit per step: the first step of each call (eager, then captured and replayed)
      auto c = Compile(head_model, 256);
      ASSERT_TRUE(c.ok()) << c.status();
      auto e = CudaExecutor::Create(*c->module, *c->file, o);
      ASSERT_TRUE(e.ok()) << e.status();
      auto p = (*e)->Run("prefill", Ids(prompt));
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_TRUE(std::isnan((*p)[0].f32()[b]));
      const int32_t first = kernels::cpu::Argmax((*p)[0].f32(), (*p)[0].numel());
      EXPECT_NE(first, b);  // the maximum is finite
      auto out = (*e)->DecodeGreedy(first, 4, 7);
      ASSERT_FALSE(out.ok());
      ExpectNonFinite(out.status(), 7, b);
      EXPECT_EQ((*e)->position(), P + 4);  // the whole chunk ran
      out = (*e)->DecodeGreedy(first, 4, 11);
      ASSERT_FALSE(out.ok());
      ExpectNonFinite(out.status(), 11, b);
      EXPECT_EQ((*e)->position(), P + 8);
      if (graphs == 1) EXPECT_GE((*e)->graph_stats().launches, 4);
    }
    {  // all logits NaN from step j + 1 on
      auto c = Compile(embd_model, 256);
      ASSERT_TRUE(c.ok()) << c.status();
      auto e = CudaExecutor::Create(*c->module, *c->file, o);
      ASSERT_TRUE(e.ok()) << e.status();
      auto p = (*e)->Run("prefill", Ids(prompt));
      ASSERT_TRUE(p.ok()) << p.status();
      ASSERT_EQ(kernels::cpu::Argmax((*p)[0].f32(), (*p)[0].numel()), seq[0]);
      auto out = (*e)->DecodeGreedy(seq[0], 12);
      ASSERT_FALSE(out.ok());
      ExpectNonFinite(out.status(), j + 1, 0);
      EXPECT_EQ((*e)->position(), P + 12);
      out = (*e)->DecodeGreedy(seq[0], 3, 100);  // the state holds NaN now: this call's first step
      ASSERT_FALSE(out.ok());
      ExpectNonFinite(out.status(), 100, 0);
    }
  }
  for (int64_t chunk : {int64_t{2}, int64_t{0}}) {  // Session: chunks of 2 (the device loop), the host loop
    SCOPED_TRACE(absl::StrCat("session decode_chunk ", chunk));
    SessionOptions so;
    so.backend = Backend::kCuda;
    so.decode_chunk = chunk;
    so.cuda.progress = false;
    auto s = Session::Open(embd_model, so);
    ASSERT_TRUE(s.ok()) << s.status();
    GenerationParams gp;
    gp.n_predict = static_cast<int64_t>(seq.size());  // decode steps 1..12: step j + 1 among them
    gp.stop_at_eog = false;
    auto st = (*s)->Generate(kFixturePrompt, gp, nullptr);
    ASSERT_FALSE(st.ok());
    ExpectNonFinite(st.status(), j + 1, 0);
  }
  std::remove(head_model.c_str());
  std::remove(embd_model.c_str());
}

INSTANTIATE_TEST_SUITE_P(TinyModels, CudaGraphTest, ::testing::Values("qwen35-tiny-f32.gguf", "qwen35-tiny-q8_0.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param).find("q8_0") != std::string::npos ? "q8_0" : "f32";
                         });

}  // namespace
}  // namespace memra::runtime
