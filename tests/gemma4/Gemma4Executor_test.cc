// Gemma 4 dense on the CPU executor against the shared fixtures (shared/fixtures/README.md §9):
//   * gemma4-tiny-f32 vs llama.cpp's logits (prefill, 16-token chunks, the greedy decode's logits)
//     at §9.5's bounds for an exact-GELU engine;
//   * gemma4-tiny-f32, -q8_0, gemma4moe-tiny-q8_0 (routed GELU experts beside the dense MLP) and
//     gemma4e-tiny-q8_0 (per-layer inputs, per-layer FFN widths) vs the float64 exact-dequant reference: max |d| <=
//     1e-4 (f32 activations), argmax 48/48, per-row == dequant-at-load, and its 32 greedy tokens;
//   * chunked prefill (windows straddling chunk edges) equals one call, and decode after a prefill
//     equals the matching row of a longer prefill;
//   * a 16-bit KV cache against llama.cpp's f16-KV run;
//   * layer 0's named nodes vs llama.cpp's per-node dump (up to attn_out, before the first GELU);
//   * every fixture through runtime::Session and the default pipeline (fusions, buckets, memory
//     plan): the exact reference's 32 greedy tokens.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
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

using Loaded = memra::testing::LoadedModel;
absl::StatusOr<Loaded> Load(const std::string& path, bool all_logits = true, WeightMode mode = WeightMode::kPerRow,
                            frontends::KvCacheTypes cache_types = {}) {
  frontends::LowerOptions lo;
  lo.prefill_all_logits = all_logits;
  lo.cache_types = cache_types;
  return memra::testing::LoadModel(path, lo, mode);
}

#define SKIP_UNLESS(...)                     \
  for (const std::string& p : {__VA_ARGS__}) \
    if (!FileExists(p)) GTEST_SKIP() << p << " not found (../shared)";

TEST(Gemma4ExecutorTest, DenseF32MatchesLlamaCpp) {
  const std::string model = ModelPath("gemma4-tiny-f32");
  SKIP_UNLESS(model, RefPath("gemma4-tiny-f32", "logits_batch.f32"));
  auto l = Load(model);
  ASSERT_TRUE(l.ok()) << l.status();
  auto ref = ReadF32File(RefPath("gemma4-tiny-f32", "logits_batch.f32"));
  auto ref16 = ReadF32File(RefPath("gemma4-tiny-f32", "logits_chunk16.f32"));
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
    std::printf("  gemma4-tiny-f32 %s vs llama.cpp: max|d| %.3e rms rel %.3e max row nmse %.3e argmax %d/48\n", name,
                d.max_abs, d.rms_rel, d.max_row_nmse, d.argmax_equal);
    // README §9.5: llama.cpp's GELU is an fp16 table, memra's the exact tanh form.
    EXPECT_LE(d.max_abs, 2e-2) << name;
    EXPECT_LE(d.rms_rel, 2e-3) << name;
    EXPECT_LE(d.max_row_nmse, 1e-5) << name;
    EXPECT_EQ(d.argmax_equal, 48) << name;
  }
}

TEST(Gemma4ExecutorTest, GreedyDecodeMatchesLlamaCpp) {
  const std::string model = ModelPath("gemma4-tiny-f32");
  SKIP_UNLESS(model, RefPath("gemma4-tiny-f32", "greedy_tokens.i32"), RefPath("gemma4-tiny-f32", "greedy_logits.f32"));
  auto want = memra::testing::ReadI32File(RefPath("gemma4-tiny-f32", "greedy_tokens.i32"));
  auto want_logits = ReadF32File(RefPath("gemma4-tiny-f32", "greedy_logits.f32"));
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
  const size_t n = std::min(all.size(), want_logits->size());
  const Diff d = Compare(std::vector<float>(all.begin(), all.begin() + n),
                         std::vector<float>(want_logits->begin(), want_logits->begin() + n));
  std::printf("  gemma4-tiny-f32 greedy decode logits vs llama.cpp (%zu rows): max|d| %.3e rms rel %.3e\n", n / kVocab,
              d.max_abs, d.rms_rel);
  EXPECT_LE(d.max_abs, 2e-2);
  EXPECT_LE(d.rms_rel, 2e-3);
}

class Gemma4ExactTest : public ::testing::TestWithParam<const char*> {};

TEST_P(Gemma4ExactTest, MatchesExactDequantReference) {
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

  // The reference's 32 greedy tokens through @prefill + @decode.
  auto want = memra::testing::ReadGreedyTokens(RefPath(name, "exact_dequant.logits_batch.greedy.json"));
  ASSERT_TRUE(want.ok()) << want.status();
  auto l = Load(model, /*all_logits=*/false);
  ASSERT_TRUE(l.ok()) << l.status();
  auto got = l->Greedy(kPrompt, static_cast<int64_t>(want->size()));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *want);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Gemma4ExactTest,
                         ::testing::Values("gemma4-tiny-f32", "gemma4-tiny-q8_0", "gemma4moe-tiny-q8_0",
                                           "gemma4e-tiny-q8_0"),
                         memra::testing::FixtureParamName);

// Chunks of 5, 7 and 13 (the 16-key windows straddle chunk edges) give the one call's logits, and
// a decode step after a prefill gives the matching row of the longer prefill.
TEST(Gemma4ExecutorTest, ChunkingAndDecodeAreInvariant) {
  const std::string model = ModelPath("gemma4-tiny-f32");
  SKIP_UNLESS(model);
  auto l = Load(model);
  ASSERT_TRUE(l.ok()) << l.status();
  memra::testing::ExpectChunkingAndDecodeInvariant(*l, kPrompt, kVocab, 1e-5);
}

// Sliding-window rings (ir/Ops.def kv_append ring): lowered with at most 8 rows per call, every
// sliding layer keeps 16 + 8 - 1 = 23 rows instead of the context's 4096 (the shared layers read
// their owners' rings). Chunked prefill that wraps each ring twice, then 16 decode steps, gives
// the full-length caches' logits bit for bit; a call of 9 rows is refused by name.
TEST(Gemma4ExecutorTest, SlidingWindowRingsEqualFullCaches) {
  for (const std::string name : {"gemma4-tiny-f32", "gemma4moe-tiny-q8_0", "gemma4e-tiny-q8_0"}) {
    const std::string model = ModelPath(name);
    SKIP_UNLESS(model);
    frontends::LowerOptions lo;
    lo.prefill_all_logits = true;
    auto full = memra::testing::LoadModel(model, lo);
    lo.max_call_rows = 8;
    auto ring = memra::testing::LoadModel(model, lo);
    ASSERT_TRUE(full.ok() && ring.ok()) << full.status() << ring.status();
    EXPECT_EQ(ring->module->attrs().I64Or("max_call_rows", 0), 8);
    EXPECT_FALSE(full->module->attrs().Has("max_call_rows"));
    int rings = 0;
    for (const auto& st : ring->module->states()) {
      if (st->name().find("k_cache") == std::string::npos) continue;
      const int64_t rows = st->shape().dims()[0].value();
      EXPECT_TRUE(rows == 23 || rows == 4096) << name << " @" << st->name() << ": " << rows << " rows";
      rings += rows == 23;
    }
    EXPECT_GE(rings, 2) << name;
    auto want = full->PrefillChunked(kPrompt, 8);
    auto got = ring->PrefillChunked(kPrompt, 8);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    EXPECT_EQ(*got, *want) << name;
    int32_t next = kernels::cpu::Argmax(got->data() + got->size() - kVocab, kVocab);
    for (int step = 0; step < 16; ++step) {
      auto a = full->Decode(next);
      auto b = ring->Decode(next);
      ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
      ASSERT_EQ(*b, *a) << name << " decode step " << step;
      next = kernels::cpu::Argmax(a->data(), kVocab);
    }
    ring->exec->ResetState();
    auto too_long = ring->Prefill(absl::MakeConstSpan(kPrompt).subspan(0, 9));
    ASSERT_FALSE(too_long.ok()) << name;
    EXPECT_NE(too_long.status().message().find("at most 8 rows"), std::string::npos) << too_long.status();
  }
}

// -ctk / -ctv f16: against llama.cpp's run with an f16 cache (README §9.5: kvf16_fa, max |d| 5e-2).
TEST(Gemma4ExecutorTest, F16KvCacheMatchesLlamaCppF16Cache) {
  const std::string model = ModelPath("gemma4-tiny-f32");
  SKIP_UNLESS(model, RefPath("gemma4-tiny-f32", "kvf16_fa.logits_batch.f32"));
  auto ref = ReadF32File(RefPath("gemma4-tiny-f32", "kvf16_fa.logits_batch.f32"));
  ASSERT_TRUE(ref.ok());
  auto l = Load(model, true, WeightMode::kPerRow, {ir::DType::kF16, ir::DType::kF16});
  ASSERT_TRUE(l.ok()) << l.status();
  auto out = l->Prefill(kPrompt);
  ASSERT_TRUE(out.ok()) << out.status();
  const Diff d = Compare(*out, *ref);
  std::printf("  gemma4-tiny-f32 f16 KV vs llama.cpp f16-KV: max|d| %.3e rms rel %.3e argmax %d/48\n", d.max_abs,
              d.rms_rel, d.argmax_equal);
  // Measured 2.6e-2 / 2.5e-3: llama.cpp's flash attention also rounds Q and P to f16.
  EXPECT_LE(d.max_abs, 5e-2);
  EXPECT_LE(d.rms_rel, 5e-3);
  EXPECT_EQ(d.argmax_equal, 48);
}

// Layer 0 node by node against llama.cpp's dump, up to attn_out (before the first GELU, whose
// fp16 table in ggml-cpu memra does not copy): rms(d) / rms(ref) <= 1e-5 (README §9.5).
TEST(Gemma4ExecutorTest, LayerZeroNodesMatchLlamaCpp) {
  const std::string model = ModelPath("gemma4-tiny-f32");
  const std::string dir = SharedPath("fixtures/ref/gemma4-tiny-f32/");
  SKIP_UNLESS(model, dir + "nodes.json", dir + "nodes.bin");
  auto index = memra::testing::ReadJsonFile(dir + "nodes.json");
  auto bin = memra::testing::ReadFileBytes(dir + "nodes.bin");
  ASSERT_TRUE(index.ok() && bin.ok());
  auto l = Load(model);
  ASSERT_TRUE(l.ok()) << l.status();
  std::map<std::string, std::vector<float>> seen;
  l->exec->set_observer([&](const ir::Value& v, const HostTensor& t) {
    if (t.dtype() == ir::DType::kF32) seen[v.name()] = std::vector<float>(t.f32(), t.f32() + t.numel());
  });
  ASSERT_TRUE(l->Prefill(kPrompt).ok());
  int compared = 0;
  for (const auto& node : (*index)["nodes"].array()) {
    const std::string name = node["name"].string_value();
    const bool wanted = name == "inp_scaled" || name == "attn_norm-0" || name == "Qcur_pos-0" || name == "Kcur_pos-0" ||
                        name == "Vcur_normed-0" || name == "kqv_out-0" || name == "attn_post_norm-0" ||
                        name == "attn_out-0";
    if (!wanted) continue;
    auto it = seen.find(name);
    ASSERT_NE(it, seen.end()) << "memra has no value named " << name;
    const int64_t off = node["offset"].int_value(), n = node["nbytes"].int_value() / 4;
    ASSERT_EQ(static_cast<int64_t>(it->second.size()), n) << name;
    ASSERT_LE(off + n * 4, static_cast<int64_t>(bin->size())) << name;
    const float* ref = reinterpret_cast<const float*>(bin->data() + off);
    double ss = 0, sd = 0;
    for (int64_t i = 0; i < n; ++i) {
      ss += double(ref[i]) * ref[i];
      sd += (double(it->second[i]) - ref[i]) * (double(it->second[i]) - ref[i]);
    }
    const double rel = std::sqrt(sd / std::max(ss, 1e-30));
    std::printf("  %-16s rms rel %.3e\n", name.c_str(), rel);
    EXPECT_LE(rel, 1e-5) << name;
    ++compared;
  }
  EXPECT_EQ(compared, 8);
}

// memra run's path on the CPU: Session with the default pipeline (fusions, bucket functions, the
// memory plan) and the device-style greedy loop in chunks of 16.
TEST_P(Gemma4ExactTest, SessionGreedyThroughTheDefaultPipeline) {
  const std::string name = GetParam();
  const std::string model = ModelPath(name);
  SKIP_UNLESS(model, RefPath(name, "exact_dequant.logits_batch.greedy.json"));
  auto greedy = memra::testing::ReadGreedyTokens(RefPath(name, "exact_dequant.logits_batch.greedy.json"));
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  const std::vector<int32_t>& want = *greedy;
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
  gp.n_predict = static_cast<int64_t>(want.size());
  gp.stop_at_eog = false;
  auto st = (*s)->Generate(kPrompt, gp, [](int32_t, absl::string_view) { return true; });
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->tokens, want);
}

}  // namespace
}  // namespace memra::runtime
