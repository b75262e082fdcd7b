// The split math of tensor parallelism on the CPU (issue 21): each fixture lowered, partitioned
// by shard-tensor-parallel{tp=N}, compiled by the CPU pipeline and run as N ranks (one CPU
// executor a thread, runtime/ThreadCommunicator.h, each binding its slices of the weights) must
// give the unsplit module's logits within the reduction-order bound (a row-parallel product's
// partial sums added in another order), the same logits on every rank (bit for bit), and the
// same greedy continuation. A malformed partition (ranks that disagree) is an error on every
// rank, not a hang.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "kernels/cpu/Sampling.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/Executor.h"
#include "runtime/ThreadCommunicator.h"
#include "runtime/WeightShard.h"
#include "runtime/cpu/CpuExecutor.h"
#include "tests/TestUtil.h"
#include "tests/TinyPrompts.h"

namespace memra {
namespace {

struct RankRun {
  std::vector<float> prefill;             // the last row's logits
  std::vector<std::vector<float>> steps;  // each decode step's logits
  std::vector<int32_t> greedy;            // the picks
  absl::Status status;
};

absl::StatusOr<std::unique_ptr<ir::Module>> Compile(const gguf::GgufFile& file, int tp,
                                                    const std::string& experts = "auto") {
  auto m = frontends::LowerModel(file);
  if (!m.ok()) return m.status();
  passes::PassManagerOptions po;
  po.pipeline =
      absl::StrCat(tp > 1 ? absl::StrCat("shard-tensor-parallel{tp=", tp, " experts=", experts, "},") : std::string(),
                   passes::kDefaultPipeline);
  auto pm = passes::PassManager::Create(po);
  if (!pm.ok()) return pm.status();
  absl::Status s = (*pm)->Run(**m);
  if (!s.ok()) return s;
  return std::move(*m);
}

// Prefill `prompt`, then `steps` greedy decode steps, on one rank.
RankRun RunRank(const ir::Module& m, const gguf::GgufFile& file, runtime::Communicator* comm,
                const std::vector<int32_t>& prompt, int steps) {
  RankRun r;
  runtime::CpuExecutorOptions eo;
  eo.threads = 1;
  eo.communicator = comm;
  auto exec = runtime::CpuExecutor::Create(m, file, eo);
  if (!exec.ok()) {
    r.status = exec.status();
    return r;
  }
  const int64_t vocab = m.attrs().I64Or("n_vocab", 0);
  auto call = [&](absl::string_view fn, std::vector<int32_t> ids) -> absl::StatusOr<std::vector<float>> {
    std::vector<runtime::HostTensor> args;
    const int64_t n = static_cast<int64_t>(ids.size());
    args.push_back(runtime::HostTensor::FromI32(std::move(ids), {n}));
    auto out = (*exec)->Run(fn, std::move(args));
    if (!out.ok()) return out.status();
    const runtime::HostTensor& t = (*out)[0];
    return std::vector<float>(t.f32() + t.numel() - vocab, t.f32() + t.numel());
  };
  auto logits = call("prefill", prompt);
  if (!logits.ok()) {
    r.status = logits.status();
    return r;
  }
  r.prefill = *logits;
  int32_t next = kernels::cpu::Argmax(logits->data(), vocab);
  for (int i = 0; i < steps; ++i) {
    r.greedy.push_back(next);
    auto step = call("decode", {next});
    if (!step.ok()) {
      r.status = step.status();
      return r;
    }
    r.steps.push_back(*step);
    next = kernels::cpu::Argmax(step->data(), vocab);
  }
  return r;
}

// Every rank on its thread; a failing rank aborts the group so the others return too.
std::vector<RankRun> RunRanks(const ir::Module& m, const gguf::GgufFile& file, int tp,
                              const std::vector<int32_t>& prompt, int steps) {
  runtime::ThreadGroup group(tp);
  std::vector<RankRun> runs(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r)
    threads.emplace_back([&, r] {
      runs[r] = RunRank(m, file, group.rank(r), prompt, steps);
      if (!runs[r].status.ok()) group.Abort(std::string(runs[r].status.message()));
    });
  for (std::thread& t : threads) t.join();
  return runs;
}

// max |a - b| over max |b|.
double RelMaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
    s = std::max(s, std::fabs(static_cast<double>(b[i])));
  }
  return s > 0 ? d / s : d;
}

struct Case {
  std::string model;  // a file of tests/data/models, else of ../shared/fixtures/models
  int tp;
  std::string experts = "auto";  // shard-tensor-parallel's experts option
};

std::string ModelPath(const std::string& name) {
  const std::string local = testing::TestDataPath("models/" + name);
  if (FILE* f = std::fopen(local.c_str(), "rb")) {
    std::fclose(f);
    return local;
  }
  return testing::SharedPath("fixtures/models/" + name);
}

class TensorParallelCpu : public ::testing::TestWithParam<Case> {};

TEST_P(TensorParallelCpu, RanksMatchTheUnsplitModule) {
  const Case& c = GetParam();
  auto file = gguf::GgufFile::Open(ModelPath(c.model));
  ASSERT_TRUE(file.ok()) << file.status();
  auto whole = Compile(**file, 1);
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto split = Compile(**file, c.tp, c.experts);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ((*split)->attrs().I64Or("tp", 1), c.tp);
  // The partition cut something: some weight is sliced.
  int sharded = 0;
  for (const auto& w : (*split)->weights()) {
    auto s = runtime::ShardOf(*w);
    ASSERT_TRUE(s.ok()) << s.status();
    sharded += s->has_value();
  }
  EXPECT_GT(sharded, 0);

  const std::vector<int32_t> prompt = testing::ByteTokenPrompt("The quick brown fox jumps over the lazy dog.");
  constexpr int kSteps = 8;
  const RankRun ref = RunRank(**whole, **file, nullptr, prompt, kSteps);
  ASSERT_TRUE(ref.status.ok()) << ref.status;
  const std::vector<RankRun> ranks = RunRanks(**split, **file, c.tp, prompt, kSteps);
  for (int r = 0; r < c.tp; ++r) ASSERT_TRUE(ranks[r].status.ok()) << "rank " << r << ": " << ranks[r].status;

  // Every rank holds the same logits: the residual stream is whole after each all_reduce.
  for (int r = 1; r < c.tp; ++r) {
    EXPECT_EQ(ranks[r].prefill, ranks[0].prefill) << "rank " << r;
    EXPECT_EQ(ranks[r].steps, ranks[0].steps) << "rank " << r;
  }
  // The unsplit logits within the reduction-order bound (measured ~1e-6: f32 partial sums).
  constexpr double kBound = 2e-5;
  const double d0 = RelMaxDiff(ranks[0].prefill, ref.prefill);
  EXPECT_LE(d0, kBound) << "prefill";
  double worst = d0;
  for (int i = 0; i < kSteps; ++i) {
    const double d = RelMaxDiff(ranks[0].steps[i], ref.steps[i]);
    worst = std::max(worst, d);
    EXPECT_LE(d, kBound) << "decode step " << i;
  }
  EXPECT_EQ(ranks[0].greedy, ref.greedy);
  std::printf("%s tp=%d experts=%s: %d sharded weights, max |delta| / max |logit| = %.2e\n", c.model.c_str(), c.tp,
              c.experts.c_str(), sharded, worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TensorParallelCpu,
                         ::testing::Values(Case{"qwen35-tiny-f32.gguf", 2}, Case{"qwen35-tiny-q8_0.gguf", 2},
                                           Case{"qwen35-tiny-q8_0.gguf", 4}, Case{"qwen35moe-tiny-q8_0.gguf", 2},
                                           Case{"step35-tiny-q8_0.gguf", 2}, Case{"step35-tiny-q8_0.gguf", 4},
                                           Case{"gemma4-tiny-q8_0.gguf", 2}, Case{"gemma4moe-tiny-q8_0.gguf", 2},
                                           Case{"gemma4e-tiny-q8_0.gguf", 2},
                                           // Expert parallelism, forced where the cost rule cuts within.
                                           Case{"qwen35moe-tiny-q8_0.gguf", 2, "expert"},
                                           Case{"qwen35moe-tiny-q8_0.gguf", 4, "expert"},
                                           Case{"gemma4moe-tiny-q8_0.gguf", 2, "expert"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.model.substr(0, info.param.model.find(".gguf"));
                           std::replace(n.begin(), n.end(), '-', '_');
                           return absl::StrCat(n, "_tp", info.param.tp,
                                               info.param.experts == "auto" ? "" : "_" + info.param.experts);
                         });

// The executor every driver holds (CreateExecutor: the ranks behind one Executor): Run and
// RunSelected give rank 0's results, DecodeGreedy runs every rank's own greedy loop (the device
// loop on CUDA ranks) and gives the unsplit module's picks.
TEST(TensorParallelCpu, TheExecutorOfRanksDecodesAsOne) {
  auto file = gguf::GgufFile::Open(ModelPath("qwen35-tiny-q8_0.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  const std::vector<int32_t> prompt = testing::ByteTokenPrompt("Tensor parallel ranks decode as one model.");
  const int64_t T = static_cast<int64_t>(prompt.size());
  std::vector<std::vector<int32_t>> picks;
  std::vector<std::vector<float>> last_rows;
  for (int tp : {1, 2}) {
    auto m = Compile(**file, tp);
    ASSERT_TRUE(m.ok()) << m.status();
    runtime::ExecutorOptions eo;
    eo.cpu.threads = 2;
    auto exec = runtime::CreateExecutor(runtime::Backend::kCpu, **m, **file, eo);
    ASSERT_TRUE(exec.ok()) << exec.status();
    if (tp > 1) {
      EXPECT_NE((*exec)->Describe().find("2 tensor-parallel ranks"), std::string::npos) << (*exec)->Describe();
    }
    std::vector<runtime::HostTensor> args;
    args.push_back(runtime::HostTensor::FromI32(prompt, {T}));
    auto out = (*exec)->RunSelected("prefill", std::move(args), {true});
    ASSERT_TRUE(out.ok()) << out.status();
    const runtime::HostTensor& logits = (*out)[0];
    const int64_t vocab = (*m)->attrs().I64Or("n_vocab", 0);
    ASSERT_EQ(logits.numel() % vocab, 0);
    last_rows.emplace_back(logits.f32() + logits.numel() - vocab, logits.f32() + logits.numel());
    const int32_t first = kernels::cpu::Argmax(last_rows.back().data(), vocab);
    auto ids = (*exec)->DecodeGreedy(first, 10);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ((*exec)->position(), T + 10);
    picks.push_back(*ids);
  }
  EXPECT_LE(RelMaxDiff(last_rows[1], last_rows[0]), 2e-5);
  EXPECT_EQ(picks[1], picks[0]);
}

// A rank whose module was partitioned for another group size is refused at load, naming tp.
TEST(TensorParallelCpu, AModuleForTwoRanksNeedsAGroupOfTwo) {
  auto file = gguf::GgufFile::Open(ModelPath("qwen35-tiny-q8_0.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  auto split = Compile(**file, 2);
  ASSERT_TRUE(split.ok()) << split.status();
  auto alone = runtime::CpuExecutor::Create(**split, **file);
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().message().find("2 tensor-parallel ranks"), std::string::npos) << alone.status();
  runtime::ThreadGroup four(4);
  runtime::CpuExecutorOptions eo;
  eo.communicator = four.rank(0);
  auto wrong = runtime::CpuExecutor::Create(**split, **file, eo);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("one rank of 4"), std::string::npos) << wrong.status();
}

// A partitioned module whose tp attribute was edited away is refused at load: its sharded weights
// would otherwise bind rank 0's slices and run half a model.
TEST(TensorParallelCpu, ShardedWeightsOfAModuleOfOneRankAreRefused) {
  auto file = gguf::GgufFile::Open(ModelPath("qwen35-tiny-q8_0.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  auto split = Compile(**file, 2);
  ASSERT_TRUE(split.ok()) << split.status();
  (*split)->attrs().Set("tp", int64_t{1});
  auto exec = runtime::CpuExecutor::Create(**split, **file);
  ASSERT_FALSE(exec.ok());
  EXPECT_NE(exec.status().message().find("cut into 2 parts, which do not map onto 1 rank"), std::string::npos)
      << exec.status();
}

// A slice of a q8_0 tensor along its rows keeps whole blocks, and is the stored bytes of those
// columns; a cut inside a block is refused naming the tensor.
TEST(TensorParallelCpu, SlicesAreTheStoredBytes) {
  auto file = gguf::GgufFile::Open(ModelPath("qwen35-tiny-q8_0.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  const gguf::TensorInfo* t = (*file)->FindTensor("blk.0.ffn_down.weight");  // q8_0 [256, 512]
  ASSERT_NE(t, nullptr);
  runtime::WeightShard cols;
  cols.axis = 1;
  cols.segments = {512};
  cols.parts = 2;
  auto s1 = runtime::SliceTensor(*t, cols, 1, 2);
  ASSERT_TRUE(s1.ok()) << s1.status();
  EXPECT_EQ(s1->ne, (std::vector<int64_t>{256, 256}));
  const size_t row = 512 / 32 * 34, half = row / 2;  // q8_0: 34 bytes a 32-element block
  ASSERT_EQ(s1->bytes.size(), 256 * half);
  for (size_t r : {size_t{0}, size_t{255}})
    EXPECT_EQ(0, std::memcmp(s1->bytes.data() + r * half, t->data.data() + r * row + half, half)) << "row " << r;
  runtime::WeightShard bad = cols;
  bad.parts = 32;  // 16 columns: half a block
  bad.segments = {512};
  auto s2 = runtime::SliceTensor(*t, bad, 0, 32);
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.status().message().find("blk.0.ffn_down.weight"), std::string::npos) << s2.status();
}

// Ranks that call collectives of different sizes get an error each, not a hang.
TEST(TensorParallelCpu, MismatchedCollectivesFailOnEveryRank) {
  runtime::ThreadGroup group(2);
  std::vector<absl::Status> status(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> x(r == 0 ? 4 : 8, 1.0f);
      status[r] = group.rank(r)->AllReduceSum(x.data(), static_cast<int64_t>(x.size()));
    });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(status[r].ok()) << "rank " << r;
    EXPECT_NE(status[r].message().find("elements"), std::string::npos) << status[r];
  }
}

// The sum is formed in rank order by every rank, so each receives the same bits.
TEST(TensorParallelCpu, AllReduceAndAllGatherAreExact) {
  constexpr int kRanks = 3;
  runtime::ThreadGroup group(kRanks);
  std::vector<std::vector<float>> sums(kRanks), gathers(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> x = {1e8f * (r == 0), 1.0f, static_cast<float>(r)};
      sums[r] = x;
      ASSERT_TRUE(group.rank(r)->AllReduceSum(sums[r].data(), 3).ok());
      gathers[r].resize(3 * kRanks);
      ASSERT_TRUE(group.rank(r)->AllGather(x.data(), 3, gathers[r].data()).ok());
    });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    // (1e8 + 0) + 0 in f32, then 1 + 1 + 1, 0 + 1 + 2.
    EXPECT_EQ(sums[r], (std::vector<float>{1e8f, 3.0f, 3.0f})) << "rank " << r;
    EXPECT_EQ(gathers[r], (std::vector<float>{1e8f, 1, 0, 0, 1, 1, 0, 1, 2})) << "rank " << r;
  }
}

}  // namespace
}  // namespace memra
