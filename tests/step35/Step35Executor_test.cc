// Step 3.5 on the CPU executor against the shared fixtures (shared/fixtures/README.md §10):
//   * step35-tiny-f32 vs llama.cpp's logits (prefill, 16-token chunks, the greedy decode's
//     tokens and logits): max |d| <= 1e-4, argmax 48/48, greedy 32/32;
//   * step35-tiny-f32 and -q8_0 (f32 activations) vs the float64 exact-dequant reference: max |d|
//     <= 1e-4, argmax 48/48, per-row == dequant-at-load, and its 32 greedy tokens;
//   * chunked prefill (chunks straddling the 16-key window) equals one call, decode after a
//     prefill equals the matching row of a longer prefill, and sliding-window rings equal
//     full-length caches;
//   * an f16 KV cache against llama.cpp's f16-KV flash-attention run;
//   * every layer's named nodes vs llama.cpp's per-node dump (router ids equal);
//   * both fixtures through runtime::Session and the default pipeline (fusions, buckets, memory
//     plan): the exact reference's 32 greedy tokens.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "frontends/ModelFamily.h"
#include "gtest/gtest.h"
#include "kernels/cpu/Sampling.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/Session.h"
#include "runtime/cpu/CpuExecutor.h"
#include "tests/FixtureLogits.h"
#include "tests/JsonLite.h"
#include "tests/LoadedModel.h"
#include "tests/TestUtil.h"

namespace memra::runtime {
namespace {

using memra::testing::FileExists;
using memra::testing::ReadF32File;
using memra::testing::SharedPath;

const std::vector<int32_t>& kPrompt = memra::testing::kFixturePrompt;
constexpr int64_t kVocab = memra::testing::kFixtureVocab;

std::string ModelPath(const std::string& model) { return memra::testing::FixtureModelPath(model); }
std::string RefPath(const std::string& model, const std::string& file) {
  return memra::testing::FixtureRefPath(model, file);
}

using Diff = memra::testing::LogitsDiff;
Diff Compare(const std::vector<float>& got, const std::vector<float>& ref) {
  return memra::testing::CompareLogits(got, ref, kVocab);
}

absl::StatusOr<memra::testing::LoadedModel> Load(const std::string& path, bool all_logits = true,
                                                 WeightMode mode = WeightMode::kPerRow,
                                                 frontends::KvCacheTypes cache_types = {}) {
  frontends::LowerOptions lo;
  lo.prefill_all_logits = all_logits;
  lo.cache_types = cache_types;
  return memra::testing::LoadModel(path, lo, mode);
}

#define SKIP_UNLESS(...)                     \
  for (const std::string& p : {__VA_ARGS__}) \
    if (!FileExists(p)) GTEST_SKIP() << p << " not found (../shared)";

TEST(Step35ExecutorTest, F32MatchesLlamaCpp) {
  const std::string model = ModelPath("step35-tiny-f32");
  SKIP_UNLESS(model, RefPath("step35-tiny-f32", "logits_batch.f32"), RefPath("step35-tiny-f32", "logits_chunk16.f32"));
  auto l = Load(model);
  ASSERT_TRUE(l.ok()) << l.status();
  auto ref = ReadF32File(RefPath("step35-tiny-f32", "logits_batch.f32"));
  auto ref16 = ReadF32File(RefPath("step35-tiny-f32", "logits_chunk16.f32"));
  ASSERT_TRUE(ref.ok() && ref16.ok());
  auto out = l->Prefill(kPrompt);
  ASSERT_TRUE(out.ok()) << out.status();
  l->exec->ResetState();
  auto chunked = l->PrefillChunked(kPrompt, 16);
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  for (const auto& [name, got, want] :
       {std::tuple<const char*, const std::vector<float>*, const std::vector<float>*>{"prefill", &*out, &*ref},
        {"chunks of 16", &*chunked, &*ref16}}) {
    const Diff d = Compare(*got, *want);
    std::printf("  step35-tiny-f32 %s vs llama.cpp: max|d| %.3e rms rel %.3e argmax %d/48\n", name, d.max_abs,
                d.rms_rel, d.argmax_equal);
    EXPECT_LE(d.max_abs, 1e-4) << name;  // README §10.2 (expect ~1e-5)
    EXPECT_EQ(d.argmax_equal, 48) << name;
  }
}

TEST(Step35ExecutorTest, GreedyDecodeMatchesLlamaCpp) {
  const std::string model = ModelPath("step35-tiny-f32");
  SKIP_UNLESS(model, RefPath("step35-tiny-f32", "greedy_tokens.i32"), RefPath("step35-tiny-f32", "greedy_logits.f32"));
  auto want = memra::testing::ReadI32File(RefPath("step35-tiny-f32", "greedy_tokens.i32"));
  auto want_logits = ReadF32File(RefPath("step35-tiny-f32", "greedy_logits.f32"));
  ASSERT_TRUE(want.ok() && want_logits.ok());
  auto l = Load(model, /*all_logits=*/false);
  ASSERT_TRUE(l.ok()) << l.status();
  auto first = l->Prefill(kPrompt);
  ASSERT_TRUE(first.ok()) << first.status();
  // greedy_logits row i: the logits after feeding greedy token i (README §1).
  std::vector<int32_t> got;
  std::vector<float> all;
  int32_t next = kernels::cpu::Argmax(first->data(), kVocab);
  for (size_t i = 0; i < want->size(); ++i) {
    got.push_back(next);
    auto step = l->Decode(next);
    ASSERT_TRUE(step.ok()) << step.status();
    all.insert(all.end(), step->begin(), step->end());
    next = kernels::cpu::Argmax(step->data(), kVocab);
  }
  EXPECT_EQ(got, *want);
  const Diff d = Compare(all, *want_logits);
  std::printf("  step35-tiny-f32 greedy decode logits vs llama.cpp (%zu rows): max|d| %.3e rms rel %.3e\n",
              std::min(all.size(), want_logits->size()) / kVocab, d.max_abs, d.rms_rel);
  EXPECT_LE(d.max_abs, 1e-4);
}

class Step35ExactTest : public ::testing::TestWithParam<const char*> {};

TEST_P(Step35ExactTest, MatchesExactDequantReference) {
  const std::string name = GetParam();
  const std::string model = ModelPath(name);
  SKIP_UNLESS(model, RefPath(name, "exact_dequant.logits_batch.f32"),
              RefPath(name, "exact_dequant.logits_batch.greedy.json"));
  auto ref = ReadF32File(RefPath(name, "exact_dequant.logits_batch.f32"));
  ASSERT_TRUE(ref.ok()) << ref.status();
  std::vector<float> results[2];
  for (int mode = 0; mode < 2; ++mode) {
    auto l = Load(model, true, mode == 0 ? WeightMode::kPerRow : WeightMode::kDequantizeAtLoad);
    ASSERT_TRUE(l.ok()) << l.status();
    auto out = l->Prefill(kPrompt);
    ASSERT_TRUE(out.ok()) << out.status();
    results[mode] = *out;
  }
  EXPECT_EQ(results[0], results[1]);
  const Diff d = Compare(results[0], *ref);
  std::printf("  %s vs exact_dequant: max|d| %.3e rms rel %.3e argmax %d/48\n", name.c_str(), d.max_abs, d.rms_rel,
              d.argmax_equal);
  EXPECT_LE(d.max_abs, 1e-4);
  EXPECT_EQ(d.argmax_equal, 48);

  auto want = memra::testing::ReadGreedyTokens(RefPath(name, "exact_dequant.logits_batch.greedy.json"));
  ASSERT_TRUE(want.ok()) << want.status();
  auto l = Load(model, /*all_logits=*/false);
  ASSERT_TRUE(l.ok()) << l.status();
  auto got = l->Greedy(kPrompt, static_cast<int64_t>(want->size()));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *want);
}

// memra run's path on the CPU: Session with the default pipeline (fusions, bucket functions, the
// memory plan) and the device-style greedy loop in chunks of 16.
TEST_P(Step35ExactTest, SessionGreedyThroughTheDefaultPipeline) {
  const std::string name = GetParam();
  const std::string model = ModelPath(name);
  SKIP_UNLESS(model, RefPath(name, "exact_dequant.logits_batch.greedy.json"));
  auto greedy = memra::testing::ReadGreedyTokens(RefPath(name, "exact_dequant.logits_batch.greedy.json"));
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  SessionOptions so;
  so.threads = 2;
  so.backend = Backend::kCpu;
  so.decode_chunk = 16;
  so.compile = [](ir::Module& m) -> absl::Status {
    passes::PassManagerOptions o;
    o.pipeline = passes::WithBucketLadder(passes::kDefaultPipeline, "16");
    auto pm = passes::PassManager::Create(o);
    if (!pm.ok()) return pm.status();
    return (*pm)->Run(m);
  };
  auto s = Session::Open(model, so);
  ASSERT_TRUE(s.ok()) << s.status();
  GenerationParams gp;
  gp.n_predict = static_cast<int64_t>(greedy->size());
  gp.stop_at_eog = false;
  auto st = (*s)->Generate(kPrompt, gp, [](int32_t, absl::string_view) { return true; });
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->tokens, *greedy);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Step35ExactTest, ::testing::Values("step35-tiny-f32", "step35-tiny-q8_0"),
                         memra::testing::FixtureParamName);

// Chunks of 5, 7 and 13 (the 16-key windows straddle chunk edges) give the one call's logits, and
// a decode step after a prefill gives the matching row of the longer prefill.
TEST(Step35ExecutorTest, ChunkingAndDecodeAreInvariant) {
  const std::string model = ModelPath("step35-tiny-f32");
  SKIP_UNLESS(model);
  auto l = Load(model);
  ASSERT_TRUE(l.ok()) << l.status();
  memra::testing::ExpectChunkingAndDecodeInvariant(*l, kPrompt, kVocab, 1e-5);
}

// Lowered with at most 8 rows per call, the three sliding layers keep rings of 16 + 8 - 1 = 23
// rows; chunked prefill that wraps them, then 16 decode steps, gives the full caches' logits bit
// for bit.
TEST(Step35ExecutorTest, SlidingWindowRingsEqualFullCaches) {
  const std::string model = ModelPath("step35-tiny-q8_0");
  SKIP_UNLESS(model);
  frontends::LowerOptions lo;
  lo.prefill_all_logits = true;
  auto full = memra::testing::LoadModel(model, lo);
  lo.max_call_rows = 8;
  auto ring = memra::testing::LoadModel(model, lo);
  ASSERT_TRUE(full.ok() && ring.ok()) << full.status() << ring.status();
  int rings = 0;
  for (const auto& st : ring->module->states()) {
    if (st->name().find("k_cache") == std::string::npos) continue;
    rings += st->shape().dims()[0].value() == 23;
  }
  EXPECT_EQ(rings, 3);
  auto want = full->PrefillChunked(kPrompt, 8);
  auto got = ring->PrefillChunked(kPrompt, 8);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
  EXPECT_EQ(*got, *want);
  int32_t next = kernels::cpu::Argmax(got->data() + got->size() - kVocab, kVocab);
  for (int step = 0; step < 16; ++step) {
    auto a = full->Decode(next);
    auto b = ring->Decode(next);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    ASSERT_EQ(*b, *a) << "decode step " << step;
    next = kernels::cpu::Argmax(a->data(), kVocab);
  }
}

// -ctk / -ctv f16 against llama.cpp's f16-KV flash-attention run (README §10.2: <= 5e-3).
TEST(Step35ExecutorTest, F16KvCacheMatchesLlamaCppF16Cache) {
  const std::string model = ModelPath("step35-tiny-f32");
  SKIP_UNLESS(model, RefPath("step35-tiny-f32", "kvf16_fa.logits_batch.f32"));
  auto ref = ReadF32File(RefPath("step35-tiny-f32", "kvf16_fa.logits_batch.f32"));
  ASSERT_TRUE(ref.ok());
  auto l = Load(model, true, WeightMode::kPerRow, {ir::DType::kF16, ir::DType::kF16});
  ASSERT_TRUE(l.ok()) << l.status();
  auto out = l->Prefill(kPrompt);
  ASSERT_TRUE(out.ok()) << out.status();
  const Diff d = Compare(*out, *ref);
  std::printf("  step35-tiny-f32 f16 KV vs llama.cpp f16-KV: max|d| %.3e rms rel %.3e argmax %d/48\n", d.max_abs,
              d.rms_rel, d.argmax_equal);
  EXPECT_LE(d.max_abs, 5e-3);
  EXPECT_EQ(d.argmax_equal, 48);
}

// Every layer's nodes against llama.cpp's dump (README §10.2: rms(d) / rms(ref) <= 1e-5), the
// router's chosen experts equal.
TEST(Step35ExecutorTest, NodesMatchLlamaCpp) {
  const std::string model = ModelPath("step35-tiny-f32");
  const std::string dir = SharedPath("fixtures/ref/step35-tiny-f32/");
  SKIP_UNLESS(model, dir + "nodes.json", dir + "nodes.bin");
  auto index = memra::testing::ReadJsonFile(dir + "nodes.json");
  auto bin = memra::testing::ReadFileBytes(dir + "nodes.bin");
  ASSERT_TRUE(index.ok() && bin.ok());
  auto l = Load(model);
  ASSERT_TRUE(l.ok()) << l.status();
  std::map<std::string, HostTensor> seen;
  l->exec->set_observer([&](const ir::Value& v, const HostTensor& t) { seen[v.name()] = t; });
  ASSERT_TRUE(l->Prefill(kPrompt).ok());
  int compared = 0, ids = 0;
  for (const auto& node : (*index)["nodes"].array()) {
    const std::string name = node["name"].string_value();
    if (name.find(' ') != std::string::npos || absl::StartsWith(name, "ffn_moe_probs")) continue;
    auto it = seen.find(name);
    ASSERT_NE(it, seen.end()) << "memra has no value named " << name;
    const HostTensor& t = it->second;
    const int64_t off = node["offset"].int_value(), n = node["nbytes"].int_value() / 4;
    ASSERT_EQ(t.numel(), n) << name;
    ASSERT_LE(off + n * 4, static_cast<int64_t>(bin->size())) << name;
    if (node["dtype"].string_value() == "i32") {
      ASSERT_EQ(t.dtype(), ir::DType::kI32) << name;
      const int32_t* ref = reinterpret_cast<const int32_t*>(bin->data() + off);
      EXPECT_EQ(std::vector<int32_t>(t.i32(), t.i32() + n), std::vector<int32_t>(ref, ref + n)) << name;
      ++ids;
      continue;
    }
    ASSERT_EQ(t.dtype(), ir::DType::kF32) << name;
    const float* ref = reinterpret_cast<const float*>(bin->data() + off);
    double ss = 0, sd = 0;
    for (int64_t i = 0; i < n; ++i) {
      ss += double(ref[i]) * ref[i];
      sd += (double(t.f32()[i]) - ref[i]) * (double(t.f32()[i]) - ref[i]);
    }
    const double rel = std::sqrt(sd / std::max(ss, 1e-30));
    if (rel > 1e-6) std::printf("  %-26s rms rel %.3e\n", name.c_str(), rel);
    EXPECT_LE(rel, 1e-5) << name;
    ++compared;
  }
  std::printf("  %d nodes compared, %d router id sets equal\n", compared, ids);
  EXPECT_EQ(ids, 4);        // ffn_moe_topk of the four MoE layers
  EXPECT_GE(compared, 50);  // 5 layers x 8 (+ 5 per MoE layer) + result_norm, result_output
}

}  // namespace
}  // namespace memra::runtime
