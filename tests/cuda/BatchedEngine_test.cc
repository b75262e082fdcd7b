// The batched engine (runtime/BatchedSlots.h) on the GPU against the same engine on the CPU: the
// scheduler drives the CPU engine and every step runs on the GPU engine too (teacher-forced: the
// same tokens), so each sampled row's logits compare directly; then batch invariance on the GPU:
// a greedy request's tokens alone, among 8 at once and with staggered arrivals. The steps run the
// @step_tN buckets as CUDA graphs after their first call. Skips without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/Sampling.h"
#include "kernels/cuda/DecodeClass.h"
#include "runtime/BatchedSlots.h"
#include "runtime/Scheduler.h"
#include "runtime/cuda/CudaExecutor.h"
#include "tests/TinyPrompts.h"
#include "tests/cuda/CudaTestUtil.h"

namespace memra::runtime {
namespace {

using memra::testing::CudaTestDataPath;
using memra::testing::FileExists;

constexpr int64_t kCtx = 512;

std::vector<std::vector<int32_t>> Prompts() { return memra::testing::EightPrompts(); }

BatchedSlotsOptions Opts(Backend backend, int slots, int64_t snapshot_bytes = 0) {
  BatchedSlotsOptions o;
  o.snapshot_bytes = snapshot_bytes;
  o.slots = slots;
  o.n_ctx = kCtx;
  o.backend = backend;
  o.exec.cpu.threads = 4;
  o.exec.cuda.progress = false;
  o.exec.cuda.kernel_cache_dir = ::testing::TempDir() + "/memra-batched-cache";
  o.step_buckets = "1:2:4:8:16:32:64:128";  // the scheduler below takes at most 72 rows a step
  return o;
}

// Runs every batch on the driver (returned to the scheduler) and on the follower, comparing the
// sampled rows by normalized MSE and argmax.
class TeacherForced : public BatchBackend {
 public:
  TeacherForced(BatchBackend& driver, BatchBackend& follower) : d_(driver), f_(follower) {}
  int slots() const override { return d_.slots(); }
  int64_t ctx_per_slot() const override { return d_.ctx_per_slot(); }
  int64_t n_vocab() const override { return d_.n_vocab(); }
  int64_t device_sampler_penalties() const override { return f_.device_sampler_penalties(); }
  absl::Status ResetSlot(int slot) override {
    absl::Status s = f_.ResetSlot(slot);
    return s.ok() ? d_.ResetSlot(slot) : s;
  }
  // Prefix reuse on both: the same rows hold the same prefixes.
  int snapshot_rows() const override { return std::min(d_.snapshot_rows(), f_.snapshot_rows()); }
  int64_t snapshot_grid() const override { return d_.snapshot_grid(); }
  absl::Status SaveSnapshot(int slot, int row) override {
    absl::Status s = f_.SaveSnapshot(slot, row);
    return s.ok() ? d_.SaveSnapshot(slot, row) : s;
  }
  absl::StatusOr<int64_t> RestoreSnapshot(int row, int slot) override {
    auto a = f_.RestoreSnapshot(row, slot);
    if (!a.ok()) return a;
    auto b = d_.RestoreSnapshot(row, slot);
    if (b.ok()) EXPECT_EQ(*a, *b);
    return b;
  }
  absl::Status DropSnapshot(int row) override {
    absl::Status s = f_.DropSnapshot(row);
    return s.ok() ? d_.DropSnapshot(row) : s;
  }
  absl::StatusOr<std::vector<EntryOutput>> Execute(const StepBatch& batch) override {
    // The driver always returns logits; the follower as the scheduler asked (its picks made by
    // the device sampler) every other step, logits on the others.
    StepBatch with_logits = batch;
    for (StepEntry& e : with_logits.entries) e.device_pick = false;
    auto rf = f_.Execute(++calls_ % 2 == 0 ? with_logits : batch);
    if (!rf.ok()) return rf.status();
    auto rd = d_.Execute(with_logits);
    if (!rd.ok()) return rd.status();
    for (size_t i = 0; i < rd->size(); ++i) {
      const auto& ref = (*rd)[i].logits;
      if (ref.empty()) continue;
      if ((*rf)[i].token >= 0 || (*rf)[i].non_finite) {
        ++picks;
        const auto& rs = batch.entries[i].sampling;
        picks_agree +=
            (*rf)[i].token == kernels::cpu::SampleRow(ref.data(), static_cast<int64_t>(ref.size()), rs.params,
                                                      rs.penalty_ids.data(), rs.penalty_counts.data(),
                                                      static_cast<int64_t>(rs.penalty_ids.size()));
        continue;
      }
      const auto& got = (*rf)[i].logits;
      EXPECT_EQ(ref.size(), got.size());
      if (ref.size() != got.size()) continue;
      double num = 0, den = 0;
      for (size_t j = 0; j < ref.size(); ++j) {
        num += (double(got[j]) - ref[j]) * (double(got[j]) - ref[j]);
        den += double(ref[j]) * ref[j];
      }
      const double nmse = den > 0 ? num / den : num;
      worst = std::max(worst, nmse);
      sum += nmse;
      ++rows;
      const int64_t n = static_cast<int64_t>(ref.size());
      agree += kernels::cpu::Argmax(got.data(), n) == kernels::cpu::Argmax(ref.data(), n);
      decode_rows += batch.entries[i].kind == EntryKind::kDecode;
    }
    return rd;
  }
  double worst = 0, sum = 0;
  int64_t rows = 0, agree = 0, decode_rows = 0, picks = 0, picks_agree = 0;

 private:
  int64_t calls_ = 0;
  BatchBackend& d_;
  BatchBackend& f_;
};

// sampled: every request samples with llama.cpp's default chain and a repeat penalty, its seed
// taken from its prompt (so a prompt draws the same alone and among others).
std::vector<std::vector<int32_t>> Greedy(BatchBackend& backend, const std::vector<std::vector<int32_t>>& prompts,
                                         int64_t n, bool staggered, bool sampled = false) {
  SchedulerOptions so;
  so.step_tokens = 72;
  auto sched = Scheduler::Create(backend, so);
  EXPECT_TRUE(sched.ok()) << sched.status();
  if (!sched.ok()) return {};
  std::map<RequestId, std::vector<int32_t>> got;
  std::vector<RequestId> ids;
  for (const auto& p : prompts) {
    Request r;
    r.prompt = p;
    r.max_tokens = n;
    if (sampled) {
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = 40;
      r.sampling.top_p = 0.9f;
      r.sampling.min_p = 0.02f;
      r.sampling.repeat_penalty = 1.1f;
      r.seed = 7 + 131 * p.size() + static_cast<uint64_t>(p[0]);
    }
    auto id = (*sched)->Submit(std::move(r), [&](const TokenEvent& e) {
      if (e.token >= 0) got[e.id].push_back(e.token);
    });
    EXPECT_TRUE(id.ok()) << id.status();
    ids.push_back(id.ok() ? *id : -1);
    if (staggered)
      for (int k = 0; k < 2; ++k) EXPECT_TRUE((*sched)->Step().ok());
  }
  absl::Status st = (*sched)->RunToCompletion();
  EXPECT_TRUE(st.ok()) << st;
  std::vector<std::vector<int32_t>> out;
  for (RequestId id : ids) out.push_back(got[id]);
  return out;
}

class BatchedEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status st = CudaAvailable(); !st.ok()) GTEST_SKIP() << "no GPU: " << st.message();
  }

  // GPU vs CPU logits per sampled row (teacher-forced, 8 prompts staggered) within `mean_bound`
  // (mean row nmse) and `worst_bound`, argmax agreement at least `min_agree`.
  void CompareWithCpu(const std::string& model, double mean_bound, double worst_bound, double min_agree) {
    auto cpu = BatchedSlots::Open(model, Opts(Backend::kCpu, 8));
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    auto gpu = BatchedSlots::Open(model, Opts(Backend::kCuda, 8));
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    TeacherForced tf(**cpu, **gpu);
    Greedy(tf, Prompts(), 16, /*staggered=*/true);
    ASSERT_GT(tf.rows, 50);
    ASSERT_GT(tf.picks, 50);
    const double mean = tf.sum / tf.rows, agree = double(tf.agree) / tf.rows;
    const double picks = double(tf.picks_agree) / tf.picks;
    std::printf(
        "  %s: %ld logits rows (%ld decode): mean row nmse %.3e, worst %.3e, argmax agrees %.1f%%; %ld device "
        "picks, %.1f%% equal to the CPU's argmax\n",
        model.c_str(), long(tf.rows), long(tf.decode_rows), mean, tf.worst, 100 * agree, long(tf.picks), 100 * picks);
    EXPECT_LE(mean, mean_bound);
    EXPECT_LE(tf.worst, worst_bound);
    EXPECT_GE(agree, min_agree);
    EXPECT_GE(picks, min_agree);
    const GraphStats& g = (*gpu)->executor().cuda()->graph_stats();
    std::printf("  cuda graphs: %ld captured, %ld launches, %ld eager segment runs, %ld capture failures %s\n",
                long(g.captured), long(g.launches), long(g.eager_segments), long(g.capture_failures),
                g.last_capture_failure.c_str());
    EXPECT_GT(g.launches, 0) << "the step buckets should replay as CUDA graphs";
    EXPECT_EQ(g.capture_failures, 0) << g.last_capture_failure;
  }

  // The same tokens for every prompt alone, among 8 at once and staggered (greedy or sampled);
  // sampled requests must also leave the greedy path somewhere.
  void CheckBatchInvariance(bool sampled) {
    const std::string m = CudaTestDataPath("models/qwen35-tiny-f32.gguf");
    if (!FileExists(m)) GTEST_SKIP() << "fixture not found: " << m;
    auto gpu = BatchedSlots::Open(m, Opts(Backend::kCuda, 8));
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    const auto prompts = Prompts();
    std::vector<std::vector<int32_t>> alone;
    for (const auto& p : prompts) alone.push_back(Greedy(**gpu, {p}, 24, false, sampled)[0]);
    const auto together = Greedy(**gpu, prompts, 24, false, sampled);
    const auto staggered = Greedy(**gpu, prompts, 24, true, sampled);
    const auto greedy = sampled ? Greedy(**gpu, prompts, 24, false) : together;
    int same_together = 0, same_staggered = 0, off_greedy = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(alone[i].size(), 24u);
      same_together += together[i] == alone[i];
      same_staggered += staggered[i] == alone[i];
      off_greedy += together[i] != greedy[i];
      EXPECT_EQ(together[i], alone[i]) << "prompt " << i << ": among 8 vs alone";
      EXPECT_EQ(staggered[i], alone[i]) << "prompt " << i << ": staggered vs alone";
    }
    std::printf("  %s tokens equal to alone: %d/8 among 8, %d/8 staggered%s\n", sampled ? "sampled" : "greedy",
                same_together, same_staggered,
                sampled ? absl::StrCat("; ", off_greedy, "/8 differ from greedy").c_str() : "");
    if (sampled) EXPECT_GT(off_greedy, 0) << "the sampled requests should not all decode greedily";
  }
};

// Conversations through the prefix cache (docs/design/prefix-reuse.md): second turns and requests
// sharing a system prompt resume from snapshots. Teacher-forced against the CPU engine resuming
// from its own snapshots (which equal a run from scratch bit for bit, PrefixReuse_test): the GPU's
// stash copies, shared KV blocks and restored positions give the same logits as the CPU; and on
// the GPU alone, the greedy tokens with reuse equal those without.
std::vector<std::vector<int32_t>> Conversations(BatchBackend& backend, SchedulerStats* stats) {
  SchedulerOptions so;
  so.step_tokens = 72;
  auto sched = Scheduler::Create(backend, so);
  EXPECT_TRUE(sched.ok()) << sched.status();
  if (!sched.ok()) return {};
  std::vector<std::vector<int32_t>> outs;
  auto run = [&](const std::vector<int32_t>& prompt, int64_t n) {
    Request r;
    r.prompt = prompt;
    r.max_tokens = n;
    std::vector<int32_t> got;
    EXPECT_TRUE((*sched)
                    ->Submit(std::move(r),
                             [&](const TokenEvent& e) {
                               if (e.token >= 0) got.push_back(e.token);
                             })
                    .ok());
    EXPECT_TRUE((*sched)->RunToCompletion().ok());
    outs.push_back(got);
    return got;
  };
  const std::string fox = "The quick brown fox jumps over the lazy dog. ";
  for (const std::string& topic : {fox + fox + fox + "Tell me more.", "Once upon a time, " + fox + fox}) {
    std::vector<int32_t> turn = memra::testing::ByteTokenPrompt(topic);
    for (int k = 0; k < 3; ++k) {  // three turns: prompt, reply, a new message
      const std::vector<int32_t> reply = run(turn, 50);
      turn.insert(turn.end(), reply.begin(), reply.end());
      for (int32_t id : memra::testing::ByteTokenPrompt(" And then?")) turn.push_back(id);
    }
  }
  for (const char* q : {"What is a fox, and why is it so quick, tell me?", "Who is lazy?", "Count the dogs."})
    run(memra::testing::ByteTokenPrompt(fox + fox + fox + "You answer briefly. " + q), 12);
  *stats = (*sched)->stats();
  return outs;
}

TEST_F(BatchedEngineTest, PrefixReuseMatchesCpuAndNoReuse) {
  const std::string m = CudaTestDataPath("models/qwen35-tiny-f32.gguf");
  if (!FileExists(m)) GTEST_SKIP() << "fixture not found: " << m;
  const int64_t budget = int64_t{64} << 20;  // every row the 4-slot engines take (4 per slot)
  auto cpu = BatchedSlots::Open(m, Opts(Backend::kCpu, 4, budget));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto gpu = BatchedSlots::Open(m, Opts(Backend::kCuda, 4, budget));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_EQ((*gpu)->snapshot_rows(), 16);
  TeacherForced tf(**cpu, **gpu);
  SchedulerStats st;
  Conversations(tf, &st);
  std::printf(
      "  teacher-forced with reuse: %ld hits of %ld lookups, %ld tokens reused, %ld snapshots; %ld logits "
      "rows: mean nmse %.3e, worst %.3e, argmax agrees %ld/%ld\n",
      long(st.prefix_hits), long(st.prefix_lookups), long(st.prefix_tokens_reused), long(st.prefix_snapshots),
      long(tf.rows), tf.sum / std::max<int64_t>(tf.rows, 1), tf.worst, long(tf.agree), long(tf.rows));
  EXPECT_GE(st.prefix_hits, 5);
  EXPECT_EQ(st.prefix_errors, 0);
  ASSERT_GT(tf.rows, 20);
  EXPECT_LE(tf.sum / tf.rows, 1e-9);
  EXPECT_LE(tf.worst, 1e-8);
  EXPECT_EQ(tf.agree, tf.rows);

  auto plain = BatchedSlots::Open(m, Opts(Backend::kCuda, 4));
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto cached = BatchedSlots::Open(m, Opts(Backend::kCuda, 4, budget));
  ASSERT_TRUE(cached.ok()) << cached.status();
  SchedulerStats s0, s1;
  const auto want = Conversations(**plain, &s0);
  const auto got = Conversations(**cached, &s1);
  EXPECT_EQ(s0.prefix_lookups, 0);
  EXPECT_GE(s1.prefix_hits, 5);
  int same = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    same += got[i] == want[i];
    EXPECT_EQ(got[i], want[i]) << "request " << i << " with reuse vs without";
  }
  std::printf("  GPU greedy tokens with reuse equal to without: %d/%zu requests\n", same, want.size());
}

// The f32 model: f32 GEMMs (cuBLASLt without TF32, the GEMVs) against the CPU's f32.
TEST_F(BatchedEngineTest, TinyF32MatchesCpu) {
  const std::string m = CudaTestDataPath("models/qwen35-tiny-f32.gguf");
  if (!FileExists(m)) GTEST_SKIP() << "fixture not found: " << m;
  CompareWithCpu(m, 1e-9, 1e-8, 1.0);
}

// The MoE q8_0 model: blocks on the GPU (int8 activations at T <= 8, bf16 above) against the
// CPU's exact products: expert flips make single rows far apart (the fixtures' README §7), so
// the mean is bounded and the argmax agreement reported.
TEST_F(BatchedEngineTest, TinyMoeQ8MatchesCpu) {
  const std::string m = CudaTestDataPath("models/qwen35moe-tiny-q8_0.gguf");
  if (!FileExists(m)) GTEST_SKIP() << "fixture not found: " << m;
  CompareWithCpu(m, 3e-2, 0.5, 0.85);
}

// Batch invariance on the GPU: the same greedy tokens for a request alone, among 8 at once and
// with staggered arrivals (the rows of a step never change another row's numbers beyond the
// kernel classes of the bucket, which the f32 model's margins absorb).
TEST_F(BatchedEngineTest, GreedyIsBatchInvariant) { CheckBatchInvariance(/*sampled=*/false); }

// The same for sampled requests: the device sampler's picks depend only on the row, its
// parameters and the request's draw, so a sampled request alone and among 8 gives the same tokens.
TEST_F(BatchedEngineTest, SampledIsBatchInvariant) { CheckBatchInvariance(/*sampled=*/true); }

// Returns logits for every sampled entry (no device picks) and keeps them per request, in order.
class LogitsRecorder : public BatchBackend {
 public:
  explicit LogitsRecorder(BatchBackend& inner) : inner_(inner) {}
  int slots() const override { return inner_.slots(); }
  int64_t ctx_per_slot() const override { return inner_.ctx_per_slot(); }
  int64_t n_vocab() const override { return inner_.n_vocab(); }
  StepRules step_rules() const override { return inner_.step_rules(); }
  absl::Status ResetSlot(int slot) override { return inner_.ResetSlot(slot); }
  absl::StatusOr<std::vector<EntryOutput>> Execute(const StepBatch& batch) override {
    auto out = inner_.Execute(batch);
    if (!out.ok()) return out;
    for (size_t i = 0; i < batch.entries.size(); ++i)
      if (batch.entries[i].sampled()) logits[batch.entries[i].request].push_back((*out)[i].logits);
    return out;
  }
  std::map<RequestId, std::vector<std::vector<float>>> logits;

 private:
  BatchBackend& inner_;
};

// Per prompt (in order), the logits rows of its greedy tokens through `backend`.
std::vector<std::vector<std::vector<float>>> GreedyLogits(BatchBackend& backend,
                                                          const std::vector<std::vector<int32_t>>& prompts, int64_t n,
                                                          bool staggered) {
  LogitsRecorder rec(backend);
  SchedulerOptions so;
  so.step_tokens = 72;
  auto sched = Scheduler::Create(rec, so);
  EXPECT_TRUE(sched.ok()) << sched.status();
  if (!sched.ok()) return {};
  std::vector<RequestId> ids;
  for (const auto& p : prompts) {
    Request r;
    r.prompt = p;
    r.max_tokens = n;
    auto id = (*sched)->Submit(std::move(r), [](const TokenEvent&) {});
    EXPECT_TRUE(id.ok()) << id.status();
    ids.push_back(id.ok() ? *id : -1);
    if (staggered) EXPECT_TRUE((*sched)->Step().ok());
  }
  absl::Status st = (*sched)->RunToCompletion();
  EXPECT_TRUE(st.ok()) << st;
  std::vector<std::vector<std::vector<float>>> out;
  for (RequestId id : ids) out.push_back(rec.logits[id]);
  return out;
}

// The exact decode class (kernels/cuda/DecodeClass.h): every logits row of a greedy request is
// bit-identical alone, among 8 at once and staggered, on f32 weights (pinned cuBLASLt at every T),
// q8_0 blocks (the block GEMVs for decode rows, dequantized bf16 products for prompt rows) and the
// MoE path. The bucket class beside it is reported, not bound (its rows may differ in the last bits).
// The exact class needs a step bucket for a full decode step within 8 rows and one past 8 for
// prompt steps: ladders without them are refused at load, naming both needs and the ladder's ends;
// the bucket class takes them.
TEST_F(BatchedEngineTest, ExactClassRefusesLaddersWithoutItsBuckets) {
  const std::string m = CudaTestDataPath("models/qwen35-tiny-q8_0.gguf");
  if (!FileExists(m)) GTEST_SKIP() << "fixture not found: " << m;
  for (const char* ladder : {"1:2:4:16:32", "1:2:4:8"}) {
    BatchedSlotsOptions o = Opts(Backend::kCuda, 8);
    o.warm_buckets = false;
    o.decode_class = kernels::cuda::DecodeClass::kExact;
    o.step_buckets = ladder;
    auto bs = BatchedSlots::Open(m, o);
    ASSERT_FALSE(bs.ok()) << ladder;
    EXPECT_TRUE(absl::StrContains(bs.status().message(), "decode class exact needs a step bucket of 8 to 8 rows"))
        << ladder << ": " << bs.status();
    o.decode_class = kernels::cuda::DecodeClass::kBucket;
    EXPECT_TRUE(BatchedSlots::Open(m, o).ok()) << ladder;
  }
}

// One fixture a case (a case is one pair of the sanitizer suite, which has a time limit a pair).
class ExactClassTest : public BatchedEngineTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(ExactClassTest, IsBitInvariant) {
  auto prompts = Prompts();
  prompts.push_back(memra::testing::ByteTokenPrompt("Hi"));  // 3 tokens: a prompt step padded past 8 rows
  prompts.push_back(memra::testing::ByteTokenPrompt("Why not?"));
  {
    const char* name = GetParam();
    const std::string m = CudaTestDataPath(absl::StrCat("models/", name, ".gguf"));
    if (!FileExists(m)) GTEST_SKIP() << "fixture not found: " << m;
    for (auto cls : {kernels::cuda::DecodeClass::kExact, kernels::cuda::DecodeClass::kBucket}) {
      const bool exact = cls == kernels::cuda::DecodeClass::kExact;
      BatchedSlotsOptions o = Opts(Backend::kCuda, 8);
      o.decode_class = cls;
      auto gpu = BatchedSlots::Open(m, o);
      ASSERT_TRUE(gpu.ok()) << name << ": " << gpu.status();
      std::vector<std::vector<std::vector<float>>> alone;
      for (const auto& p : prompts) alone.push_back(GreedyLogits(**gpu, {p}, 12, false)[0]);
      const auto together = GreedyLogits(**gpu, prompts, 12, false);
      const auto staggered = GreedyLogits(**gpu, prompts, 12, true);
      int64_t rows = 0, equal = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        ASSERT_EQ(alone[i].size(), 12u) << name << " prompt " << i;
        for (const auto* other : {&together, &staggered}) {
          ASSERT_EQ((*other)[i].size(), 12u) << name << " prompt " << i;
          for (size_t k = 0; k < 12; ++k) {
            const auto& a = alone[i][k];
            const auto& b = (*other)[i][k];
            const bool same = a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
            ++rows;
            equal += same;
            if (exact) EXPECT_TRUE(same) << name << " prompt " << i << " token " << k << " differs from alone";
          }
        }
      }
      std::printf("  %s, decode class %s: %ld of %ld logits rows bit-identical to the request alone\n", name,
                  exact ? "exact" : "bucket", long(equal), long(rows));
    }
  }
}
INSTANTIATE_TEST_SUITE_P(TinyModels, ExactClassTest,
                         ::testing::Values("qwen35-tiny-f32", "qwen35-tiny-q8_0", "qwen35moe-tiny-q8_0"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-' || c == '.') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace memra::runtime
