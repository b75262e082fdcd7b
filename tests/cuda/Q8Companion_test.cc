// The q8 companions (kernels/cuda/Q8Companion.h) on the CPU: the layout, records that do not
// match it read as none, and the CUDA pipeline on the tiny q8_0 models of every family: each
// decode function's products that read a norm's or fused_rows' result lose their
// gemv_q_quantize_x launch, the producers' kernels write the companion, every consumer's producer
// records one, the memory plan gives the producer's buffer its full bytes, and (with NVRTC) every
// producer module compiles for sm_90. The kernels' arithmetic is checked on the host emulation
// (tests/cuda/emulation/q8companion_run.sh); on a GPU (skipped without one) the tiny models'
// prefill and decode logits with the companions are bit for bit those without: the products read
// the same bytes, written by the producer instead of a launch of their own.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "codegen/KernelCompiler.h"
#include "codegen/Nvrtc.h"
#include "codegen/SelectKernelsPass.h"
#include "frontends/ModelFamily.h"
#include "frontends/gguf/GgufFile.h"
#include "gtest/gtest.h"
#include "ir/Function.h"
#include "ir/Module.h"
#include "ir/Parser.h"
#include "ir/ResultBuffer.h"
#include "kernels/cuda/GemvQuant.h"
#include "kernels/cuda/GpuOpRegistry.h"
#include "kernels/cuda/Q8Companion.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/cpu/HostTensor.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaExecutor.h"
#include "tests/TestUtil.h"

namespace memra::kernels::cuda {
namespace {

TEST(Q8Companion, LayoutFollowsTheQuantizeLaunch) {
  const std::optional<Q8Companion> c = Q8CompanionLayout(1, 2, 2816);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->result, 1u);
  EXPECT_EQ(c->at, 2 * 2816 * 4);  // already 256-aligned
  EXPECT_EQ(c->bytes, GemvQuantXBytes(2, 2816));
  EXPECT_EQ(Q8CompanionLayout(0, 1, 64)->at, 256);
  EXPECT_EQ(Q8CompanionLayout(0, 3, 96)->at, 1280);       // 1,152 bytes of values
  EXPECT_EQ(Q8CompanionLayout(0, 16, 256)->elems, 4096);  // a decode attention's [1, 16, 256]
  // Not a multiple of 32 columns, no rows, past 2^31 values.
  EXPECT_FALSE(Q8CompanionLayout(0, 1, 48).has_value());
  EXPECT_FALSE(Q8CompanionLayout(0, 0, 64).has_value());
  EXPECT_FALSE(Q8CompanionLayout(0, int64_t{1} << 26, 64).has_value());
}

TEST(Q8Companion, RecordsOtherThanTheLayoutReadAsNone) {
  auto m = ir::ParseModule(R"(weight @n : f32[64]
func @f(%x: f32[1, 64]) -> (f32[1, 64]) attributes {bucket = 1} {
  %h = rms_norm(%x, @n) {eps = 1e-06} : f32[1, 64]
  return %h
}
)");
  ASSERT_TRUE(m.ok()) << m.status();
  ir::Op& norm = *(*m)->function("f")->Ops()[0];
  WriteQ8Companion(*Q8CompanionLayout(0, 1, 64), norm);
  ASSERT_TRUE(Q8CompanionOf(norm).has_value());
  EXPECT_TRUE(Q8CompanionOfValue(*norm.result(0)).has_value());
  EXPECT_EQ(ir::ResultBufferBytes(norm, 0, 256), 512);
  EXPECT_EQ(ir::ResultBufferBytes(norm, 1, 256), 256);
  // A hostile or stale record (a plan file): an offset inside the values, a size not the layout's,
  // a result the op does not have. The units then see no companion, and a launch that writes one
  // fails at Bind as a stale selection.
  for (auto [attr, value] : std::vector<std::pair<const char*, int64_t>>{
           {"q8_companion_at", 128}, {"q8_companion_bytes", 64}, {"q8_companion", 3}, {"q8_companion", -1}}) {
    WriteQ8Companion(*Q8CompanionLayout(0, 1, 64), norm);
    norm.attrs().Set(attr, value);
    EXPECT_FALSE(Q8CompanionOf(norm).has_value()) << attr << " = " << value;
  }
  EraseQ8Companion(norm);
  EXPECT_FALSE(Q8CompanionOf(norm).has_value());
  EXPECT_FALSE(norm.attrs().Has("q8_companion_at"));
}

absl::Status Compile(ir::Module& m, absl::string_view pipeline) { return memra::testing::CompileModule(m, pipeline); }

struct DecodeCounts {
  int quantize = 0;   // gemv_q_quantize_x launches (the MoE decode unit's included)
  int producers = 0;  // ops writing a companion
  int readers = 0;    // one-token products reading one
};

// The tiny model's @decode through the CUDA pipeline (q8-companions on or off), checked as it goes.
// On means every producer, fused_rows included (q8-companion-rows=true; the default leaves them
// out), so each producer kind's module is compiled and run here.
DecodeCounts CountDecode(const std::string& path, bool companions, std::vector<ModuleSpec>* modules) {
  DecodeCounts n;
  auto file = gguf::GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return n;
  auto m = frontends::LowerModel(**file, {});
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return n;
  std::string pipeline = passes::WithBucketLadder(passes::PipelineForArch("sm_90"), "16");
  pipeline = absl::StrReplaceAll(
      pipeline, {{"select-kernels", companions ? "select-kernels{q8-companions=true q8-companion-rows=true}"
                                               : "select-kernels{q8-companions=false}"}});
  const absl::Status st = Compile(**m, pipeline);
  EXPECT_TRUE(st.ok()) << path << ": " << st;
  if (!st.ok()) return n;
  const ir::Function* decode = (*m)->function("decode");
  EXPECT_NE(decode, nullptr) << path;
  if (decode == nullptr) return n;
  auto sels = SelectionsOf(*decode, 1, *TargetPreset("sm_90"), WeightMode::kBlocks, /*use_records=*/true);
  EXPECT_TRUE(sels.ok()) << sels.status();
  if (!sels.ok()) return n;
  size_t i = 0;
  for (const ir::Op* op : decode->Ops()) {
    if (op->is(ir::OpKind::kSegment)) continue;
    const OpSelection& s = (*sels)[i++];
    n.quantize += CountQ8Launches(s);
    if (const std::optional<Q8Companion> c = Q8CompanionOf(*op)) {
      ++n.producers;
      bool writes = false;
      for (const Launch& l : s.launches) writes |= Q8CompanionDefine(l) == c->at;
      EXPECT_TRUE(writes) << op->Summary() << " records a companion its kernel does not write";
      // plan-memory sized the buffer for both: the op's offset plus the buffer end stays in the arena.
      const std::vector<int64_t> arena = op->attrs().GetI64Array("arena").value_or(std::vector<int64_t>{});
      EXPECT_GT(arena.size(), c->result) << op->Summary();
      if (arena.size() > c->result) {
        EXPECT_LE(arena[c->result] + c->at + c->bytes, decode->attrs().I64Or("arena_bytes", 0)) << op->Summary();
      }
      if (modules != nullptr)
        for (const Launch& l : s.launches) modules->push_back(l.kernel.module);
    }
    // The products (GemvQuant.cu launches; the MoE decode unit quantizes its h itself) that read an
    // operand's companion; one without any quantize launch must read one.
    bool product = false, has = false;
    for (const Launch& l : s.launches)
      product |= l.kernel.module.file == "GemvQuant.cu" && l.kernel.entry != "gemv_q_quantize_x";
    for (unsigned k = 0; k < op->num_operands(); ++k) has |= Q8CompanionOfValue(*op->operand(k)).has_value();
    if (product && CountQ8Launches(s) == 0) {
      EXPECT_TRUE(has) << op->Summary() << " reads q8 x without a launch or a companion";
    }
    n.readers += product && has;
  }
  return n;
}

struct TinyModel {
  const char* path;
  bool shared;  // in ../shared/fixtures rather than tests/data
};
constexpr TinyModel kModels[] = {
    {"models/qwen35-tiny-q8_0.gguf", false},
    {"models/qwen35moe-tiny-q8_0.gguf", false},
    {"models/gemma4-tiny-q8_0.gguf", false},
    {"models/gemma4e-tiny-q8_0.gguf", false},
    {"fixtures/models/gemma4moe-tiny-q8_0.gguf", true},
    {"models/step35-tiny-q8_0.gguf", false},
};

TEST(Q8Companion, TinyModelsDecodeWithFewerQuantizeLaunches) {
  int tested = 0;
  for (const TinyModel& t : kModels) {
    const std::string path = t.shared ? memra::testing::SharedPath(t.path) : memra::testing::TestDataPath(t.path);
    if (!memra::testing::FileExists(path)) {
      std::printf("  %s: not here, skipped\n", path.c_str());
      continue;
    }
    const DecodeCounts off = CountDecode(path, false, nullptr);
    const DecodeCounts on = CountDecode(path, true, nullptr);
    std::printf("  %-32s quantize launches %d -> %d, %d producers, %d products reading a companion\n", t.path,
                off.quantize, on.quantize, on.producers, on.readers);
    EXPECT_EQ(off.producers, 0) << t.path;
    EXPECT_GT(on.producers, 0) << t.path;
    EXPECT_GE(on.readers, on.producers) << t.path;
    EXPECT_EQ(off.quantize - on.quantize, on.readers) << t.path << ": each reader spares its launch";
    ++tested;
  }
  EXPECT_GE(tested, 5);
}

TEST(Q8Companion, ProducerModulesCompileForSm90) {
  auto nvrtc = codegen::Nvrtc::Load();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available here: " << nvrtc.status();
  std::vector<ModuleSpec> mods;
  std::set<std::string> seen;
  for (const TinyModel& t : kModels) {
    const std::string path = t.shared ? memra::testing::SharedPath(t.path) : memra::testing::TestDataPath(t.path);
    if (!memra::testing::FileExists(path)) continue;
    std::vector<ModuleSpec> all;
    CountDecode(path, true, &all);
    for (const ModuleSpec& m : all)
      if (seen.insert(m.Key()).second) mods.push_back(m);
  }
  ASSERT_FALSE(mods.empty());
  std::set<std::string> files;
  for (const ModuleSpec& m : mods) files.insert(m.file);
  EXPECT_TRUE(files.count("Norm.cu") || files.count("FusedRows.cu"));
  codegen::CompileOptions o;
  o.arch = 90;
  o.cache_dir = "-";
  auto c = codegen::KernelCompiler::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto cubins = (*c)->CompileAll(mods);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  for (const auto& cb : *cubins) EXPECT_EQ((*cb)[0], 0x7f);  // ELF
  std::printf("  %zu producer modules (%s): %s\n", mods.size(), absl::StrJoin(files, ", ").c_str(),
              (*c)->stats().ToString().c_str());
}

// The tiny model through the CUDA pipeline for this device (q8-companions on or off), run on it:
// the last prefill row's logits, then 8 forced decode steps' logits, concatenated.
absl::StatusOr<std::vector<float>> GpuLogits(const gguf::GgufFile& file, bool companions) {
  auto m = frontends::LowerModel(file, {});
  if (!m.ok()) return m.status();
  auto target = runtime::CudaDeviceTarget(0);
  if (!target.ok()) return target.status();
  std::string pipeline =
      passes::WithBucketLadder(passes::PipelineForTarget(target->ArchName(), target->sm_count, "blocks"), "16");
  pipeline = absl::StrReplaceAll(
      pipeline, {{"select-kernels{", companions ? "select-kernels{q8-companions=true q8-companion-rows=true "
                                                : "select-kernels{q8-companions=false "}});
  if (absl::Status st = Compile(**m, pipeline); !st.ok()) return st;
  runtime::CudaExecutorOptions o;
  o.poison_arena = true;
  auto gpu = runtime::CudaExecutor::Create(**m, file, o);
  if (!gpu.ok()) return gpu.status();
  std::vector<float> out;
  auto ids = [](std::vector<int32_t> v) {
    std::vector<runtime::HostTensor> a;
    a.push_back(runtime::HostTensor::FromI32(v, {static_cast<int64_t>(v.size())}));
    return a;
  };
  auto p = (*gpu)->Run("prefill", ids({1, 5, 9, 2, 7, 3, 11, 4, 6, 8, 10, 12}));
  if (!p.ok()) return p.status();
  out.insert(out.end(), (*p)[0].f32(), (*p)[0].f32() + (*p)[0].numel());
  for (int32_t t : {3, 14, 15, 9, 2, 6, 5, 35}) {
    auto d = (*gpu)->Run("decode", ids({t}));
    if (!d.ok()) return d.status();
    out.insert(out.end(), (*d)[0].f32(), (*d)[0].f32() + (*d)[0].numel());
  }
  return out;
}

TEST(Q8Companion, GpuLogitsEqualBitForBitWithout) {
  auto dev = runtime::cuda::CudaDevice::Open(0);
  if (!dev.ok()) GTEST_SKIP() << "no GPU: " << dev.status().message();
  int tested = 0;
  for (const TinyModel& t : kModels) {
    const std::string path = t.shared ? memra::testing::SharedPath(t.path) : memra::testing::TestDataPath(t.path);
    if (!memra::testing::FileExists(path)) continue;
    auto file = gguf::GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    auto with = GpuLogits(**file, true);
    auto without = GpuLogits(**file, false);
    ASSERT_TRUE(with.ok()) << t.path << ": " << with.status();
    ASSERT_TRUE(without.ok()) << t.path << ": " << without.status();
    ASSERT_EQ(with->size(), without->size());
    size_t differ = 0, nonfinite = 0;
    for (size_t i = 0; i < with->size(); ++i) {
      differ += std::memcmp(&(*with)[i], &(*without)[i], 4) != 0;
      nonfinite += !std::isfinite((*with)[i]);
    }
    std::printf("  %-40s %zu logits, %zu differ, %zu not finite\n", t.path, with->size(), differ, nonfinite);
    EXPECT_EQ(differ, 0u) << t.path;
    EXPECT_EQ(nonfinite, 0u) << t.path;
    ++tested;
  }
  EXPECT_GE(tested, 5);
}

}  // namespace
}  // namespace memra::kernels::cuda
