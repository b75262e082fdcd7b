// The compile pipeline (passes/Pipelines.h) on the qwen35-tiny-f32 fixture, run on the CPU
// executor:
//   * fused + bucketed + memory-planned + segmented module vs the lowered one: prefill logits of
//     the 48-token prompt (bucket pieces 32 + 16 vs one call) and 32 greedy decode steps are
//     bit-identical, and still match llama.cpp (max |d| <= 1e-4) with the same greedy tokens;
//   * every fusion fires once per layer where the model has its pattern;
//   * every arena plan is valid (no two live buffers overlap) and smaller than the naive sum;
//   * decode is one capturable segment (one graph per KV-length rung);
//   * the plan file round-trips (same IR and layout), a loaded plan runs bit-identically, and a
//     plan for another GGUF or arch is refused with what differs.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "ir/Printer.h"
#include "kernels/cpu/Sampling.h"
#include "passes/MemoryPlan.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/Session.h"
#include "runtime/plan/Plan.h"
#include "tests/TestUtil.h"

namespace memra::runtime {
namespace {

using memra::testing::FileExists;
using memra::testing::ReadF32File;
using memra::testing::ReadI32File;
using memra::testing::TestDataPath;

const std::vector<int32_t>& kPrompt = memra::testing::kFixturePrompt;
constexpr int64_t kVocab = memra::testing::kFixtureVocab;

std::string Model() { return TestDataPath("models/qwen35-tiny-f32.gguf"); }
std::string Ref(const std::string& f) { return TestDataPath("ref/qwen35-tiny-f32/" + f); }

absl::Status Compile(ir::Module& m, absl::string_view pipeline = passes::kDefaultPipeline) {
  return memra::testing::CompileModule(m, pipeline);
}

// The unfused module runs the 48 prompt tokens in one call; the compiled one in chunks of 16
// through @prefill_t16 (its memory-planned arena), which the CPU executor's split invariance
// makes bit-identical.
SessionOptions Opts(bool compiled) {
  SessionOptions so;
  so.threads = 2;
  so.chunk = compiled ? 16 : 0;
  so.profile = compiled;  // calls per function
  so.prompt_logits = true;
  if (compiled) so.compile = [](ir::Module& m) { return Compile(m); };
  return so;
}

// The default pipeline with the opt-in launch fusions of a product's last block
// (passes/Pipelines.h): fuse-moe-router before the groups, fuse-matmul-add-rmsnorm and
// fuse-matmul-delta-net-step after fuse-rows.
std::string WithLaunchFusions(absl::string_view pipeline) {
  return absl::StrReplaceAll(pipeline,
                             {{"fuse-add-rmsnorm,", "fuse-moe-router,fuse-add-rmsnorm,"},
                              {"fuse-rows,", "fuse-rows,fuse-matmul-add-rmsnorm,fuse-matmul-delta-net-step,"}});
}
SessionOptions LaunchFusionOpts() {
  SessionOptions so = Opts(true);
  so.compile = [](ir::Module& m) { return Compile(m, WithLaunchFusions(passes::kDefaultPipeline)); };
  return so;
}

// Prompt logits [48, V] and 32 greedy tokens with their decode logits.
struct Run {
  std::vector<float> prompt_logits;
  std::vector<int32_t> greedy;
  std::vector<float> decode_logits;
};
absl::StatusOr<Run> Generate(Session& s) {
  Run r;
  auto last = s.Prefill(kPrompt, &r.prompt_logits);
  if (!last.ok()) return last.status();
  std::vector<float> logits = *last;
  for (int i = 0; i < 32; ++i) {
    const int32_t id = kernels::cpu::Argmax(logits.data(), kVocab);
    r.greedy.push_back(id);
    auto next = s.Decode(id);
    if (!next.ok()) return next.status();
    logits = *next;
    r.decode_logits.insert(r.decode_logits.end(), logits.begin(), logits.end());
  }
  return r;
}

double MaxAbs(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}
bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

#define SKIP_WITHOUT_FIXTURE()                                      \
  if (!FileExists(Model()) || !FileExists(Ref("logits_batch.f32"))) \
  GTEST_SKIP() << "qwen35-tiny-f32 fixture not "                    \
                  "found"

// qwen35moe: the pipeline forms one moe_ffn per layer (fuse-moe-ffn, before fuse-matmul-group
// could take the shared gate's matmul), and the compiled module (fused, bucketed,
// memory-planned) runs bit-identically to the lowered one.
TEST(FusedExecution, MoePipelineFormsMoeFfnAndIsBitIdentical) {
  const std::string moe = TestDataPath("models/qwen35moe-tiny-q8_0.gguf");
  if (!FileExists(moe)) GTEST_SKIP() << moe << " not found";
  auto plain = Session::Open(moe, Opts(false));
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto fused = Session::Open(moe, Opts(true));
  ASSERT_TRUE(fused.ok()) << fused.status();
  for (const char* fn : {"decode", "prefill_t16"}) {
    int moe_ffn = 0, experts = 0, gated_add = 0, route = 0, router = 0;
    for (const ir::Op* op : (*fused)->module().function(fn)->Ops()) {
      moe_ffn += op->is(ir::OpKind::kMoeFfn);
      experts += op->is(ir::OpKind::kMoeExperts);
      gated_add += op->is(ir::OpKind::kGatedAdd);
      route += op->is(ir::OpKind::kMoeRoute);
      router += op->is(ir::OpKind::kMoeRouter);
    }
    // fuse-moe-router is opt-in (slower than the two launches: bench/RESULTS.md, session 37).
    EXPECT_EQ(moe_ffn, 4) << fn;
    EXPECT_EQ(route, 4) << fn;
    EXPECT_EQ(router, 0) << fn;
    EXPECT_EQ(experts + gated_add, 0) << fn;
  }
  auto a = Generate(**plain);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = Generate(**fused);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(BitIdentical(a->prompt_logits, b->prompt_logits))
      << "prompt logits max |d| " << MaxAbs(a->prompt_logits, b->prompt_logits);
  EXPECT_TRUE(BitIdentical(a->decode_logits, b->decode_logits))
      << "decode logits max |d| " << MaxAbs(a->decode_logits, b->decode_logits);
  EXPECT_EQ(a->greedy, b->greedy);
}

TEST(FusedExecution, PipelineIsBitIdenticalToUnfusedAndMatchesLlamaCpp) {
  SKIP_WITHOUT_FIXTURE();
  auto plain = Session::Open(Model(), Opts(false));
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto fused = Session::Open(Model(), Opts(true));
  ASSERT_TRUE(fused.ok()) << fused.status();
  // The compiled module has bucket functions beside the generic @prefill.
  ASSERT_NE((*fused)->module().function("prefill_t32"), nullptr);
  ASSERT_NE((*fused)->module().function("prefill_t16"), nullptr);
  ASSERT_NE((*fused)->module().function("prefill"), nullptr);

  auto a = Generate(**plain);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = Generate(**fused);
  ASSERT_TRUE(b.ok()) << b.status();
  const std::string profile = (*fused)->executor().ProfileReport();
  EXPECT_NE(profile.find("profile @prefill_t16: 3 calls"), std::string::npos) << profile;
  EXPECT_NE(profile.find("profile @decode: 32 calls"), std::string::npos) << profile;
  EXPECT_TRUE(BitIdentical(a->prompt_logits, b->prompt_logits))
      << "prompt logits max |d| " << MaxAbs(a->prompt_logits, b->prompt_logits);
  EXPECT_TRUE(BitIdentical(a->decode_logits, b->decode_logits))
      << "decode logits max |d| " << MaxAbs(a->decode_logits, b->decode_logits);
  EXPECT_EQ(a->greedy, b->greedy);

  auto ref = ReadF32File(Ref("logits_batch.f32"));
  ASSERT_TRUE(ref.ok()) << ref.status();
  std::printf("prompt logits vs llama.cpp: max |d| = %.3g (unfused %.3g)\n", MaxAbs(b->prompt_logits, *ref),
              MaxAbs(a->prompt_logits, *ref));
  EXPECT_LE(MaxAbs(b->prompt_logits, *ref), 1e-4);
  auto greedy = ReadI32File(Ref("greedy_tokens.i32"));
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  EXPECT_EQ(b->greedy, *greedy);
}

// The opt-in launch fusions on a whole model: each delta-net layer's input projections and step
// one matmul_delta_net_step (the fixture's weights are f32), the norms after the attention output
// and the down product the tails of those products, the MoE router's product and routing one
// moe_router; the decode logits bit-identical to the unfused module's.
TEST(FusedExecution, OptInLaunchFusionsFireAndAreBitIdentical) {
  SKIP_WITHOUT_FIXTURE();
  auto plain = Session::Open(Model(), Opts(false));
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto fused = Session::Open(Model(), LaunchFusionOpts());
  ASSERT_TRUE(fused.ok()) << fused.status();
  const ir::Module& m = (*fused)->module();
  const int64_t n_layer = m.attrs().I64Or("n_layer", 0);
  int64_t n_attn = 0;
  for (int64_t r : m.attrs().GetI64Array("recurrent_layers").value_or(std::vector<int64_t>{})) n_attn += r == 0;
  std::map<std::string, int64_t> count;
  for (const ir::Op* op : m.function("decode")->Ops()) ++count[std::string(op->mnemonic())];
  EXPECT_EQ(count["matmul_delta_net_step"], n_layer - n_attn);
  EXPECT_EQ(count["delta_net_step"], 0);
  EXPECT_EQ(count["matmul_add_rms_norm"], 2 * n_layer);
  EXPECT_EQ(count["add_rms_norm"], 0);
  auto a = Generate(**plain);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = Generate(**fused);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(BitIdentical(a->decode_logits, b->decode_logits))
      << "decode logits max |d| " << MaxAbs(a->decode_logits, b->decode_logits);
  EXPECT_EQ(a->greedy, b->greedy);

  const std::string moe = TestDataPath("models/qwen35moe-tiny-q8_0.gguf");
  if (!FileExists(moe)) return;
  auto moe_fused = Session::Open(moe, LaunchFusionOpts());
  ASSERT_TRUE(moe_fused.ok()) << moe_fused.status();
  int routers = 0, routes = 0;
  for (const ir::Op* op : (*moe_fused)->module().function("decode")->Ops()) {
    routers += op->is(ir::OpKind::kMoeRouter);
    routes += op->is(ir::OpKind::kMoeRoute);
  }
  EXPECT_EQ(routers, 4);
  EXPECT_EQ(routes, 0);
  auto moe_plain = Session::Open(moe, Opts(false));
  ASSERT_TRUE(moe_plain.ok()) << moe_plain.status();
  auto c = Generate(**moe_plain);
  ASSERT_TRUE(c.ok()) << c.status();
  auto d = Generate(**moe_fused);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(BitIdentical(c->decode_logits, d->decode_logits))
      << "moe decode logits max |d| " << MaxAbs(c->decode_logits, d->decode_logits);
}

TEST(FusedExecution, FusionsFirePerLayerAndPlansAreValid) {
  SKIP_WITHOUT_FIXTURE();
  auto file = gguf::GgufFile::Open(Model());
  ASSERT_TRUE(file.ok()) << file.status();
  auto m = frontends::LowerModel(**file, {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(Compile(**m).ok());
  const int64_t n_layer = (*m)->attrs().I64Or("n_layer", 0);
  int64_t n_attn = 0;
  const std::vector<int64_t> recurrent = (*m)->attrs().GetI64Array("recurrent_layers").value_or(std::vector<int64_t>{});
  for (int64_t r : recurrent) n_attn += r == 0;
  ASSERT_GT(n_attn, 0);
  for (const auto& f : (*m)->functions()) {
    std::map<std::string, int64_t> count;
    for (const ir::Op* op : f->Ops()) ++count[std::string(op->mnemonic())];
    SCOPED_TRACE(f->name());
    EXPECT_EQ(count["matmul_swiglu"], n_layer);
    // A one-token step's delta-net layers are one delta_net_step each after their input
    // projections' group (fuse-delta-net-step), its attention layers one gated_attention_step each
    // (fuse-gated-attention-step). The launch fusions of a product's last block
    // (fuse-matmul-add-rmsnorm, fuse-matmul-delta-net-step) are opt-in: slower than the separate
    // launches under programmatic dependent launch (bench/RESULTS.md, session 37).
    const bool one_token = f->name() == "decode";
    EXPECT_EQ(count["matmul_group"], n_layer);  // q/k/v, or qkv/gate/beta/alpha
    EXPECT_EQ(count["add_rms_norm"], 2 * n_layer);
    EXPECT_EQ(count["matmul_add_rms_norm"], 0);
    EXPECT_EQ(count["matmul"], 1 + 2 * n_layer) << "the head, the attention outputs and the downs";
    EXPECT_EQ(count["qk_norm_rope"], one_token ? 0 : n_attn);
    EXPECT_EQ(count["attention_gated"], one_token ? 0 : n_attn);
    EXPECT_EQ(count["gated_attention_step"], one_token ? n_attn : 0);
    EXPECT_EQ(count["gated_rms_norm"], one_token ? 0 : n_layer - n_attn);
    EXPECT_EQ(count["delta_net_step"], one_token ? n_layer - n_attn : 0);
    EXPECT_EQ(count["matmul_delta_net_step"], 0);
    EXPECT_EQ(count["swiglu"] + count["rms_norm"] + count["rope"] + count["sigmoid"] + count["add"], 1)
        << "only the first layer's attn_norm of the embedding stays unfused";
    if (!f->attrs().Has("bucket")) {
      // The generic @prefill (kept for the CPU's remainders): symbolic, so not planned and not
      // captured; one eager segment says why.
      EXPECT_EQ(f->name(), "prefill");
      EXPECT_FALSE(f->attrs().Has("arena_bytes"));
      const ir::Op& seg = f->body()->front();
      ASSERT_TRUE(seg.is(ir::OpKind::kSegment));
      EXPECT_EQ(seg.attrs().I64Or("capturable", 1), 0);
      EXPECT_NE(seg.attrs().GetString("reason").value_or("").find("data-dependent shape"), std::string::npos);
      continue;
    }
    // Arena: valid and smaller than the naive sum.
    auto plan = passes::ReadArenaPlan(*f);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(plan->has_value());
    EXPECT_TRUE(passes::CheckArenaPlan(**plan).ok()) << passes::CheckArenaPlan(**plan);
    EXPECT_LT((*plan)->arena_bytes, (*plan)->naive_bytes);
    // Segments: the whole function is one graph (attention: per KV-length rung).
    int64_t segments = 0;
    for (const ir::Op& op : *f->body())
      if (op.is(ir::OpKind::kSegment)) {
        ++segments;
        EXPECT_EQ(op.attrs().I64Or("capturable", 0), 1);
        EXPECT_EQ(op.attrs().I64Or("kv_rung", 0), 1);
      }
    EXPECT_EQ(segments, 1);
  }
  ASSERT_NE((*m)->function("decode"), nullptr);
  EXPECT_EQ((*m)->function("decode")->attrs().I64Or("bucket", 0), 1);
}

// The executor really places values at the planned offsets: the plan's run equals a run with a
// buffer per value bit for bit, and a wrong plan (every value at offset 0) changes the logits.
TEST(FusedExecution, ExecutorRunsAtThePlannedOffsets) {
  SKIP_WITHOUT_FIXTURE();
  auto file = gguf::GgufFile::Open(Model());
  ASSERT_TRUE(file.ok()) << file.status();
  frontends::LowerOptions lo;
  lo.prefill_all_logits = true;
  auto m = frontends::LowerModel(**file, lo);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(Compile(**m, passes::WithBucketLadder(passes::kDefaultPipeline, "32")).ok());
  auto run = [&](const ir::Module& mod, bool use_plan) -> absl::StatusOr<std::vector<float>> {
    CpuExecutorOptions eo;
    eo.threads = 2;
    eo.use_memory_plan = use_plan;
    auto exec = CpuExecutor::Create(mod, **file, eo);
    if (!exec.ok()) return exec.status();
    std::vector<HostTensor> args;
    args.push_back(HostTensor::FromI32(std::vector<int32_t>(kPrompt.begin(), kPrompt.begin() + 32), {32}));
    auto out = (*exec)->Run("prefill_t32", std::move(args));
    if (!out.ok()) return out.status();
    return std::vector<float>((*out)[0].f32(), (*out)[0].f32() + (*out)[0].numel());
  };
  auto planned = run(**m, true);
  auto separate = run(**m, false);
  ASSERT_TRUE(planned.ok() && separate.ok()) << planned.status() << separate.status();
  ASSERT_EQ(planned->size(), 32u * kVocab);
  EXPECT_TRUE(BitIdentical(*planned, *separate));
  for (ir::Op* op : (*m)->function("prefill_t32")->Ops())
    if (op->attrs().Has("arena")) op->attrs().Set("arena", std::vector<int64_t>(op->num_results(), 0));
  // Overwritten positions stop the run (non-consecutive positions) or the logits change.
  auto wrong = run(**m, true);
  EXPECT_TRUE(!wrong.ok() || !BitIdentical(*planned, *wrong));
}

TEST(FusedExecution, PlanRoundTripsRunsAndRefusesMismatches) {
  SKIP_WITHOUT_FIXTURE();
  auto file = gguf::GgufFile::Open(Model());
  ASSERT_TRUE(file.ok()) << file.status();
  frontends::LowerOptions lo;
  lo.prefill_all_logits = true;
  auto m = frontends::LowerModel(**file, lo);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(Compile(**m, passes::WithBucketLadder(passes::kDefaultPipeline, "16,32")).ok());
  // No NVRTC here: an empty kernel table (the real one: tests/plan/KernelTable_test.cc).
  SetKernelTableBuilder(
      [](const ir::Module&, absl::string_view) -> absl::StatusOr<KernelTable> { return KernelTable{}; });
  auto plan = MakePlan(**m, **file, "sm_90", passes::kDefaultPipeline, "test");
  SetKernelTableBuilder(nullptr);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // A fake kernel table entry exercises the binary sections (version 0 carries none in
  // practice; the reader must still skip them correctly).
  const std::string bytes = SerializePlan(*plan);
  auto back = ParsePlan(bytes, "mem.plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ir_text, plan->ir_text);
  EXPECT_EQ(back->arch, "sm_90");
  EXPECT_EQ(back->gguf.header_sha256, plan->gguf.header_sha256);
  ASSERT_EQ(back->functions.size(), plan->functions.size());
  for (size_t i = 0; i < plan->functions.size(); ++i) EXPECT_TRUE(back->functions[i] == plan->functions[i]);
  EXPECT_EQ(SerializePlan(*back), bytes);
  auto loaded = LoadPlanModule(*back);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(ir::ToText(**loaded), plan->ir_text);

  // Identity and arch checks (before any device work).
  const GgufIdentity id = IdentifyGguf(**file);
  EXPECT_TRUE(CheckPlanCompatible(*back, id, "").ok());
  EXPECT_TRUE(CheckPlanCompatible(*back, id, "sm_90").ok());
  absl::Status arch = CheckPlanCompatible(*back, id, "sm_80");
  EXPECT_NE(arch.message().find("targets sm_90 but this run targets sm_80"), std::string::npos) << arch;
  GgufIdentity other = id;
  other.size += 1;
  other.header_sha256[0] = other.header_sha256[0] == '0' ? '1' : '0';
  absl::Status gg = CheckPlanCompatible(*back, other, "");
  EXPECT_NE(gg.message().find("size"), std::string::npos) << gg;
  EXPECT_NE(gg.message().find("SHA-256"), std::string::npos) << gg;

  // Corruption: truncation, other magic, a newer format, a layout that disagrees with the IR.
  EXPECT_FALSE(ParsePlan(bytes.substr(0, bytes.size() / 2), "cut.plan").ok());
  EXPECT_FALSE(ParsePlan("GGUF" + bytes, "x.plan").ok());
  std::string newer = bytes;
  newer.replace(0, std::string("MEMRAPLAN 1").size(), "MEMRAPLAN 9");
  EXPECT_NE(ParsePlan(newer, "new.plan").status().message().find("format version 9"), std::string::npos);
  Plan bad = *back;
  bad.functions[0].arena_bytes += 256;
  EXPECT_FALSE(LoadPlanModule(bad).ok());

  // A kernel table with binaries round-trips (what the CUDA backend will write).
  Plan with_kernels = *back;
  KernelEntry fake;
  fake.name = "Norm.cu<N=64>";
  fake.file = "Norm.cu";
  fake.constants = "N=64";
  fake.source_hash = "abc123";
  fake.binaries = {{"sm_90", std::string("\0\1\n[end]\n", 9)}};
  with_kernels.kernels.version = kKernelTableVersion;
  with_kernels.kernels.kernels.push_back(fake);
  auto wk = ParsePlan(SerializePlan(with_kernels), "k.plan");
  ASSERT_TRUE(wk.ok()) << wk.status();
  ASSERT_EQ(wk->kernels.kernels.size(), 1u);
  EXPECT_EQ(wk->kernels.kernels[0].binaries[0].cubin, std::string("\0\1\n[end]\n", 9));

  // The loaded plan runs like the unfused module (chunks of 16 through @prefill_t16).
  auto file2 = gguf::GgufFile::Open(Model());
  ASSERT_TRUE(file2.ok());
  SessionOptions so = Opts(true);
  so.compile = nullptr;
  auto s = Session::Open(std::move(*file2), std::move(*loaded), so);
  ASSERT_TRUE(s.ok()) << s.status();
  auto plain = Session::Open(Model(), Opts(false));
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto a = Generate(**plain);
  auto b = Generate(**s);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(BitIdentical(a->prompt_logits, b->prompt_logits));
  EXPECT_TRUE(BitIdentical(a->decode_logits, b->decode_logits));
}

}  // namespace
}  // namespace memra::runtime
