// End to end on the GPU: the lowered qwen35-tiny-f32 model on the CUDA executor against the CPU
// executor (every named node, the logits) and against llama.cpp's fixtures (prompt logits, the
// 32-token greedy continuation, which must be identical); chunked prefill across buckets; the
// q8_0 model (weights as blocks, and as bf16 copies) against the CPU, with the device memory by
// kind. Skips without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "kernels/cpu/Sampling.h"
#include "runtime/DeviceMemory.h"
#include "runtime/cpu/CpuExecutor.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaExecutor.h"
#include "tests/JsonLite.h"
#include "tests/cuda/CudaTestUtil.h"

namespace memra::runtime {
namespace {

using memra::testing::CudaTestDataPath;
using memra::testing::FileExists;
using memra::testing::Json;

const std::vector<int32_t> kPrompt = {1,   87,  107, 104, 35,  116, 120, 108, 102, 110, 35,  101, 117, 114, 122, 113,
                                      35,  105, 114, 123, 35,  109, 120, 112, 115, 118, 35,  114, 121, 104, 117, 35,
                                      119, 107, 104, 35,  111, 100, 125, 124, 35,  103, 114, 106, 49,  35,  52,  53};
constexpr int64_t kVocab = 259;

struct Stats {
  double max_abs = 0, nmse = 0;
};
Stats Compare(const float* got, const float* ref, int64_t n) {
  Stats s;
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = double(got[i]) - ref[i];
    s.max_abs = std::max(s.max_abs, std::fabs(e));
    num += e * e;
    den += double(ref[i]) * ref[i];
  }
  s.nmse = den > 0 ? num / den : num;
  return s;
}

// Rows of [rows, kVocab] logits whose argmax (the host sampler's rule) agrees.
int ArgmaxAgreement(const float* got, const float* ref, int64_t rows) {
  int agree = 0;
  for (int64_t t = 0; t < rows; ++t)
    agree += kernels::cpu::Argmax(got + t * kVocab, kVocab) == kernels::cpu::Argmax(ref + t * kVocab, kVocab);
  return agree;
}

std::vector<float> Floats(const HostTensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

class CudaExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = cuda::CudaDevice::Open(0);
    if (!dev.ok()) GTEST_SKIP() << "no GPU: " << dev.status().message();
  }
  struct Model {
    std::unique_ptr<gguf::GgufFile> file;
    std::unique_ptr<ir::Module> module;
    std::unique_ptr<CpuExecutor> cpu;
    std::unique_ptr<CudaExecutor> gpu;
  };
  static absl::StatusOr<Model> Load(const std::string& path,
                                    kernels::cuda::WeightMode weights = kernels::cuda::WeightMode::kBlocks,
                                    frontends::KvCacheTypes cache_types = {},
                                    int64_t max_call_rows = frontends::LowerOptions::kMaxCallRows) {
    Model m;
    auto f = gguf::GgufFile::Open(path);
    if (!f.ok()) return f.status();
    m.file = std::move(*f);
    frontends::LowerOptions lo;
    lo.prefill_all_logits = true;
    lo.cache_types = cache_types;
    lo.max_call_rows = max_call_rows;
    auto mod = frontends::LowerModel(*m.file, lo);
    if (!mod.ok()) return mod.status();
    m.module = std::move(*mod);
    auto c = CpuExecutor::Create(*m.module, *m.file);
    if (!c.ok()) return c.status();
    m.cpu = std::move(*c);
    CudaExecutorOptions o;
    o.poison_arena = true;
    o.weights = weights;
    auto g = CudaExecutor::Create(*m.module, *m.file, o);
    if (!g.ok()) return g.status();
    m.gpu = std::move(*g);
    return m;
  }
  static std::vector<HostTensor> Ids(const std::vector<int32_t>& ids) {
    std::vector<HostTensor> a;
    a.push_back(HostTensor::FromI32(ids, {static_cast<int64_t>(ids.size())}));
    return a;
  }
  // Decode steps fed the given tokens on both executors (teacher forcing, so a near tie cannot make
  // them diverge): the rows' nmse (GPU vs CPU), how often the argmaxes agree, and how often the
  // GPU's argmax is the next forced token.
  struct ForcedDecodeStats {
    double mean = 0, worst = 0;
    int step_agree = 0, ref_agree = 0;
  };
  static absl::StatusOr<ForcedDecodeStats> ForcedDecode(Model& m, const std::vector<int32_t>& forced) {
    ForcedDecodeStats d;
    for (size_t i = 0; i < forced.size(); ++i) {
      auto gs = m.gpu->Run("decode", Ids({forced[i]}));
      if (!gs.ok()) return gs.status();
      auto cs = m.cpu->Run("decode", Ids({forced[i]}));
      if (!cs.ok()) return cs.status();
      const double e = Compare((*gs)[0].f32(), (*cs)[0].f32(), kVocab).nmse;
      d.worst = std::max(d.worst, e);
      d.mean += e / static_cast<double>(forced.size());
      const int32_t gn = kernels::cpu::Argmax((*gs)[0].f32(), kVocab);
      d.step_agree += gn == kernels::cpu::Argmax((*cs)[0].f32(), kVocab);
      d.ref_agree += i + 1 < forced.size() && gn == forced[i + 1];
    }
    return d;
  }
};

TEST_F(CudaExecutorTest, TinyF32MatchesCpuAndLlamaCpp) {
  const std::string model = CudaTestDataPath("models/qwen35-tiny-f32.gguf");
  const std::string ref_dir = CudaTestDataPath("ref/qwen35-tiny-f32/");
  if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
  auto m = Load(model);
  ASSERT_TRUE(m.ok()) << m.status();
  std::printf("  %s\n", m->gpu->DeviceDescription().c_str());

  // Every named node of the prompt: GPU vs CPU.
  std::map<std::string, std::vector<float>> cpu_nodes;
  m->cpu->set_observer([&](const ir::Value& v, const HostTensor& t) {
    if (t.dtype() == ir::DType::kF32) cpu_nodes[v.name()] = Floats(t);
  });
  double worst = 0;
  std::string worst_node;
  int compared = 0;
  m->gpu->set_observer([&](const ir::Value& v, const HostTensor& t) {
    auto it = cpu_nodes.find(v.name());
    if (t.dtype() != ir::DType::kF32 || it == cpu_nodes.end()) return;
    ASSERT_EQ(it->second.size(), static_cast<size_t>(t.numel())) << v.name();
    const Stats s = Compare(t.f32(), it->second.data(), t.numel());
    ++compared;
    if (s.nmse > worst) {
      worst = s.nmse;
      worst_node = v.name();
    }
  });
  auto c = m->cpu->Run("prefill", Ids(kPrompt));
  ASSERT_TRUE(c.ok()) << c.status();
  auto g = m->gpu->Run("prefill", Ids(kPrompt));
  ASSERT_TRUE(g.ok()) << g.status();
  m->gpu->set_observer(nullptr);
  m->cpu->set_observer(nullptr);
  std::printf("  %d nodes compared with the CPU executor; worst nmse %.3e at %s\n", compared, worst,
              worst_node.c_str());
  EXPECT_GT(compared, 60);
  EXPECT_LE(worst, 1e-9) << worst_node;
  const std::vector<float> logits = Floats((*g)[0]);
  const Stats vs_cpu = Compare(logits.data(), (*c)[0].f32(), logits.size());
  std::printf("  prefill logits vs CPU: max|d| %.3e nmse %.3e\n", vs_cpu.max_abs, vs_cpu.nmse);
  EXPECT_LE(vs_cpu.max_abs, 1e-4);
  for (const char* s : {"blk.0.delta_state", "blk.0.conv_state", "blk.3.k_cache"}) {
    auto gs = m->gpu->ReadState(s);
    ASSERT_TRUE(gs.ok()) << gs.status();
    const Stats st = Compare(gs->f32(), m->cpu->state(s)->f32(), gs->numel());
    EXPECT_LE(st.nmse, 1e-9) << s;
  }

  auto ref = memra::testing::ReadF32File(ref_dir + "logits_batch.f32");
  if (ref.ok()) {
    ASSERT_EQ(ref->size(), logits.size());
    const Stats vs_ref = Compare(logits.data(), ref->data(), logits.size());
    std::printf("  prefill logits vs llama.cpp: max|d| %.3e nmse %.3e\n", vs_ref.max_abs, vs_ref.nmse);
    EXPECT_LE(vs_ref.max_abs, 1e-4);
    for (int64_t t = 0; t < 48; ++t)
      EXPECT_EQ(kernels::cpu::Argmax(&logits[t * kVocab], kVocab), kernels::cpu::Argmax(&(*ref)[t * kVocab], kVocab))
          << t;
  }
  // Greedy continuation through @decode: identical to llama.cpp's.
  auto ref_greedy = memra::testing::ReadI32File(ref_dir + "greedy_tokens.i32");
  ASSERT_TRUE(ref_greedy.ok()) << ref_greedy.status();
  std::vector<int32_t> greedy;
  int32_t next = kernels::cpu::Argmax(&logits[47 * kVocab], kVocab);
  double decode_vs_cpu = 0;
  for (size_t i = 0; i < ref_greedy->size(); ++i) {
    greedy.push_back(next);
    auto gs = m->gpu->Run("decode", Ids({next}));
    ASSERT_TRUE(gs.ok()) << gs.status();
    auto cs = m->cpu->Run("decode", Ids({next}));
    ASSERT_TRUE(cs.ok()) << cs.status();
    decode_vs_cpu = std::max(decode_vs_cpu, Compare((*gs)[0].f32(), (*cs)[0].f32(), kVocab).max_abs);
    next = kernels::cpu::Argmax((*gs)[0].f32(), kVocab);
  }
  std::printf("  greedy: %zu tokens, decode logits vs CPU max|d| %.3e\n", greedy.size(), decode_vs_cpu);
  EXPECT_EQ(greedy, *ref_greedy);
  EXPECT_LE(decode_vs_cpu, 1e-4);
  EXPECT_EQ(m->gpu->position(), 80);
  std::printf("  %s\n", m->gpu->compile_stats().ToString().c_str());
}

TEST_F(CudaExecutorTest, ChunkedPrefillAcrossBucketsMatchesOneCall) {
  const std::string model = CudaTestDataPath("models/qwen35-tiny-f32.gguf");
  if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
  auto m = Load(model);
  ASSERT_TRUE(m.ok()) << m.status();
  auto whole = m->gpu->Run("prefill", Ids(kPrompt));
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(m->gpu->ResetState().ok());
  std::vector<float> chunked;
  for (size_t s = 0; s < kPrompt.size();) {
    const size_t n = std::min<size_t>(s == 0 ? 1 : 20, kPrompt.size() - s);  // buckets 1, 16/32
    auto part = m->gpu->Run("prefill", Ids(std::vector<int32_t>(kPrompt.begin() + s, kPrompt.begin() + s + n)));
    ASSERT_TRUE(part.ok()) << part.status();
    const auto f = Floats((*part)[0]);
    chunked.insert(chunked.end(), f.begin(), f.end());
    s += n;
  }
  const Stats d = Compare(chunked.data(), (*whole)[0].f32(), chunked.size());
  std::printf("  chunked (1 + 20 + 20 + 7) vs one call: max|d| %.3e\n", d.max_abs);
  EXPECT_LE(d.max_abs, 1e-5);
  for (const auto& [k, bytes] : m->gpu->arena_bytes())
    std::printf("  arena %s: %lu bytes\n", k.c_str(), (unsigned long)bytes);
}

// The q8_0 model with its weights as blocks (the default: dequantized per product into the
// workspace, the embedding rows exact) and as bf16 copies (--weights bf16), against the CPU; the
// device holds exactly the GGUF's tensor bytes as blocks.
TEST_F(CudaExecutorTest, TinyQ8MatchesCpu) {
  const std::string model = CudaTestDataPath("models/qwen35-tiny-q8_0.gguf");
  if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
  for (kernels::cuda::WeightMode w : {kernels::cuda::WeightMode::kBlocks, kernels::cuda::WeightMode::kBf16}) {
    auto m = Load(model, w);
    ASSERT_TRUE(m.ok()) << m.status();
    auto c = m->cpu->Run("prefill", Ids(kPrompt));
    auto g = m->gpu->Run("prefill", Ids(kPrompt));
    ASSERT_TRUE(c.ok() && g.ok()) << c.status() << g.status();
    const Stats s = Compare((*g)[0].f32(), (*c)[0].f32(), (*c)[0].numel());
    const int agree = ArgmaxAgreement((*g)[0].f32(), (*c)[0].f32(), 48);
    uint64_t tensor_bytes = 0;
    for (const auto& wt : m->module->weights()) tensor_bytes += m->file->FindTensor(wt->name())->data.size();
    const DeviceMemoryBytes mem = m->gpu->device_memory();
    std::printf("  q8_0 (weights as %s) vs CPU: max|d| %.3e nmse %.3e, argmax agrees at %d/48; device memory: %s\n",
                std::string(kernels::cuda::WeightModeName(w)).c_str(), s.max_abs, s.nmse, agree,
                DescribeDeviceMemory(mem).c_str());
    EXPECT_LE(s.nmse, 1e-3);
    EXPECT_GE(agree, 44);
    if (w == kernels::cuda::WeightMode::kBlocks) {
      EXPECT_EQ(mem.weights, tensor_bytes);  // blocks as stored, the norms' f32 as stored
      EXPECT_GT(mem.workspace, 0u);          // the largest matrix's bf16 copy (+ cuBLASLt's)
    } else {
      EXPECT_GT(mem.weights, tensor_bytes * 3 / 2);  // ~2 bytes per weight
    }
    EXPECT_GT(mem.kv_cache, 0u);
    EXPECT_GT(mem.recurrent, 0u);
    EXPECT_GT(mem.arenas, 0u);
  }
}

// memra bench --profile-skip (CudaExecutorOptions::skip_ops): an op is left out by a weight it
// reads, named whole or past its blk.N. prefix; every name that matched is recorded, one that
// matched nothing is not (the bench refuses it).
TEST_F(CudaExecutorTest, SkipOpsMatchWeightNames) {
  const std::string model = CudaTestDataPath("models/qwen35-tiny-f32.gguf");
  if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
  auto f = gguf::GgufFile::Open(model);
  ASSERT_TRUE(f.ok()) << f.status();
  auto mod = frontends::LowerModel(**f, frontends::LowerOptions{});
  ASSERT_TRUE(mod.ok()) << mod.status();
  CudaExecutorOptions o;
  o.skip_ops = {"ffn_down.weight", "blk.1.attn_norm.weight", "blk.99.ffn_down.weight"};
  auto g = CudaExecutor::Create(**mod, **f, o);
  ASSERT_TRUE(g.ok()) << g.status();
  auto r = (*g)->Run("prefill", Ids(kPrompt));
  ASSERT_TRUE(r.ok()) << r.status();
  const GraphStats& s = (*g)->graph_stats();
  EXPECT_GT(s.skipped_actions, 0);
  EXPECT_EQ(s.skip_matched, (std::set<std::string>{"ffn_down.weight", "blk.1.attn_norm.weight"}));
}

// A 16-bit or q8_0 KV cache (-ctk / -ctv f16, bf16 or q8_0) on the GPU against the CPU executor
// with the same cache: both round each appended row to nearest-even (q8_0: quantize each block as
// ggml's quantize_row_q8_0), so the caches agree but for the rare row (block) whose f32 values sit
// on a rounding boundary, and the logits stay at the f32-cache distance (q8_0: a boundary element
// moves one step, d = amax / 127, so a looser bound). Prompt (flash / CUDA-core attention over the
// stored rows), then 32 decode steps (split-KV).
// One cache type a case, and one model a case below (a case is one pair of the sanitizer suite,
// which has a time limit a pair).
class StoredKvCacheTest : public CudaExecutorTest, public ::testing::WithParamInterface<ir::DType> {};

TEST_P(StoredKvCacheTest, MatchesCpu) {
  const std::string model = CudaTestDataPath("models/qwen35-tiny-f32.gguf");
  const std::string ref = CudaTestDataPath("ref/qwen35-tiny-f32/greedy_tokens.i32");
  if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
  auto forced = memra::testing::ReadI32File(ref);
  ASSERT_TRUE(forced.ok()) << forced.status();
  {
    const ir::DType t = GetParam();
    SCOPED_TRACE(ir::DTypeName(t));
    const bool q8 = t == ir::DType::kQ8_0;
    auto m = Load(model, kernels::cuda::WeightMode::kBlocks, frontends::KvCacheTypes{t, t});
    ASSERT_TRUE(m.ok()) << m.status();
    auto c = m->cpu->Run("prefill", Ids(kPrompt));
    auto g = m->gpu->Run("prefill", Ids(kPrompt));
    ASSERT_TRUE(c.ok() && g.ok()) << c.status() << g.status();
    const Stats s = Compare((*g)[0].f32(), (*c)[0].f32(), (*c)[0].numel());
    auto gs = m->gpu->ReadState("blk.3.k_cache");
    ASSERT_TRUE(gs.ok()) << gs.status();
    const HostTensor* cs = m->cpu->state("blk.3.k_cache");
    ASSERT_EQ(gs->dtype(), t);
    ASSERT_EQ(gs->nbytes(), cs->nbytes());
    // Units compared: 16-bit elements, or q8_0 blocks (scale and 32 int8); a written unit is non-zero.
    const int64_t unit = q8 ? 34 : 2, units = gs->nbytes() / unit;
    const auto* gb = static_cast<const uint8_t*>(gs->data());
    const auto* cb = static_cast<const uint8_t*>(cs->data());
    const std::vector<uint8_t> zero(static_cast<size_t>(unit), 0);
    int64_t differ = 0, written = 0;
    for (int64_t i = 0; i < units; ++i) {
      differ += std::memcmp(gb + i * unit, cb + i * unit, static_cast<size_t>(unit)) != 0;
      written += std::memcmp(cb + i * unit, zero.data(), static_cast<size_t>(unit)) != 0;
    }
    auto d = ForcedDecode(*m, *forced);
    ASSERT_TRUE(d.ok()) << d.status();
    std::printf(
        "  %s KV cache: prefill logits vs CPU max|d| %.3e nmse %.3e; blk.3.k_cache %lld of %lld written %s "
        "differ; 32 decode steps: worst row nmse %.3e, argmax = CPU's at %d/32\n",
        std::string(ir::DTypeName(t)).c_str(), s.max_abs, s.nmse, static_cast<long long>(differ),
        static_cast<long long>(written), q8 ? "blocks" : "elements", d->worst, d->step_agree);
    EXPECT_GT(written, 47 * units / gs->dim(0));  // the prompt's 48 rows landed
    EXPECT_LE(differ, written / 100 + 1);
    // Far below what the rounding itself moves (f16 ~1e-7, bf16 ~1e-5 nmse from an f32 cache).
    EXPECT_LE(s.nmse, q8 ? 1e-6 : 1e-8);
    EXPECT_LE(d->worst, q8 ? 1e-6 : 1e-8);
    EXPECT_EQ(d->step_agree, 32);
  }
}
INSTANTIATE_TEST_SUITE_P(CacheTypes, StoredKvCacheTest,
                         ::testing::Values(ir::DType::kF16, ir::DType::kBF16, ir::DType::kQ8_0),
                         [](const ::testing::TestParamInfo<ir::DType>& info) {
                           return std::string(ir::DTypeName(info.param));
                         });

// qwen35moe on the GPU: the router (moe_route) and the experts' products (gemv_q_moe*, experts
// read from the device ids) against the CPU executor, prompt and 32 decode steps teacher-forced
// with the float64 reference's greedy tokens (a greedy run would diverge at the first near tie).
// Bounds from ../shared/fixtures/README.md §7: with int8-quantized activations (the decode GEMVs')
// the router's top-2 margin (~2e-4 in probability) lets an expert flip, which moves single rows
// by nmse up to ~0.2; so the mean row nmse is bounded (2e-2), the worst row loosely, top-1 >= 0.85.
TEST_F(CudaExecutorTest, TinyMoeQ8MatchesCpu) {
  const std::string model = CudaTestDataPath("models/qwen35moe-tiny-q8_0.gguf");
  const std::string ref = CudaTestDataPath("ref/qwen35moe-tiny-q8_0/exact_dequant.logits_batch.greedy.json");
  if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
  auto m = Load(model);
  ASSERT_TRUE(m.ok()) << m.status();
  auto c = m->cpu->Run("prefill", Ids(kPrompt));
  auto g = m->gpu->Run("prefill", Ids(kPrompt));
  ASSERT_TRUE(c.ok() && g.ok()) << c.status() << g.status();
  const Stats s = Compare((*g)[0].f32(), (*c)[0].f32(), (*c)[0].numel());
  const int agree = ArgmaxAgreement((*g)[0].f32(), (*c)[0].f32(), 48);
  std::printf("  qwen35moe q8_0 prefill vs CPU: max|d| %.3e nmse %.3e, argmax agrees at %d/48\n", s.max_abs, s.nmse,
              agree);
  EXPECT_LE(s.nmse, 2e-2);
  EXPECT_GE(agree, 44);
  auto forced = memra::testing::ReadGreedyTokens(ref);
  ASSERT_TRUE(forced.ok()) << forced.status();
  ASSERT_EQ(forced->size(), 32u);
  auto d = ForcedDecode(*m, *forced);
  ASSERT_TRUE(d.ok()) << d.status();
  std::printf(
      "  32 decode steps vs CPU: mean row nmse %.3e, worst %.3e; argmax = CPU's at %d/32, = the reference's "
      "next token at %d/31\n",
      d->mean, d->worst, d->step_agree, d->ref_agree);
  EXPECT_LE(d->mean, 2e-2);
  EXPECT_LE(d->worst, 0.3);
  EXPECT_GE(d->step_agree, 28);
  EXPECT_GE(d->ref_agree, 27);
}

// Gemma 4 on the GPU (dense q8_0 and the E-variant: sliding windows in the CUDA-core attention
// and split-KV decode, rope with freq_factors, KV-shared layers, mul_weight, per-layer inputs)
// against the CPU executor, the prompt and 32 decode steps teacher-forced with the float64
// reference's greedy tokens. The GPU's products round activations (bf16 GEMMs, q8 GEMV inputs):
// the qwen35moe bounds above (README §9.5: q8-activation engines sit ~8e-2 rms from exact).
// A fixture name as a test name (gtest allows letters, digits and '_').
std::string FixtureName(const ::testing::TestParamInfo<const char*>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (c == '-' || c == '.') c = '_';
  return n;
}

class Gemma4Q8Test : public CudaExecutorTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(Gemma4Q8Test, MatchesCpu) {
  {
    const char* name = GetParam();
    SCOPED_TRACE(name);
    const std::string model = CudaTestDataPath(std::string("models/") + name + ".gguf");
    const std::string ref = CudaTestDataPath(std::string("ref/") + name + "/exact_dequant.logits_batch.greedy.json");
    if (!FileExists(model) || !FileExists(ref)) GTEST_SKIP() << "fixture not found: " << model;
    auto m = Load(model);
    ASSERT_TRUE(m.ok()) << m.status();
    auto c = m->cpu->Run("prefill", Ids(kPrompt));
    auto g = m->gpu->Run("prefill", Ids(kPrompt));
    ASSERT_TRUE(c.ok() && g.ok()) << c.status() << g.status();
    const Stats s = Compare((*g)[0].f32(), (*c)[0].f32(), (*c)[0].numel());
    const int agree = ArgmaxAgreement((*g)[0].f32(), (*c)[0].f32(), 48);
    std::printf("  %s prefill vs CPU: max|d| %.3e nmse %.3e, argmax agrees at %d/48\n", name, s.max_abs, s.nmse, agree);
    EXPECT_LE(s.nmse, 2e-2);
    EXPECT_GE(agree, 44);
    auto forced = memra::testing::ReadGreedyTokens(ref);
    ASSERT_TRUE(forced.ok()) << forced.status();
    auto d = ForcedDecode(*m, *forced);
    ASSERT_TRUE(d.ok()) << d.status();
    std::printf("  %s 32 decode steps vs CPU: mean row nmse %.3e, worst %.3e, argmax = CPU's at %d/32\n", name, d->mean,
                d->worst, d->step_agree);
    EXPECT_LE(d->mean, 2e-2);
    EXPECT_LE(d->worst, 0.3);
    EXPECT_GE(d->step_agree, 28);
  }
}
INSTANTIATE_TEST_SUITE_P(TinyModels, Gemma4Q8Test, ::testing::Values("gemma4-tiny-q8_0", "gemma4e-tiny-q8_0"),
                         FixtureName);

// Step 3.5 on the GPU (moe_route_sigmoid with the selection bias, clamped SwiGLU experts and shared
// expert, mul_rows' head-wise gate, sliding and full layers of different head counts and rotary
// dims) against the CPU executor, the prompt and 32 decode steps teacher-forced with the float64
// reference's greedy tokens. Bounds of ../shared/fixtures/README.md §10.2 for q8 activations: mean
// row nmse <= 2e-2, top-1 >= 0.9 (a clamp edge or an expert flip moves single rows: worst 0.16 there).
TEST_F(CudaExecutorTest, Step35Q8MatchesCpu) {
  const std::string model = CudaTestDataPath("models/step35-tiny-q8_0.gguf");
  const std::string ref = CudaTestDataPath("ref/step35-tiny-q8_0/exact_dequant.logits_batch.greedy.json");
  if (!FileExists(model) || !FileExists(ref)) GTEST_SKIP() << "fixture not found: " << model;
  auto m = Load(model);
  ASSERT_TRUE(m.ok()) << m.status();
  auto c = m->cpu->Run("prefill", Ids(kPrompt));
  auto g = m->gpu->Run("prefill", Ids(kPrompt));
  ASSERT_TRUE(c.ok() && g.ok()) << c.status() << g.status();
  const Stats s = Compare((*g)[0].f32(), (*c)[0].f32(), (*c)[0].numel());
  const int agree = ArgmaxAgreement((*g)[0].f32(), (*c)[0].f32(), 48);
  std::printf("  step35-tiny-q8_0 prefill vs CPU: max|d| %.3e nmse %.3e, argmax agrees at %d/48\n", s.max_abs, s.nmse,
              agree);
  EXPECT_LE(s.nmse, 2e-2);
  EXPECT_GE(agree, 43);
  auto forced = memra::testing::ReadGreedyTokens(ref);
  ASSERT_TRUE(forced.ok()) << forced.status();
  auto d = ForcedDecode(*m, *forced);
  ASSERT_TRUE(d.ok()) << d.status();
  std::printf("  step35-tiny-q8_0 32 decode steps vs CPU: mean row nmse %.3e, worst %.3e, argmax = CPU's at %d/32\n",
              d->mean, d->worst, d->step_agree);
  EXPECT_LE(d->mean, 2e-2);
  EXPECT_LE(d->worst, 0.3);
  EXPECT_GE(d->step_agree, 28);
}

// Sliding-window rings (ir/Ops.def kv_append ring) on the device: lowered with at most 8 rows per
// call, the sliding layers keep 23-row rings; prefill in chunks of 8 (each ring wraps twice over the
// 48-token prompt, the flash / CUDA-core prefill kernels reading across the wrap) and 16 decode
// steps (attention_split) give the full-length caches' logits bit for bit, and the CPU's within the
// q8_0 bound (per row block: 2e-2 for gemma4; 0.3 for step35, whose single rows move with a clamp
// edge or an expert flip under q8 activations, README §10.2: 0.16 in llama.cpp); a 9-row call is
// refused before it runs.
class SlidingWindowRingsTest : public CudaExecutorTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(SlidingWindowRingsTest, EqualFullCaches) {
  {
    const char* name = GetParam();
    const double bound = std::string(name) == "step35-tiny-q8_0" ? 0.3 : 2e-2;
    SCOPED_TRACE(name);
    const std::string model = CudaTestDataPath(std::string("models/") + name + ".gguf");
    if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
    auto full = Load(model);
    auto ring = Load(model, kernels::cuda::WeightMode::kBlocks, {}, 8);
    ASSERT_TRUE(full.ok() && ring.ok()) << full.status() << ring.status();
    double worst = 0;
    int32_t next = 0;
    for (size_t s = 0; s < kPrompt.size(); s += 8) {
      const std::vector<int32_t> chunk(kPrompt.begin() + s, kPrompt.begin() + s + 8);
      auto a = full->gpu->Run("prefill", Ids(chunk));
      auto b = ring->gpu->Run("prefill", Ids(chunk));
      auto c = ring->cpu->Run("prefill", Ids(chunk));
      ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status() << b.status() << c.status();
      ASSERT_EQ(Floats((*b)[0]), Floats((*a)[0])) << "prefill chunk at " << s;
      worst = std::max(worst, Compare((*b)[0].f32(), (*c)[0].f32(), (*c)[0].numel()).nmse);
      next = kernels::cpu::Argmax((*b)[0].f32() + (*b)[0].numel() - kVocab, kVocab);
    }
    for (int step = 0; step < 16; ++step) {
      auto a = full->gpu->Run("decode", Ids({next}));
      auto b = ring->gpu->Run("decode", Ids({next}));
      auto c = ring->cpu->Run("decode", Ids({next}));
      ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status() << b.status() << c.status();
      ASSERT_EQ(Floats((*b)[0]), Floats((*a)[0])) << "decode step " << step;
      worst = std::max(worst, Compare((*b)[0].f32(), (*c)[0].f32(), kVocab).nmse);
      next = kernels::cpu::Argmax((*c)[0].f32(), kVocab);
    }
    std::printf("  %s with 23-row rings: GPU = full-cache GPU bit for bit; vs CPU worst row-block nmse %.3e\n", name,
                worst);
    EXPECT_LE(worst, bound);
    auto refused = ring->gpu->Run("prefill", Ids(std::vector<int32_t>(kPrompt.begin(), kPrompt.begin() + 9)));
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(std::string(refused.status().message()).find("at most 8 rows per call"), std::string::npos)
        << refused.status();
  }
}
INSTANTIATE_TEST_SUITE_P(TinyModels, SlidingWindowRingsTest,
                         ::testing::Values("gemma4-tiny-q8_0", "gemma4e-tiny-q8_0", "step35-tiny-q8_0"), FixtureName);

// A module selected for one weight mode runs only on an executor holding the weights that way: the
// records name the dequantizations (or not). Refused before anything is uploaded.
TEST_F(CudaExecutorTest, AModuleSelectedForAnotherWeightModeIsRefused) {
  const std::string model = CudaTestDataPath("models/qwen35-tiny-q8_0.gguf");
  if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
  auto file = gguf::GgufFile::Open(model);
  ASSERT_TRUE(file.ok()) << file.status();
  auto mod = frontends::LowerModel(**file, {});
  ASSERT_TRUE(mod.ok()) << mod.status();
  (*mod)->attrs().Set("kernel_arch", "sm_90");  // as select-kernels{weights=bf16} leaves it
  (*mod)->attrs().Set("kernel_weights", "bf16");
  auto g = CudaExecutor::Create(**mod, **file, {});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(std::string(g.status().message()).find("selected for --weights bf16"), std::string::npos) << g.status();
}

TEST_F(CudaExecutorTest, ErrorsAreClear) {
  const std::string model = CudaTestDataPath("models/qwen35-tiny-f32.gguf");
  if (!FileExists(model)) GTEST_SKIP() << "fixture not found: " << model;
  auto m = Load(model);
  ASSERT_TRUE(m.ok()) << m.status();
  auto bad = m->gpu->Run("prefill", Ids({1, 2, 9999}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("outside the vocabulary"), std::string::npos) << bad.status();
  EXPECT_FALSE(m->gpu->Run("nope", Ids({1})).ok());
}

}  // namespace
}  // namespace memra::runtime
