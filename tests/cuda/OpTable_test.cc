// The per-op table, in the style of ggml's test-backend-ops: every op the qwen35 lowering emits,
// per weight dtype (every block format the GPU reads as blocks, and --weights bf16) and token
// bucket, on random inputs (never zeros), run through a one-op module
// on the CUDA executor (arena poisoned with NaN before each call, so unwritten elements fail)
// and on the CPU executor; outputs and the state they leave are compared by normalized MSE
// (sum (gpu - cpu)^2 / sum cpu^2) against a per-op bound. Stateful ops run two calls so the
// second reads state the first wrote. Prints the table; skips without a GPU.
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codegen/KernelCompiler.h"
#include "codegen/KernelModules.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/GgufWriter.h"
#include "gtest/gtest.h"
#include "ir/Builder.h"
#include "ir/Function.h"
#include "ir/StatusMacros.h"
#include "ir/Verifier.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/GpuOpRegistry.h"
#include "kernels/cuda/Target.h"
#include "kernels/cuda/WeightLayout.h"
#include "kernels/formats/Quant.h"
#include "runtime/ThreadCommunicator.h"
#include "runtime/cpu/CpuExecutor.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaExecutor.h"

namespace memra::runtime {
namespace {

using formats::GgmlType;
using ir::Dim;
using ir::DType;
using ir::Shape;
using ir::TensorType;
using ir::Value;
using kernels::cuda::WeightMode;

// A one-op (or few-op) module with random weights in an in-memory GGUF.
struct Harness {
  std::unique_ptr<ir::Module> m = std::make_unique<ir::Module>();
  gguf::GgufWriter writer;
  std::unique_ptr<gguf::GgufFile> file;
  ir::Function* fn = nullptr;
  std::unique_ptr<ir::OpBuilder> b;
  std::mt19937 rng;
  std::vector<std::vector<int64_t>> arg_dims;  // -1 = T
  std::vector<DType> arg_types;
  int64_t id_range = 0;
  // > 1: both executors run as rank tp_rank of tp_size (the module's tp attribute; the CPU rank on a
  // group it never calls, the GPU rank without a communicator): ops that pick their part by rank
  // (expert parallelism) without collectives.
  int tp_rank = 0, tp_size = 1;
  // > 0: the token dim (-1) is this static size instead of the symbol T, so the executor runs the
  // function as it stands (as the batched step's @step_tN buckets) rather than in a T bucket.
  int64_t static_t = 0;
  // Optional: overwrite arguments after the random fill (a step's batch description), and set
  // up both executors' state before the first call (a block table).
  std::function<void(int64_t T, int call, std::vector<HostTensor>& args)> fix_args;
  std::function<absl::Status(CpuExecutor&, CudaExecutor&)> prepare;
  // select-kernels' module-wide options the CUDA executor selects with (kernels/cuda/GpuOp.h
  // SelectOptions, read back from the module's attributes).
  kernels::cuda::SelectOptions select;

  explicit Harness(uint32_t seed) : rng(seed) {
    fn = m->AddFunction("f");
    b = std::make_unique<ir::OpBuilder>(fn);
  }
  float U(float lo = -1, float hi = 1) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

  Value* Arg(const std::string& name, std::vector<int64_t> dims, DType t = DType::kF32) {
    std::vector<Dim> d;
    for (int64_t x : dims) d.push_back(x >= 0 ? Dim(x) : static_t > 0 ? Dim(static_t) : Dim::Symbol("T"));
    arg_dims.push_back(dims);
    arg_types.push_back(t);
    return fn->AddArgument(name, TensorType(t, Shape(llvm::ArrayRef<Dim>(d))));
  }
  // A random weight with ggml `ne`, values in [lo, hi), stored as `type`.
  Value* Weight(const std::string& name, GgmlType type, std::vector<int64_t> ne, float lo = -1, float hi = 1) {
    int64_t n = 1;
    for (int64_t x : ne) n *= x;
    std::vector<float> v(n);
    for (float& x : v) x = U(lo, hi);
    const int64_t row = ne[0];
    const ir::DType dt = *ir::DTypeFromGgmlId(static_cast<uint32_t>(type));
    const int64_t row_bytes = *ir::StorageBytes(dt, row);
    std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes * (n / row)));
    for (int64_t r = 0; r < n / row; ++r) {
      absl::Status s = formats::Quantize(type, absl::MakeConstSpan(v.data() + r * row, row),
                                         absl::MakeSpan(bytes.data() + r * row_bytes, row_bytes));
      EXPECT_TRUE(s.ok()) << s;
    }
    EXPECT_TRUE(writer.AddTensorBytes(name, type, ne, bytes).ok());
    return m->AddWeightNe(name, dt, ne);
  }
  Value* State(ir::StateKind kind, const std::string& name, DType t, std::vector<int64_t> dims) {
    std::vector<Dim> d(dims.begin(), dims.end());
    return m->AddState(kind, name, TensorType(t, Shape(llvm::ArrayRef<Dim>(d))));
  }
  absl::Status Finish(std::vector<Value*> results) {
    if (!b->ok()) return b->status();
    b->Return(results);
    std::vector<TensorType> types;
    for (Value* r : results) types.push_back(r->type());
    fn->set_result_types(types);
    if (!b->ok()) return b->status();
    absl::Status v = ir::VerifyModule(*m);
    if (!v.ok()) return v;
    auto bytes = writer.WriteToBytes();
    if (!bytes.ok()) return bytes.status();
    auto f = gguf::GgufFile::FromBytes(*bytes, "optable.gguf");
    if (!f.ok()) return f.status();
    file = std::move(*f);
    return absl::OkStatus();
  }
  std::vector<HostTensor> Args(int64_t T) {
    std::vector<HostTensor> out;
    for (size_t i = 0; i < arg_dims.size(); ++i) {
      llvm::SmallVector<int64_t, 4> shape;
      int64_t n = 1;
      for (int64_t x : arg_dims[i]) {
        shape.push_back(x < 0 ? T : x);
        n *= shape.back();
      }
      if (arg_types[i] == DType::kI32) {
        std::vector<int32_t> v(n);
        for (auto& x : v) x = std::uniform_int_distribution<int32_t>(0, static_cast<int32_t>(id_range - 1))(rng);
        out.push_back(HostTensor::FromI32(v, shape));
      } else {
        std::vector<float> v(n);
        for (auto& x : v) x = U();
        out.push_back(HostTensor::FromF32(v, shape));
      }
    }
    return out;
  }
};

struct Row {
  std::string op, dtype;
  int64_t T = 0, bucket = 0;
  double nmse = 0, bound = 0;
  bool ok = false;
  std::string note;
};
std::vector<Row>& Table() {
  static std::vector<Row> rows;
  return rows;
}

// Element i widened to double: f32, i32, or the bits of a 16-bit or q8_0 KV cache.
double At(const HostTensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kI32:
      return t.i32()[i];
    case DType::kQ8_0: {  // ggml's block: f16 scale, 32 int8
      const auto* b = static_cast<const uint8_t*>(t.data()) + i / 32 * 34;
      uint16_t d;
      std::memcpy(&d, b, 2);
      return static_cast<int8_t>(b[2 + i % 32]) * static_cast<double>(formats::HalfToFloat(d));
    }
    case DType::kF16:
      return formats::HalfToFloat(static_cast<const uint16_t*>(t.data())[i]);
    case DType::kBF16:
      return formats::Bf16ToFloat(static_cast<const uint16_t*>(t.data())[i]);
    default:
      return t.f32()[i];
  }
}

double Nmse(const HostTensor& g, const HostTensor& c, double* max_abs, bool* nan) {
  double num = 0, den = 0;
  *nan = false;
  for (int64_t i = 0; i < c.numel(); ++i) {
    const double a = At(c, i);
    const double x = At(g, i);
    if (!std::isfinite(x)) *nan = true;
    num += (x - a) * (x - a);
    den += a * a;
    *max_abs = std::max(*max_abs, std::fabs(x - a));
  }
  return den > 0 ? num / den : num;
}

// --rows=I/N (this binary's own flag, read by main below): each TEST runs only its rows r with
// r % N == I, counted in the order it checks them, so a slow TEST (under compute-sanitizer's
// racecheck) splits over N processes that together run every row once. A row's inputs come from
// its own seed (op, dtype, T), so a row checks the same values in any shard.
struct RowShard {
  int64_t index = 0, count = 1;
  int64_t next = 0;  // rows of the running TEST seen so far
};
RowShard& Shard() {
  static RowShard s;
  return s;
}
// Whether this process runs the TEST's next row.
bool TakeRow() { return Shard().next++ % Shard().count == Shard().index; }

// --precompile-kernels=DIR (this binary's own flag; no GPU needed): every row selects its kernels
// for the sm_90 preset (the selection fields of the H100 and the H200) as the row's executor would,
// and compiles them with NVRTC into the disk cache DIR; nothing runs or is compared.
// bench/make_gpu_bundle.sh packs DIR and bench/gpu_suite.sh unpacks it where the table's executors
// look (OpTableTest::cache_dir()), so the device call loads the rows' cubins instead of compiling
// each row's modules in turn. A module whose key differs there (other NVRTC, other kernel sources,
// other target fields) is compiled on the device as before.
std::string& PrecompileDir() {
  static std::string dir;
  return dir;
}
bool Precompiling() { return !PrecompileDir().empty(); }
std::unique_ptr<codegen::KernelCompiler>& Precompiler() {
  static std::unique_ptr<codegen::KernelCompiler> compiler;
  return compiler;
}
int& PrecompileSkips() {
  static int skips = 0;
  return skips;
}

class OpTableTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (Precompiling()) {
      codegen::CompileOptions co;
      co.arch = 90;
      co.cache_dir = PrecompileDir();
      auto compiler = codegen::KernelCompiler::Create(co);
      if (!compiler.ok()) {
        skip_ = absl::StrCat("cannot precompile: ", compiler.status().message());
        return;
      }
      Precompiler() = std::move(*compiler);
      std::printf("  precompiling the table's kernels for the sm_90 preset into %s (NVRTC %s)\n",
                  PrecompileDir().c_str(), Precompiler()->nvrtc_version().c_str());
      return;
    }
    auto dev = cuda::CudaDevice::Open(0);
    if (!dev.ok())
      skip_ = std::string(dev.status().message());
    else
      std::printf("  device: %s\n", (*dev)->Describe().c_str());
  }
  static void TearDownTestSuite() {
    if (Precompiling() && Precompiler() != nullptr)
      std::printf("  precompiled: %s; %d rows not selectable for the preset\n",
                  Precompiler()->stats().ToString().c_str(), PrecompileSkips());
    if (Table().empty()) return;
    std::printf("\n%-18s %-14s %6s %6s %11s %9s  %s\n", "op", "dtype", "T", "bucket", "nmse", "bound", "result");
    int fails = 0;
    for (const Row& r : Table()) {
      std::printf("%-18s %-14s %6ld %6ld %11.3e %9.1e  %s%s\n", r.op.c_str(), r.dtype.c_str(), (long)r.T,
                  (long)r.bucket, r.nmse, r.bound, r.ok ? "ok" : "FAIL", r.note.empty() ? "" : ("  " + r.note).c_str());
      fails += !r.ok;
    }
    std::printf("op table: %zu cases, %d failed\n", Table().size(), fails);
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << "no GPU: " << skip_;
    Shard().next = 0;
  }

  // AttentionGeometries' table at T <= 520, or (long_prompts) its long-prompt rows at T = 1100.
  void CheckAttentionGeometries(bool long_prompts);

  // Precompiling: the modules the row's executor selects for T tokens, compiled into the cache. A
  // row the preset cannot select for is counted, not failed (its device run says why).
  static void PrecompileRow(const Harness& h, int64_t T, WeightMode weights) {
    static const kernels::cuda::Target target = *kernels::cuda::TargetPreset("sm_90");
    const ir::Function* fn = h.m->function("f");
    ASSERT_NE(fn, nullptr);
    bool symbolic = false;
    for (unsigned i = 0; i < fn->num_arguments(); ++i)
      for (const ir::Dim& d : fn->argument(i)->shape().dims()) symbolic |= d.IsSymbolic();
    const int64_t bucket = symbolic ? codegen::TokenBucket(T) : fn->attrs().I64Or("bucket", 1);
    auto selections = kernels::cuda::SelectionsOf(*fn, bucket, target, weights, /*use_records=*/false);
    if (!selections.ok()) {
      ++PrecompileSkips();
      return;
    }
    std::vector<codegen::ModuleSpec> modules;
    for (const kernels::cuda::OpSelection& s : *selections)
      for (const kernels::cuda::Launch& l : s.launches) modules.push_back(l.kernel.module);
    auto cubins = Precompiler()->CompileAll(modules);
    EXPECT_TRUE(cubins.ok()) << cubins.status();
  }

  // Builds with `build`, then runs `calls` calls of T tokens on both executors and compares
  // every result and every f32 state. `states_ok` false: states are not compared.
  void Check(const std::string& op, const std::string& dtype, int64_t T, double bound,
             const std::function<std::vector<Value*>(Harness&)>& build, int calls = 1, int64_t id_range = 0,
             WeightMode weights = WeightMode::kBlocks) {
    if (!TakeRow()) return;
    Harness h(static_cast<uint32_t>(std::hash<std::string>()(op + dtype) + T));
    h.id_range = id_range;
    // 2..8 rows: static shapes, the batched step's small buckets (T bucket 16 otherwise).
    if (T > 1 && T <= 8) h.static_t = T;
    std::vector<Value*> results = build(h);
    Row row{op, dtype, T, h.static_t > 0 ? T : codegen::TokenBucket(T), 0, bound, false, ""};
    absl::Status st = h.Finish(results);
    ASSERT_TRUE(st.ok()) << st;
    kernels::cuda::WriteSelectOptions(h.select, *h.m);
    runtime::ThreadGroup group(h.tp_size);
    CpuExecutorOptions co;
    if (h.tp_size > 1) {
      h.m->attrs().Set("tp", int64_t{h.tp_size});
      co.communicator = group.rank(h.tp_rank);
      row.dtype += absl::StrCat(" rank ", h.tp_rank, "/", h.tp_size);
    }
    if (Precompiling()) return PrecompileRow(h, T, weights);
    auto cpu = CpuExecutor::Create(*h.m, *h.file, co);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    CudaExecutorOptions o;
    o.poison_arena = true;
    o.progress = false;
    o.kernel_cache_dir = cache_dir();
    o.weights = weights;
    o.tp_rank = h.tp_rank;
    o.tp_size = h.tp_size;
    auto gpu = CudaExecutor::Create(*h.m, *h.file, o);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    if (h.prepare) {
      absl::Status ps = h.prepare(**cpu, **gpu);
      ASSERT_TRUE(ps.ok()) << ps;
    }
    double worst = 0, max_abs = 0;
    bool nan = false;
    for (int c = 0; c < calls; ++c) {
      std::vector<HostTensor> args = h.Args(T);
      if (h.fix_args) h.fix_args(T, c, args);
      auto rc = (*cpu)->Run("f", args);
      ASSERT_TRUE(rc.ok()) << rc.status();
      auto rg = (*gpu)->Run("f", args);
      ASSERT_TRUE(rg.ok()) << op << " " << dtype << " T=" << T << ": " << rg.status();
      ASSERT_EQ(rc->size(), rg->size());
      for (size_t i = 0; i < rc->size(); ++i) {
        ASSERT_EQ((*rc)[i].shape(), (*rg)[i].shape());
        bool n = false;
        worst = std::max(worst, Nmse((*rg)[i], (*rc)[i], &max_abs, &n));
        nan |= n;
      }
    }
    for (const auto& s : h.m->states()) {
      if (s->dtype() == DType::kI64) continue;  // the rng state: not an op's result
      auto g = (*gpu)->ReadState(s->name());
      ASSERT_TRUE(g.ok()) << g.status();
      const HostTensor* c = (*cpu)->state(s->name());
      bool n = false;
      worst = std::max(worst, Nmse(*g, *c, &max_abs, &n));
      nan |= n;
    }
    row.nmse = worst;
    row.ok = !nan && worst <= bound;
    if (nan) row.note = "non-finite output (unwritten element?)";
    Table().push_back(row);
    EXPECT_FALSE(nan) << op << " " << dtype << " T=" << T;
    EXPECT_LE(worst, bound) << op << " " << dtype << " T=" << T << " max|d| " << max_abs;
  }
  static std::string cache_dir() { return ::testing::TempDir() + "/memra-optable-cache"; }
  // One precision of the ChunkedScanGridLaw test.
  void ChunkedScanGridLaw(const std::string& precision);
  static std::string skip_;
};
std::string OpTableTest::skip_;

const int64_t kTs[] = {1, 13, 77, 520};
// A step over several sequences (ir/Ops.def, "sequences"): kSlots slots, each with its own
// shuffled KV blocks of a kPool-block pool; per call the rows go to a few entries in an order that
// differs from the slots' (call 0: slots 2, 0, 3; call 1: every slot, decode-sized entries first),
// about a fifth of the bucket left as padding rows.
constexpr int64_t kSlots = 4, kMaxBlocks = 16, kPool = 80, kKvBlock = 64;

// The batch arguments tok_seq [T], seq_slot [S], seq_start [S+1] at argument indices first..first+2.
void SeqBatchArgs(int64_t T, int call, std::vector<HostTensor>& args, size_t first) {
  const int64_t used = T >= 5 ? T - T / 5 : T;
  std::vector<int> slots = call == 0 ? std::vector<int>{2, 0, 3} : std::vector<int>{1, 3, 0, 2};
  std::vector<int32_t> tok_seq(T, -1), seq_slot(kSlots, -1), seq_start(kSlots + 1, 0);
  int64_t r = 0;
  for (size_t b = 0; b < slots.size(); ++b) {
    seq_start[b] = static_cast<int32_t>(r);
    // call 1: the first two entries one row each (decodes), the rest split the remainder.
    int64_t n = call == 1 && b < 2 ? 1 : (used - r) / static_cast<int64_t>(slots.size() - b);
    n = std::min<int64_t>(std::max<int64_t>(n, 0), used - r);
    if (b + 1 == slots.size()) n = used - r;
    if (n > 0) seq_slot[b] = slots[b];
    for (int64_t i = 0; i < n; ++i) tok_seq[r++] = static_cast<int32_t>(b);
  }
  for (size_t b = slots.size(); b <= static_cast<size_t>(kSlots); ++b) seq_start[b] = static_cast<int32_t>(r);
  args[first] = HostTensor::FromI32(tok_seq, {T});
  args[first + 1] = HostTensor::FromI32(seq_slot, {kSlots});
  args[first + 2] = HostTensor::FromI32(seq_start, {kSlots + 1});
}

// The module attributes the verifier checks for a module lowered with slots.
void SeqModule(Harness& h) {
  h.m->attrs().Set("slots", kSlots);
  h.m->attrs().Set("kv_block", kKvBlock);
  h.m->attrs().Set("n_ctx", kMaxBlocks * kKvBlock);
}

// The block table: slot s gets blocks 4s+1, ... of a shuffled pool (never 0, not contiguous).
absl::Status WriteBlockTable(CpuExecutor& cpu, CudaExecutor& gpu) {
  std::vector<int32_t> pool(kPool);
  for (int i = 0; i < kPool; ++i) pool[i] = (i * 37 + 11) % kPool;
  std::vector<int32_t> table(kSlots * kMaxBlocks, -1);
  for (int64_t s = 0; s < kSlots; ++s)
    for (int64_t j = 0; j < kMaxBlocks; ++j) table[s * kMaxBlocks + j] = pool[s * kMaxBlocks + j];
  const int64_t bytes = static_cast<int64_t>(table.size() * sizeof(int32_t));
  absl::Status st = cpu.WriteState("kv_blocks", 0, table.data(), bytes);
  if (!st.ok()) return st;
  return gpu.WriteState("kv_blocks", 0, table.data(), bytes);
}

// Token counts: decode (1), the batched step's small buckets (2, 5, 8: static shapes, as
// @step_tN), prefill buckets.
const int64_t kBlockTs[] = {1, 2, 5, 8, 13, 77, 520};
constexpr double kF32Bound = 1e-9;
// A product through bf16 weights (a block format dequantized to bf16, the activations cast to
// bf16) against the CPU's f32 product of the exact values.
constexpr double kBf16Bound = 5e-5;
// T <= 8 on blocks runs GemvQuant.cu, which quantizes x to int8 per 32 values (as llama.cpp's
// mmvq does) and takes dp4a products: ~2-9e-5 from the exact product on these inputs.
constexpr double kQ8ActivationBound = 3e-4;
double BlockProductBound(int64_t T, WeightMode w) {
  return w == WeightMode::kBlocks && T <= 8 ? kQ8ActivationBound : kBf16Bound;
}

GgmlType GgmlOf(DType d) { return static_cast<GgmlType>(ir::InfoOf(d).ggml_id); }
std::string Label(DType d, WeightMode w) {
  return w == WeightMode::kBlocks ? std::string(ir::DTypeName(d)) : absl::StrCat(ir::DTypeName(d), "/bf16");
}

#define FOR_T for (int64_t T : kTs)

// Tables in blocks: the rows dequantized to f32 on the device (Dequant.cu dequant_rows_f32), exactly
// the CPU's values (bound 0); with --weights bf16 a bf16 copy (rounded: 1e-5).
TEST_F(OpTableTest, Embed) {
  auto embed = [&](const std::string& label, GgmlType t, double bound, WeightMode w) {
    FOR_T Check(
        "embed", label, T, bound,
        [&](Harness& h) {
          Value* ids = h.Arg("ids", {-1}, DType::kI32);
          return std::vector<Value*>{h.b->Embed(ids, h.Weight("tab", t, {512, 1000}))};
        },
        1, 1000, w);
  };
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16})
    embed(std::string(formats::GgmlTypeName(t)), t, 0, WeightMode::kBlocks);
  for (DType d : kernels::cuda::GpuBlockFormats())
    embed(Label(d, WeightMode::kBlocks), GgmlOf(d), 0, WeightMode::kBlocks);
  for (DType d : {DType::kQ8_0, DType::kQ4_K}) embed(Label(d, WeightMode::kBf16), GgmlOf(d), 1e-5, WeightMode::kBf16);
}

TEST_F(OpTableTest, Norms) {
  FOR_T Check("rms_norm", "f32", T, kF32Bound, [](Harness& h) {
    return std::vector<Value*>{h.b->RmsNorm(h.Arg("x", {-1, 1024}), h.Weight("w", GgmlType::kF32, {1024}), 1e-6)};
  });
  FOR_T Check("rms_norm/no-weight", "f32", T, kF32Bound, [](Harness& h) {
    return std::vector<Value*>{h.b->RmsNorm(h.Arg("x", {-1, 8, 256}), nullptr, 1e-6)};
  });
  FOR_T Check("rms_norm/head", "f32", T, kF32Bound, [](Harness& h) {
    return std::vector<Value*>{h.b->RmsNorm(h.Arg("x", {-1, 8, 256}), h.Weight("w", GgmlType::kF32, {256}), 1e-6)};
  });
  FOR_T Check("l2_norm", "f32", T, kF32Bound, [](Harness& h) {
    return std::vector<Value*>{h.b->L2Norm(h.Arg("x", {-1, 16, 128}), 1e-6)};
  });
  FOR_T Check("gated_rms_norm", "f32", T, kF32Bound, [](Harness& h) {
    return std::vector<Value*>{h.b->GatedRmsNorm(h.Arg("x", {-1, 32, 128}), h.Arg("z", {-1, 32, 128}),
                                                 h.Weight("w", GgmlType::kF32, {128}), 1e-6)};
  });
  FOR_T Check("add_rms_norm", "f32", T, kF32Bound, [](Harness& h) {
    auto [s, y] =
        h.b->AddRmsNorm(h.Arg("a", {-1, 1024}), h.Arg("b", {-1, 1024}), h.Weight("w", GgmlType::kF32, {1024}), 1e-6);
    return std::vector<Value*>{s, y};
  });
}

TEST_F(OpTableTest, Elementwise) {
  FOR_T {
    Check("add", "f32", T, 0, [](Harness& h) {
      return std::vector<Value*>{h.b->Add(h.Arg("a", {-1, 300}), h.Arg("b", {-1, 300}))};
    });
    Check("add/bcast", "f32", T, 0, [](Harness& h) {
      return std::vector<Value*>{h.b->Add(h.Arg("a", {-1, 4, 300}), h.Arg("b", {300}))};
    });
    Check("mul", "f32", T, 0, [](Harness& h) {
      return std::vector<Value*>{h.b->Mul(h.Arg("a", {-1, 300}), h.Arg("b", {-1, 300}))};
    });
    Check("scale", "f32", T, 0, [](Harness& h) {
      return std::vector<Value*>{h.b->Scale(h.Arg("x", {-1, 300}), 0.37)};
    });
    Check("sigmoid", "f32", T, 1e-12, [](Harness& h) {
      return std::vector<Value*>{h.b->Sigmoid(h.Arg("x", {-1, 300}))};
    });
    Check("silu", "f32", T, 1e-12, [](Harness& h) { return std::vector<Value*>{h.b->Silu(h.Arg("x", {-1, 300}))}; });
    Check("softplus", "f32", T, 1e-12, [](Harness& h) {
      return std::vector<Value*>{h.b->Softplus(h.Arg("x", {-1, 300}))};
    });
    Check("exp", "f32", T, 1e-12, [](Harness& h) { return std::vector<Value*>{h.b->Exp(h.Arg("x", {-1, 300}))}; });
    Check("gelu", "f32", T, 1e-12, [](Harness& h) { return std::vector<Value*>{h.b->Gelu(h.Arg("x", {-1, 300}))}; });
    Check("tanh", "f32", T, 1e-12, [](Harness& h) { return std::vector<Value*>{h.b->Tanh(h.Arg("x", {-1, 300}))}; });
    Check("swiglu", "f32", T, 1e-12, [](Harness& h) {
      return std::vector<Value*>{h.b->Swiglu(h.Arg("g", {-1, 300}), h.Arg("u", {-1, 300}))};
    });
    Check("softmax", "f32", T, 1e-10, [](Harness& h) {
      return std::vector<Value*>{h.b->Softmax(h.Arg("x", {-1, 3000}))};
    });
    Check("argmax", "f32", T, 0, [](Harness& h) { return std::vector<Value*>{h.b->Argmax(h.Arg("x", {-1, 5000}))}; });
    // @step's greedy picks: -1 for a row holding a NaN (every third row) or an inf (the next).
    Check("argmax{nonfinite}", "f32", T, 0, [](Harness& h) {
      h.fix_args = [](int64_t rows, int, std::vector<HostTensor>& args) {
        float* x = args[0].f32();
        for (int64_t t = 0; t < rows; ++t)
          if (t % 3 != 0) x[t * 5000 + (t * 37) % 5000] = t % 3 == 1 ? NAN : INFINITY;
      };
      return std::vector<Value*>{
          h.b->Build1(ir::OpKind::kArgmax, {h.Arg("x", {-1, 5000})}, {{"nonfinite", int64_t{-1}}})};
    });
  }
}

// The device sampler against the CPU's SampleRow: the same id exactly (integer weight sums), per
// row a different stage of the chain: greedy, temperature alone, top-k, top-p, min-p, everything
// with penalties (a repeated id among them), near-greedy, and a row with a NaN (-1). Logits are
// spread (x 8) with a few exact ties at the top, on a small vocabulary and the 9B's.
TEST_F(OpTableTest, Sample) {
  constexpr int64_t kP = 16;
  for (int64_t V : {int64_t{5000}, int64_t{248320}})
    for (int64_t T : {int64_t{1}, int64_t{13}, int64_t{77}})
      Check(
          absl::StrCat("sample V=", V), "f32", T, 0,
          [&](Harness& h) {
            h.fix_args = [V](int64_t rows, int call, std::vector<HostTensor>& args) {
              std::mt19937 r(static_cast<uint32_t>(rows * 7 + call));
              std::uniform_real_distribution<float> uni(0.0f, 1.0f);
              float* x = args[0].f32();
              for (int64_t i = 0; i < rows * V; ++i) x[i] *= 8.0f;
              float* p = args[1].f32();
              int32_t* q = args[2].i32();
              for (int64_t t = 0; t < rows; ++t) {
                float* pr = p + t * 8;
                int32_t* qr = q + t * 2 * kP;
                for (int j = 0; j < 2 * kP; ++j) qr[j] = -1;
                float* xr = x + t * V;
                if (t % 4 == 1) xr[(t * 101) % V] = xr[(t * 103) % V] = 8.5f;  // tied top logits
                const int mode = static_cast<int>((t + call) % 8);
                pr[0] = mode == 0 ? 0.0f : mode == 6 ? 0.01f : mode == 7 ? 2.0f : mode == 2 ? 0.7f : 1.0f;
                pr[1] = mode == 2 ? 40.0f : mode == 5 ? 100.0f : 0.0f;
                pr[2] = mode == 3 ? 0.9f : mode == 5 ? 0.95f : mode == 7 ? 0.5f : 1.0f;
                pr[3] = mode == 4 ? std::log(0.05f) : mode == 5 ? std::log(0.02f) : -INFINITY;
                pr[4] = uni(r);
                pr[5] = mode == 5 || mode == 7 ? 1.3f : mode == 0 ? 1.5f : 1.0f;
                pr[6] = mode == 5 ? 0.2f : 0.0f;
                pr[7] = mode == 5 || mode == 7 ? 0.5f : 0.0f;
                if (mode == 5 || mode == 7 || mode == 0)
                  for (int j = 0; j < kP - 2; ++j) {
                    qr[j] = j < 3 ? (t * 101) % static_cast<int32_t>(V) : static_cast<int32_t>(r() % V);
                    qr[kP + j] = 1 + j % 3;
                  }
                if (mode == 7 && t % 2 == 1) xr[(t * 37) % V] = NAN;
              }
            };
            // One statement per argument: fix_args reads them by position (x, p, q).
            Value* x = h.Arg("x", {-1, V});
            Value* p = h.Arg("p", {-1, 8});
            Value* q = h.Arg("q", {-1, 2 * kP}, DType::kI32);
            return std::vector<Value*>{h.b->Sample(x, p, q)};
          },
          /*calls=*/2, /*id_range=*/1);
}

TEST_F(OpTableTest, MatMul) {
  const std::pair<GgmlType, double> types[] = {
      {GgmlType::kF32, 1e-10}, {GgmlType::kF16, 1e-5}, {GgmlType::kBF16, 5e-5}};
  for (auto [t, bound] : types)
    FOR_T Check("matmul", std::string(formats::GgmlTypeName(t)), T, bound, [&](Harness& h) {
      return std::vector<Value*>{h.b->MatMul(h.Arg("x", {-1, 1024}), h.Weight("w", t, {1024, 768}, -0.05f, 0.05f))};
    });
}

// The three products on 16-bit weights with row counts that are not multiples of a warp's or a
// tile's rows: T = 1 runs Gemv.cu (f32 x, f32 sums: the CPU's numbers to rounding, so the tight
// bound also shows that path was taken), more tokens cuBLASLt (x cast to 16 bits).
TEST_F(OpTableTest, SixteenBitProducts) {
  for (GgmlType t : {GgmlType::kF16, GgmlType::kBF16})
    for (int64_t T : kBlockTs) {
      const double bound = T == 1 ? 1e-9 : (t == GgmlType::kF16 ? 1e-5 : 5e-5);
      const std::string label(formats::GgmlTypeName(t));
      Check("matmul", label, T, bound, [&](Harness& h) {
        return std::vector<Value*>{h.b->MatMul(h.Arg("x", {-1, 1024}), h.Weight("w", t, {1024, 766}, -0.05f, 0.05f))};
      });
      Check("matmul_group", label, T, bound, [&](Harness& h) {
        Value* x = h.Arg("x", {-1, 1024});
        auto r =
            h.b->Build(ir::OpKind::kMatMulGroup,
                       {x, h.Weight("wa", t, {1024, 640}, -0.05f, 0.05f), h.Weight("wb", t, {1024, 250}, -0.05f, 0.05f),
                        h.Weight("wc", t, {1024, 30}, -0.05f, 0.05f), h.Weight("wd", t, {1024, 32}, -0.05f, 0.05f)});
        return std::vector<Value*>(r.begin(), r.end());
      });
      Check("matmul_swiglu", label, T, bound, [&](Harness& h) {
        Value* x = h.Arg("x", {-1, 1024});
        return std::vector<Value*>{h.b->Build1(
            ir::OpKind::kMatMulSwiglu,
            {x, h.Weight("wg", t, {1024, 767}, -0.05f, 0.05f), h.Weight("wu", t, {1024, 767}, -0.05f, 0.05f)})};
      });
    }
}

// The one-token gemv at the decode graph's shapes and around them: rows that fill blocks unevenly,
// fewer rows than a wave, short rows (K = 1,024: four pieces a lane), long rows (K = 12,288), f32 /
// f16 / bf16 weights.
TEST_F(OpTableTest, DecodeGemvShapes) {
  struct Shape2 {
    int64_t rows, k;
    GgmlType t;
  };
  for (const Shape2& g :
       {Shape2{766, 1024, GgmlType::kBF16}, Shape2{4096, 4096, GgmlType::kBF16}, Shape2{33, 4096, GgmlType::kBF16},
        Shape2{1000, 12288, GgmlType::kBF16}, Shape2{2500, 2048, GgmlType::kF16}, Shape2{300, 512, GgmlType::kF32}})
    Check("matmul", absl::StrCat(formats::GgmlTypeName(g.t), " ", g.rows, "x", g.k), 1, 1e-9, [&](Harness& h) {
      return std::vector<Value*>{h.b->MatMul(h.Arg("x", {-1, g.k}), h.Weight("w", g.t, {g.k, g.rows}, -0.05f, 0.05f))};
    });
  // select-kernels{gemv-warp-bytes}: 2 or 4 short rows a warp (the 0.8B's head: 2 KB rows), row
  // counts that leave a warp's last rows past the matrix.
  for (const Shape2& g :
       {Shape2{6145, 1024, GgmlType::kBF16}, Shape2{2499, 2048, GgmlType::kF16}, Shape2{1001, 512, GgmlType::kF32}})
    for (int bytes : {4096, 8192})
      Check("matmul", absl::StrCat(formats::GgmlTypeName(g.t), " ", g.rows, "x", g.k, " warp-bytes ", bytes), 1, 1e-9,
            [&](Harness& h) {
              h.select.gemv_warp_bytes = bytes;
              return std::vector<Value*>{
                  h.b->MatMul(h.Arg("x", {-1, g.k}), h.Weight("w", g.t, {g.k, g.rows}, -0.05f, 0.05f))};
            });
  // select-kernels{gemv-splitk-max-k}: long rows split over two warps a row (the 9B's down).
  for (int64_t rows : {4096, 1001})
    Check("matmul", absl::StrCat("bf16 ", rows, "x12288 splitk"), 1, 1e-9, [&](Harness& h) {
      h.select.gemv_splitk_max_k = 12288;
      return std::vector<Value*>{
          h.b->MatMul(h.Arg("x", {-1, 12288}), h.Weight("w", GgmlType::kBF16, {12288, rows}, -0.05f, 0.05f))};
    });
  // The group's rows (the delta-net in-projection's shape: a warp's rows straddle two weights).
  for (GgmlType t : {GgmlType::kBF16, GgmlType::kF32})
    for (int bytes : {4096, 8192})
      Check("matmul_group", absl::StrCat(formats::GgmlTypeName(t), " warp-bytes ", bytes), 1, 1e-9, [&](Harness& h) {
        h.select.gemv_warp_bytes = bytes;
        Value* x = h.Arg("x", {-1, 1024});
        auto r = h.b->Build(
            ir::OpKind::kMatMulGroup,
            {x, h.Weight("wa", t, {1024, 6145}, -0.05f, 0.05f), h.Weight("wb", t, {1024, 2047}, -0.05f, 0.05f),
             h.Weight("wc", t, {1024, 17}, -0.05f, 0.05f), h.Weight("wd", t, {1024, 16}, -0.05f, 0.05f)});
        return std::vector<Value*>(r.begin(), r.end());
      });
  // select-kernels{gemv-evict-first}: the weight loads with an L2 evict_first policy (a hint: the
  // same sums), alone and beside the L2 prefetch: gemv (4 rows a warp), gemv_splitk, gemv_group,
  // gemv_swiglu.
  for (int64_t l2 : {int64_t{0}, int64_t{1} << 20}) {
    const std::string tag = absl::StrCat(" evict-first", l2 ? " l2-prefetch 1 MiB" : "");
    for (const auto& [rows, k] : {std::pair<int64_t, int64_t>{6145, 1024}, {4096, 4096}})
      Check("matmul", absl::StrCat("bf16 ", rows, "x", k, tag), 1, 1e-9, [&](Harness& h) {
        h.select.gemv_evict_first = true;
        h.select.l2_prefetch_bytes = static_cast<int>(l2);
        return std::vector<Value*>{
            h.b->MatMul(h.Arg("x", {-1, k}), h.Weight("w", GgmlType::kBF16, {k, rows}, -0.05f, 0.05f))};
      });
    Check("matmul_group", absl::StrCat("bf16", tag), 1, 1e-9, [&](Harness& h) {
      h.select.gemv_evict_first = true;
      h.select.l2_prefetch_bytes = static_cast<int>(l2);
      Value* x = h.Arg("x", {-1, 1024});
      auto r = h.b->Build(ir::OpKind::kMatMulGroup, {x, h.Weight("wa", GgmlType::kBF16, {1024, 6145}, -0.05f, 0.05f),
                                                     h.Weight("wb", GgmlType::kBF16, {1024, 17}, -0.05f, 0.05f)});
      return std::vector<Value*>(r.begin(), r.end());
    });
    Check("matmul_swiglu", absl::StrCat("bf16", tag), 1, 1e-9, [&](Harness& h) {
      h.select.gemv_evict_first = true;
      h.select.l2_prefetch_bytes = static_cast<int>(l2);
      Value* x = h.Arg("x", {-1, 1024});
      return std::vector<Value*>{
          h.b->Build1(ir::OpKind::kMatMulSwiglu, {x, h.Weight("wg", GgmlType::kBF16, {1024, 3584}, -0.05f, 0.05f),
                                                  h.Weight("wu", GgmlType::kBF16, {1024, 3584}, -0.05f, 0.05f)})};
    });
  }
  // The dense block products' selection options, each on the plain product (20,000 rows: 5,000 tiles
  // of 4, the last partial) of the formats it touches and on the q4_K SwiGLU; the sums stay within
  // the q8 bound:
  //  - select-kernels{gemv-q-blocks-per-sm=6}: built for 6 resident blocks an SM (registers capped:
  //    q4_K's 115 -> 80, a 16-byte spill) and, for the K-quants, a grid of 6 an SM whose warps loop
  //    over more tiles than it holds; q8_0's grid is not capped (the bound only);
  //  - {gemv-q-x-early}: a chunk's q8 x loaded before the wait for its weights (GQ_XPRE; the same
  //    sums as without);
  //  - {gemv-q-pair-dot=false}: q4_K / q5_K run by run, the nibbles shifted (the form before session
  //    42; the default dots a sub-block's two runs as one).
  struct BlockOption {
    const char* tag;
    std::vector<GgmlType> formats;
    std::function<void(kernels::cuda::SelectOptions&)> set;
  };
  const BlockOption block_options[] = {
      {"blocks-per-sm 6",
       {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0},
       [](kernels::cuda::SelectOptions& o) { o.gemv_q_blocks_per_sm = 6; }},
      {"x-early",
       {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0},
       [](kernels::cuda::SelectOptions& o) { o.gemv_q_x_early = true; }},
      {"runs one by one",
       {GgmlType::kQ4_K, GgmlType::kQ5_K},
       [](kernels::cuda::SelectOptions& o) { o.gemv_q_pair_dot = false; }},
  };
  for (const BlockOption& bo : block_options) {
    for (const GgmlType t : bo.formats)
      Check("matmul", absl::StrCat(formats::GgmlTypeName(t), " 20000x1024 ", bo.tag), 1, kQ8ActivationBound,
            [&](Harness& h) {
              bo.set(h.select);
              return std::vector<Value*>{
                  h.b->MatMul(h.Arg("x", {-1, 1024}), h.Weight("w", t, {1024, 20000}, -0.05f, 0.05f))};
            });
    Check("matmul_swiglu", absl::StrCat("q4_K 2x7000x1024 ", bo.tag), 1, kQ8ActivationBound, [&](Harness& h) {
      bo.set(h.select);
      Value* x = h.Arg("x", {-1, 1024});
      return std::vector<Value*>{
          h.b->Build1(ir::OpKind::kMatMulSwiglu, {x, h.Weight("wg", GgmlType::kQ4_K, {1024, 7000}, -0.05f, 0.05f),
                                                  h.Weight("wu", GgmlType::kQ4_K, {1024, 7000}, -0.05f, 0.05f)})};
    });
  }
  // select-kernels{l2-prefetch-bytes}: the weights' first bytes asked of the L2 before the wait (a
  // hint: the sums are the same). Budgets below a weight's bytes and not a multiple of 16, and past
  // them (a group's budget going on to its next weights; 64 MiB is capped at the L2).
  for (int64_t bytes : {int64_t{100000}, int64_t{64} << 20}) {
    const std::string tag = absl::StrCat(" l2-prefetch ", bytes);
    // gemv (4 rows a warp), gemv on f32, gemv_splitk, gemv_q (q4_K: x as q8, its bound).
    struct L2Row {
      GgmlType t;
      int64_t rows, k;
      double bound;
    };
    for (const L2Row& g :
         {L2Row{GgmlType::kBF16, 6145, 1024, 1e-9}, L2Row{GgmlType::kF32, 1001, 512, 1e-9},
          L2Row{GgmlType::kBF16, 4096, 4096, 1e-9}, L2Row{GgmlType::kQ4_K, 4096, 1024, kQ8ActivationBound}})
      Check("matmul", absl::StrCat(formats::GgmlTypeName(g.t), " ", g.rows, "x", g.k, tag), 1, g.bound,
            [&](Harness& h) {
              h.select.l2_prefetch_bytes = static_cast<int>(bytes);
              return std::vector<Value*>{
                  h.b->MatMul(h.Arg("x", {-1, g.k}), h.Weight("w", g.t, {g.k, g.rows}, -0.05f, 0.05f))};
            });
    Check("matmul_group", absl::StrCat("bf16", tag), 1, 1e-9, [&](Harness& h) {
      h.select.l2_prefetch_bytes = static_cast<int>(bytes);
      Value* x = h.Arg("x", {-1, 1024});
      auto r = h.b->Build(ir::OpKind::kMatMulGroup, {x, h.Weight("wa", GgmlType::kBF16, {1024, 6145}, -0.05f, 0.05f),
                                                     h.Weight("wb", GgmlType::kBF16, {1024, 2047}, -0.05f, 0.05f),
                                                     h.Weight("wc", GgmlType::kBF16, {1024, 17}, -0.05f, 0.05f)});
      return std::vector<Value*>(r.begin(), r.end());
    });
    for (GgmlType t : {GgmlType::kBF16, GgmlType::kQ4_K})  // gemv_swiglu, gemv_q_swiglu
      Check("matmul_swiglu", absl::StrCat(formats::GgmlTypeName(t), tag), 1,
            t == GgmlType::kBF16 ? 1e-9 : kQ8ActivationBound, [&](Harness& h) {
              h.select.l2_prefetch_bytes = static_cast<int>(bytes);
              Value* x = h.Arg("x", {-1, 1024});
              return std::vector<Value*>{h.b->Build1(
                  ir::OpKind::kMatMulSwiglu,
                  {x, h.Weight("wg", t, {1024, 3584}, -0.05f, 0.05f), h.Weight("wu", t, {1024, 3584}, -0.05f, 0.05f)})};
            });
  }
}

// The three product ops on every format the GPU reads as blocks (quantized by the reference
// quantizers: every one of these formats has one), at every token count from decode to prefill:
// dequantized into the workspace + bf16 cuBLASLt (until the per-format GEMVs take T <= 8); and
// with --weights bf16 (the copy dequantized at upload) for two formats, so that path stays checked.
void BlockProducts(DType d, WeightMode w, const int64_t* Ts, size_t n_ts,
                   const std::function<void(const std::string&, const std::string&, int64_t, double,
                                            const std::function<std::vector<Value*>(Harness&)>&, WeightMode)>& check) {
  const GgmlType g = GgmlOf(d);
  const std::string label = Label(d, w);
  for (size_t i = 0; i < n_ts; ++i) {
    const int64_t T = Ts[i];
    check(
        "matmul", label, T, BlockProductBound(T, w),
        [&](Harness& h) {
          return std::vector<Value*>{h.b->MatMul(h.Arg("x", {-1, 1024}), h.Weight("w", g, {1024, 768}, -0.05f, 0.05f))};
        },
        w);
    // The delta-net in-projection's shape: a large, a medium and two 32-row weights.
    check(
        "matmul_group", label, T, BlockProductBound(T, w),
        [&](Harness& h) {
          Value* x = h.Arg("x", {-1, 1024});
          auto r = h.b->Build(
              ir::OpKind::kMatMulGroup,
              {x, h.Weight("wa", g, {1024, 640}, -0.05f, 0.05f), h.Weight("wb", g, {1024, 256}, -0.05f, 0.05f),
               h.Weight("wc", g, {1024, 32}, -0.05f, 0.05f), h.Weight("wd", g, {1024, 32}, -0.05f, 0.05f)});
          return std::vector<Value*>(r.begin(), r.end());
        },
        w);
    check(
        "matmul_swiglu", label, T, BlockProductBound(T, w),
        [&](Harness& h) {
          Value* x = h.Arg("x", {-1, 1024});
          return std::vector<Value*>{h.b->Build1(
              ir::OpKind::kMatMulSwiglu,
              {x, h.Weight("wg", g, {1024, 768}, -0.05f, 0.05f), h.Weight("wu", g, {1024, 768}, -0.05f, 0.05f)})};
        },
        w);
  }
}

TEST_F(OpTableTest, BlockFormats) {
  auto check = [this](const std::string& op, const std::string& dtype, int64_t T, double bound,
                      const std::function<std::vector<Value*>(Harness&)>& build,
                      WeightMode w) { Check(op, dtype, T, bound, build, 1, 0, w); };
  for (DType d : kernels::cuda::GpuBlockFormats())
    BlockProducts(d, WeightMode::kBlocks, kBlockTs, std::size(kBlockTs), check);
  for (DType d : {DType::kQ8_0, DType::kQ4_K}) BlockProducts(d, WeightMode::kBf16, kTs, std::size(kTs), check);
  // A group mixing blocks of two formats and a bf16 weight: one dequantization per weight in blocks.
  for (int64_t T : kBlockTs)
    Check("matmul_group", "q8_0+q4_K+bf16", T, kBf16Bound, [&](Harness& h) {
      Value* x = h.Arg("x", {-1, 1024});
      auto r = h.b->Build(ir::OpKind::kMatMulGroup, {x, h.Weight("wa", GgmlType::kQ8_0, {1024, 256}, -0.05f, 0.05f),
                                                     h.Weight("wb", GgmlType::kQ4_K, {1024, 64}, -0.05f, 0.05f),
                                                     h.Weight("wc", GgmlType::kBF16, {1024, 96}, -0.05f, 0.05f)});
      return std::vector<Value*>(r.begin(), r.end());
    });
}

// A type the GPU cannot read as blocks (nvfp4: no Dequant.cu decoder) is one error before any
// upload naming the tensor, its type and --weights bf16; with --weights bf16 it runs from the copy.
TEST_F(OpTableTest, BlocksWithoutAGpuLayout) {
  if (TakeRow() && !Precompiling()) {
    Harness h(7);
    std::vector<Value*> y{
        h.b->MatMul(h.Arg("x", {-1, 256}), h.Weight("w.nv", GgmlType::kNVFP4, {256, 64}, -0.05f, 0.05f))};
    ASSERT_TRUE(h.Finish(y).ok());
    CudaExecutorOptions o;
    o.progress = false;
    o.kernel_cache_dir = cache_dir();
    auto gpu = CudaExecutor::Create(*h.m, *h.file, o);
    ASSERT_FALSE(gpu.ok());
    const std::string msg(gpu.status().message());
    EXPECT_NE(msg.find("tensor \"w.nv\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("type nvfp4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--weights bf16"), std::string::npos) << msg;
  }
  FOR_T Check(
      "matmul", "nvfp4/bf16", T, kBf16Bound,
      [&](Harness& hh) {
        return std::vector<Value*>{
            hh.b->MatMul(hh.Arg("x", {-1, 256}), hh.Weight("w", GgmlType::kNVFP4, {256, 64}, -0.05f, 0.05f))};
      },
      1, 0, WeightMode::kBf16);
}

// Attention's bound per bucket at precision "bf16": decode (split-KV, f32) is exact to rounding;
// prefill runs on FlashAttention.cu's tensor cores with Q, K, V and the probabilities rounded to
// bf16 (f32 accumulation and softmax), measured at nmse ~5e-6 against the f32 CPU executor.
double AttentionBound(int64_t T) { return T == 1 ? 1e-9 : 5e-5; }

TEST_F(OpTableTest, AttentionPieces) {
  FOR_T Check("q_gate_split", "f32", T, 0, [](Harness& h) {
    auto [q, g] = h.b->QGateSplit(h.Arg("qg", {-1, 8 * 2 * 256}), 8, 256);
    return std::vector<Value*>{q, g};
  });
  // rope at positions from the counter: two calls (positions 0.. and T..).
  FOR_T Check(
      "rope", "f32", T, 1e-9,
      [](Harness& h) {
        Value* x = h.Arg("x", {-1, 8, 256});
        Value* pos = h.b->Positions(h.State(ir::StateKind::kPosition, "pos", DType::kI32, {}), x);
        Value* y = h.b->Rope(x, pos, 64, 1e7);
        h.b->AdvancePositions(h.m->state("pos"), x);
        return std::vector<Value*>{y};
      },
      2);
  // kv_append + causal GQA attention over the cache (the 9B's shape: 16 q heads, 4 kv heads,
  // head_dim 256); the second call attends over the first call's keys too. f32 precision: the
  // CUDA-core kernels (the tensor-core ones: AttentionGeometries).
  FOR_T Check(
      "attention", "f32", T, 1e-9,
      [](Harness& h) {
        Value* q = h.Arg("q", {-1, 16, 256});
        Value* k = h.Arg("k", {-1, 4, 256});
        Value* v = h.Arg("v", {-1, 4, 256});
        Value* ctr = h.State(ir::StateKind::kPosition, "pos", DType::kI32, {});
        Value* kc = h.State(ir::StateKind::kKv, "k_cache", DType::kF32, {2048, 4, 256});
        Value* vc = h.State(ir::StateKind::kKv, "v_cache", DType::kF32, {2048, 4, 256});
        Value* pos = h.b->Positions(ctr, q);
        h.b->KvAppend(k, v, kc, vc, pos);
        Value* o = h.b->Attention(q, kc, vc, pos, 1.0 / 16.0);
        h.b->AdvancePositions(ctr, q);
        return std::vector<Value*>{o};
      },
      2);
  // kv_append with the values' weightless RMS norm (fuse-kv-append-norm's v_norm_eps, Gemma 4's V
  // norm) then attention over the cache: heads of 256 (kv_append_vnorm, a warp a row) and 1024 (the
  // fallback: rms_norm into the scratch, then kv_append).
  for (int64_t d : {256, 1024}) {
    FOR_T Check(
        "kv_append v_norm", absl::StrCat("f32 d", d), T, 1e-9,
        [d](Harness& h) {
          Value* q = h.Arg("q", {-1, 4, d});
          Value* k = h.Arg("k", {-1, 2, d});
          Value* v = h.Arg("v", {-1, 2, d});
          Value* ctr = h.State(ir::StateKind::kPosition, "pos", DType::kI32, {});
          Value* kc = h.State(ir::StateKind::kKv, "k_cache", DType::kF32, {2048, 2, d});
          Value* vc = h.State(ir::StateKind::kKv, "v_cache", DType::kF32, {2048, 2, d});
          Value* pos = h.b->Positions(ctr, q);
          h.b->KvAppend(k, v, kc, vc, pos)->attrs().Set("v_norm_eps", 1e-6);
          Value* o = h.b->Attention(q, kc, vc, pos, 1.0 / 16.0);
          h.b->AdvancePositions(ctr, q);
          return std::vector<Value*>{o};
        },
        2);
  }
}

// Attention at precision "bf16" (tensor-core prefill, FlashAttention.cu; split-KV decode): the
// 9B's shape and beyond, head dims 64-512, GQA groups 1-12, causal and sliding windows (shorter than
// the second call's context, so the window cuts keys of both calls), the output gate fused (per
// element or per head). Two calls each. The long-prompt rows (T = 1100: 8- and 12-warp blocks) are
// a test of their own, so the GPU suite's compute-sanitizer runs keep the short ones.
void OpTableTest::CheckAttentionGeometries(bool long_prompts) {
  struct Geo {
    int64_t hq, hkv, d, window;
    bool gated;
    bool long_prompt = false;  // also T = 1100: the 8- and 12-warp blocks of prompts >= 1024
    bool head_gate = false;    // gated with one gate per head ([T, Hq, 1], Step 3.5's)
  };
  // Groups of 12 (Step 3.5's sliding layers: 96 query heads over 8 kv heads) take 6 / 12 warps;
  // Step 3.5's head-wise gate.
  const Geo geos[] = {
      {16, 4, 256, 0, true, true}, {8, 8, 64, 0, false},   {16, 8, 128, 0, false}, {16, 2, 128, 100, false},
      {8, 2, 512, 0, true},        {8, 4, 256, 128, true}, {4, 4, 64, 7, false},   {24, 2, 128, 100, true, true, true},
      {12, 1, 128, 0, true, true}};
  for (const Geo& g : geos) {
    const std::string label = absl::StrFormat("%dq/%dkv d%d%s%s", g.hq, g.hkv, g.d,
                                              g.window > 0 ? absl::StrFormat(" w%d", g.window) : std::string(),
                                              g.head_gate ? " head gate" : "");
    if (long_prompts && !g.long_prompt) continue;
    const std::vector<int64_t> ts = long_prompts ? std::vector<int64_t>{1100} : std::vector<int64_t>{1, 13, 77, 520};
    for (int64_t T : ts) {
      Check(
          g.gated ? "attention_gated" : "attention", label, T, AttentionBound(T),
          [&](Harness& h) {
            Value* q = h.Arg("q", {-1, g.hq, g.d});
            Value* k = h.Arg("k", {-1, g.hkv, g.d});
            Value* v = h.Arg("v", {-1, g.hkv, g.d});
            Value* gate = g.gated ? h.Arg("gate", {-1, g.hq, g.head_gate ? 1 : g.d}) : nullptr;
            Value* ctr = h.State(ir::StateKind::kPosition, "pos", DType::kI32, {});
            const int64_t rows = std::max<int64_t>(2048, 2 * T);  // two calls' keys
            Value* kc = h.State(ir::StateKind::kKv, "k_cache", DType::kF32, {rows, g.hkv, g.d});
            Value* vc = h.State(ir::StateKind::kKv, "v_cache", DType::kF32, {rows, g.hkv, g.d});
            Value* pos = h.b->Positions(ctr, q);
            h.b->KvAppend(k, v, kc, vc, pos);
            ir::AttrDict attrs = {{"scale", 1.0 / std::sqrt(static_cast<double>(g.d))},
                                  {"precision", std::string("bf16")}};
            if (g.window > 0) attrs.Set("window", g.window);
            Value* o = g.gated ? h.b->Build1(ir::OpKind::kAttentionGated, {q, kc, vc, pos, gate}, attrs)
                               : h.b->Build1(ir::OpKind::kAttention, {q, kc, vc, pos}, attrs);
            h.b->AdvancePositions(ctr, q);
            return std::vector<Value*>{o};
          },
          2);
    }
  }
}

TEST_F(OpTableTest, AttentionGeometries) { CheckAttentionGeometries(false); }
TEST_F(OpTableTest, AttentionLongPrompts) { CheckAttentionGeometries(true); }

// KV caches of f16 / bf16 elements or q8_0 blocks (-ctk / -ctv): kv_append rounds the rows (q8_0:
// quantizes each block, a warp a block), attention reads them widened (precision f32: split-KV
// decode and the CUDA-core prefill) or as bf16 (precision bf16: the tensor-core prefill reads a
// bf16 cache in place, copies the others). The CPU executor rounds the same way, so the bounds are
// the f32 cache's. The 9B's shape and a 512-wide windowed one; a paged f16 pool.
TEST_F(OpTableTest, KvCacheTypes) {
  const std::pair<DType, DType> types[] = {{DType::kF16, DType::kF16},
                                           {DType::kBF16, DType::kBF16},
                                           {DType::kF16, DType::kF32},
                                           {DType::kQ8_0, DType::kQ8_0},
                                           {DType::kQ8_0, DType::kF16}};
  struct Geo {
    int64_t hq, hkv, d, window;
    const char* precision;
  };
  const Geo geos[] = {{16, 4, 256, 0, "f32"}, {16, 4, 256, 0, "bf16"}, {8, 2, 512, 128, "bf16"}};
  for (auto [kt, vt] : types)
    for (const Geo& g : geos) {
      const std::string label = absl::StrFormat("k %s v %s d%d %s%s", ir::DTypeName(kt), ir::DTypeName(vt), g.d,
                                                g.precision, g.window > 0 ? " window" : "");
      const bool f32 = std::string(g.precision) == "f32";
      FOR_T Check(
          "attention", label, T, f32 ? 1e-9 : AttentionBound(T),
          [&](Harness& h) {
            Value* q = h.Arg("q", {-1, g.hq, g.d});
            Value* k = h.Arg("k", {-1, g.hkv, g.d});
            Value* v = h.Arg("v", {-1, g.hkv, g.d});
            Value* ctr = h.State(ir::StateKind::kPosition, "pos", DType::kI32, {});
            Value* kc = h.State(ir::StateKind::kKv, "k_cache", kt, {2048, g.hkv, g.d});
            Value* vc = h.State(ir::StateKind::kKv, "v_cache", vt, {2048, g.hkv, g.d});
            Value* pos = h.b->Positions(ctr, q);
            h.b->KvAppend(k, v, kc, vc, pos);
            ir::AttrDict attrs = {{"scale", 1.0 / std::sqrt(static_cast<double>(g.d))},
                                  {"precision", std::string(g.precision)}};
            if (g.window > 0) attrs.Set("window", g.window);
            Value* o = h.b->Build1(ir::OpKind::kAttention, {q, kc, vc, pos}, attrs);
            h.b->AdvancePositions(ctr, q);
            return std::vector<Value*>{o};
          },
          2);
    }
}

// Gemma 4's pieces on CUDA: sliding windows in the f32-precision attention (the CUDA-core prefill
// kernels and split-KV decode; two calls, the window shorter than the second's context), rope with
// freq_factors, mul_weight by [1] and [N], moe_route with per-expert scales.
// fused_rows (fuse-rows): the programs fuse-rows makes of Gemma 4's layers (the layer end with its
// scalar layer scale, the router prologue beside two norms), at the tiny model's width, the 26B's
// 2,816, the 31B's 5,376 and the widest a block holds (16,384); the pointwise logit soft cap.
TEST_F(OpTableTest, FusedRows) {
  const std::string layer_end =
      "t0 = rms_norm(a0, a1, 1e-06); t1 = add(a2, t0); t2 = rms_norm(t1, a3, 1e-06); t3 = add(t2, a4); "
      "t4 = mul_weight(t3, a5); t5 = rms_norm(t4, a6, 1e-06); yield t4, t5";
  for (int64_t n : {int64_t{256}, int64_t{2816}, int64_t{5376}, int64_t{16384}})
    FOR_T Check("fused_rows", absl::StrCat("layer end n=", n), T, kF32Bound, [&](Harness& h) {
      llvm::SmallVector<Value*, 2> y =
          h.b->Build(ir::OpKind::kFusedRows,
                     {h.Arg("down", {-1, n}), h.Weight("w0", GgmlType::kF32, {n}, 0.5f, 1.5f), h.Arg("mlp", {-1, n}),
                      h.Weight("w1", GgmlType::kF32, {n}, 0.5f, 1.5f), h.Arg("res", {-1, n}),
                      h.Weight("s", GgmlType::kF32, {1}, 0.5f, 1.5f), h.Weight("w2", GgmlType::kF32, {n}, 0.5f, 1.5f)},
                     {{"program", layer_end}});
      return std::vector<Value*>(y.begin(), y.end());
    });
  const std::string router =
      "t0 = rms_norm(a0, a1, 1e-06); t1 = rms_norm(a2, a3, 1e-06); t2 = rms_norm(a2, _, 1e-06); "
      "t3 = scale(t2, 0.0625); t4 = mul_weight(t3, a4); yield t0, t1, t4";
  FOR_T Check("fused_rows", "router prologue n=2816", T, kF32Bound, [&](Harness& h) {
    llvm::SmallVector<Value*, 3> y = h.b->Build(
        ir::OpKind::kFusedRows,
        {h.Arg("down", {-1, 2816}), h.Weight("w0", GgmlType::kF32, {2816}, 0.5f, 1.5f), h.Arg("res", {-1, 2816}),
         h.Weight("w1", GgmlType::kF32, {2816}, 0.5f, 1.5f), h.Weight("g", GgmlType::kF32, {2816}, 0.5f, 1.5f)},
        {{"program", router}});
    return std::vector<Value*>(y.begin(), y.end());
  });
  // Per-head rows [T, 8, 256] (the V norm's shape), and the soft cap with no norm: pointwise.
  FOR_T Check("fused_rows", "heads 8x256", T, kF32Bound, [&](Harness& h) {
    llvm::SmallVector<Value*, 2> y = h.b->Build(
        ir::OpKind::kFusedRows, {h.Arg("x", {-1, 8, 256}), h.Weight("w", GgmlType::kF32, {256})},
        {{"program", std::string("t0 = rms_norm(a0, a1, 1e-06); t1 = rms_norm(a0, _, 1e-06); yield t0, t1")}});
    return std::vector<Value*>(y.begin(), y.end());
  });
  FOR_T Check("fused_rows", "soft cap n=4099", T, kF32Bound, [&](Harness& h) {
    llvm::SmallVector<Value*, 1> y = h.b->Build(
        ir::OpKind::kFusedRows, {h.Arg("x", {-1, 4099})},
        {{"program",
          std::string("t0 = scale(a0, 0.03333333333333333); t1 = tanh(t0); t2 = scale(t1, 30.0); yield t2")}});
    return std::vector<Value*>(y.begin(), y.end());
  });
}

TEST_F(OpTableTest, Gemma4Pieces) {
  for (auto [hq, hkv, d] : {std::array<int64_t, 3>{4, 2, 64}, {4, 1, 64}, {16, 4, 256}})
    FOR_T Check(
        "attention", absl::StrFormat("f32 %dq/%dkv d%d w16", hq, hkv, d), T, 1e-9,
        [&](Harness& h) {
          Value* q = h.Arg("q", {-1, hq, d});
          Value* k = h.Arg("k", {-1, hkv, d});
          Value* v = h.Arg("v", {-1, hkv, d});
          Value* ctr = h.State(ir::StateKind::kPosition, "pos", DType::kI32, {});
          Value* kc = h.State(ir::StateKind::kKv, "k_cache", DType::kF32, {2048, hkv, d});
          Value* vc = h.State(ir::StateKind::kKv, "v_cache", DType::kF32, {2048, hkv, d});
          Value* pos = h.b->Positions(ctr, q);
          h.b->KvAppend(k, v, kc, vc, pos);
          Value* o = h.b->Attention(q, kc, vc, pos, 1.0, 16);
          h.b->AdvancePositions(ctr, q);
          return std::vector<Value*>{o};
        },
        2);
  // Sliding-window rings (ir/Ops.def kv_append / attention ring): the least rows a call of T needs,
  // 16 + T - 1, so the second call's keys wrap around the ring; f32 (CUDA-core prefill, split-KV
  // decode) and bf16 precision (the tensor-core prefill, through the bf16 copy).
  for (const char* precision : {"f32", "bf16"}) {
    const bool f32 = std::string(precision) == "f32";
    FOR_T Check(
        "attention", absl::StrFormat("%s 4q/2kv d64 w16 ring", precision), T, f32 ? 1e-9 : AttentionBound(T),
        [&](Harness& h) {
          const int64_t rows = 16 + T - 1;
          Value* q = h.Arg("q", {-1, 4, 64});
          Value* k = h.Arg("k", {-1, 2, 64});
          Value* v = h.Arg("v", {-1, 2, 64});
          Value* ctr = h.State(ir::StateKind::kPosition, "pos", DType::kI32, {});
          Value* kc = h.State(ir::StateKind::kKv, "k_cache", DType::kF32, {rows, 2, 64});
          Value* vc = h.State(ir::StateKind::kKv, "v_cache", DType::kF32, {rows, 2, 64});
          Value* pos = h.b->Positions(ctr, q);
          h.b->KvAppend(k, v, kc, vc, pos, 16);
          Value* o = h.b->Attention(q, kc, vc, pos, 1.0, 16, 16);
          o->def()->attrs().Set("precision", std::string(precision));
          h.b->AdvancePositions(ctr, q);
          return std::vector<Value*>{o};
        },
        2);
  }
  // GeGLU (matmul_swiglu activation gelu: fuse-swiglu's form of Gemma's MLPs): f32 / bf16 weights
  // (gemv_swiglu, the GEMM + geglu_f32) and q8_0 / q4_K blocks (gemv_q_swiglu with GQ_GELU).
  auto geglu = [](GgmlType t) {
    return [t](Harness& h) {
      Value* x = h.Arg("x", {-1, 1024});
      return std::vector<Value*>{
          h.b->Build1(ir::OpKind::kMatMulSwiglu,
                      {x, h.Weight("wg", t, {1024, 768}, -0.05f, 0.05f), h.Weight("wu", t, {1024, 768}, -0.05f, 0.05f)},
                      {{"activation", std::string("gelu")}})};
    };
  };
  for (auto [t, bound] : {std::pair<GgmlType, double>{GgmlType::kF32, 1e-10}, {GgmlType::kBF16, 5e-5}})
    FOR_T Check("matmul_swiglu", absl::StrCat(formats::GgmlTypeName(t), " gelu"), T, bound, geglu(t));
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_K})
    FOR_T Check("matmul_swiglu", absl::StrCat(formats::GgmlTypeName(t), " gelu"), T,
                BlockProductBound(T, WeightMode::kBlocks), geglu(t));
  FOR_T Check(
      "rope", "freq_factors", T, 1e-9,
      [](Harness& h) {
        Value* x = h.Arg("x", {-1, 4, 64});
        Value* pos = h.b->Positions(h.State(ir::StateKind::kPosition, "pos", DType::kI32, {}), x);
        Value* ff = h.Weight("ff", GgmlType::kF32, {32}, 0.5f, 2.0f);
        Value* y = h.b->Rope(x, pos, 64, 1e6, ff);
        h.b->AdvancePositions(h.m->state("pos"), x);
        return std::vector<Value*>{y};
      },
      2);
  for (int64_t n : {int64_t{1}, int64_t{256}})
    FOR_T Check("mul_weight", absl::StrCat("[", n, "]"), T, 0, [n](Harness& h) {
      return std::vector<Value*>{h.b->MulWeight(h.Arg("x", {-1, 256}), h.Weight("s", GgmlType::kF32, {n}, 0.5f, 1.5f))};
    });
  FOR_T Check("moe_route", "f32 E=8 expert_scale", T, 1e-12, [](Harness& h) {
    auto [w, ids] = h.b->MoeRoute(h.Arg("logits", {-1, 8}), 2, h.Weight("es", GgmlType::kF32, {8}, 0.5f, 1.5f));
    return std::vector<Value*>{w, ids};
  });
}

// Step 3.5's pieces: the head-wise gate (mul_rows), the sigmoid router with its selection bias at
// the tiny and the published expert counts (ids compared exactly through the nmse), and the
// clamped SwiGLU in every form that computes gated products: swiglu, matmul_swiglu (gemv_swiglu /
// GEMM + swiglu_f32 on f32 and bf16, gemv_q_swiglu on q8_0) and the routed experts (decode GEMVs,
// MoeGemm.cu). Limits are chosen inside the values' range so both clamps bite.
TEST_F(OpTableTest, Step35Pieces) {
  FOR_T Check("mul_rows", "f32 [T,8,64] x [T,8,1]", T, 0, [](Harness& h) {
    return std::vector<Value*>{h.b->MulRows(h.Arg("x", {-1, 8, 64}), h.Arg("s", {-1, 8, 1}))};
  });
  for (auto [E, k] : {std::pair<int64_t, int64_t>{8, 3}, {288, 8}})
    for (const bool bias : {false, true})
      FOR_T Check("moe_route_sigmoid", absl::StrCat("f32 E=", E, " k=", k, bias ? " bias norm x2" : ""), T, 1e-12,
                  [&](Harness& h) {
                    Value* b = bias ? h.Weight("b", GgmlType::kF32, {E}, -0.1f, 0.1f) : nullptr;
                    auto [w, ids] = h.b->MoeRouteSigmoid(h.Arg("logits", {-1, E}), k, b, bias, bias ? 2.0 : 0.0);
                    return std::vector<Value*>{w, ids};
                  });
  FOR_T Check("swiglu", "f32 clamp 0.5", T, 1e-12, [](Harness& h) {
    return std::vector<Value*>{h.b->Swiglu(h.Arg("g", {-1, 300}), h.Arg("u", {-1, 300}), 0.5)};
  });
  auto clamped = [](GgmlType t) {
    return [t](Harness& h) {
      Value* x = h.Arg("x", {-1, 1024});
      return std::vector<Value*>{
          h.b->Build1(ir::OpKind::kMatMulSwiglu,
                      {x, h.Weight("wg", t, {1024, 768}, -0.05f, 0.05f), h.Weight("wu", t, {1024, 768}, -0.05f, 0.05f)},
                      {{"clamp", 0.5}})};
    };
  };
  for (auto [t, bound] : {std::pair<GgmlType, double>{GgmlType::kF32, 1e-10}, {GgmlType::kBF16, 5e-5}})
    FOR_T Check("matmul_swiglu", absl::StrCat(formats::GgmlTypeName(t), " clamp 0.5"), T, bound, clamped(t));
  FOR_T Check("matmul_swiglu", "q8_0 clamp 0.5", T, BlockProductBound(T, WeightMode::kBlocks),
              clamped(GgmlType::kQ8_0));
  constexpr int64_t E = 8, k = 3, K = 256, F = 128;
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kBF16})
    for (int64_t T : kBlockTs) {
      const bool blocks = t == GgmlType::kQ8_0;
      Check(
          "moe_experts", absl::StrCat(formats::GgmlTypeName(t), " clamp 1.0"), T,
          blocks && T <= 8 ? kQ8ActivationBound : kBf16Bound,
          [&](Harness& h) {
            Value* x = h.Arg("x", {-1, K});
            Value* w = h.Arg("w", {-1, k});
            Value* ids = h.Arg("ids", {-1, k}, DType::kI32);
            Value* down = h.Weight("down", t, {F, K, E}, -0.2f, 0.2f);
            Value* g = h.Weight("gate", t, {K, F, E}, -0.2f, 0.2f);
            Value* u = h.Weight("up", t, {K, F, E}, -0.2f, 0.2f);
            return std::vector<Value*>{h.b->MoeExperts(x, w, ids, down, {g, u}, "silu", 1.0)};
          },
          1, E);
    }
}

// The fused ops of the default pipeline (passes/): matmul_swiglu and matmul_group per float weight
// type (the block formats: BlockFormats), qk_norm_rope and attention_gated at the 9B's attention
// shapes.
TEST_F(OpTableTest, FusedOps) {
  const std::pair<GgmlType, double> types[] = {{GgmlType::kF32, 1e-10}, {GgmlType::kBF16, 5e-5}};
  for (auto [t, bound] : types)
    FOR_T Check("matmul_swiglu", std::string(formats::GgmlTypeName(t)), T, bound, [&](Harness& h) {
      Value* x = h.Arg("x", {-1, 1024});
      return std::vector<Value*>{h.b->Build1(
          ir::OpKind::kMatMulSwiglu,
          {x, h.Weight("wg", t, {1024, 768}, -0.05f, 0.05f), h.Weight("wu", t, {1024, 768}, -0.05f, 0.05f)})};
    });
  // matmul_group: the delta-net in-projection's shape (a large, a medium and two 32-row weights of one
  // type: one gemv_group launch at T = 1) and a group mixing bf16 and f16 (per-weight GEMVs).
  for (auto [t, bound] : types)
    FOR_T Check("matmul_group", std::string(formats::GgmlTypeName(t)), T, bound, [&](Harness& h) {
      Value* x = h.Arg("x", {-1, 1024});
      auto r =
          h.b->Build(ir::OpKind::kMatMulGroup,
                     {x, h.Weight("wa", t, {1024, 640}, -0.05f, 0.05f), h.Weight("wb", t, {1024, 256}, -0.05f, 0.05f),
                      h.Weight("wc", t, {1024, 32}, -0.05f, 0.05f), h.Weight("wd", t, {1024, 32}, -0.05f, 0.05f)});
      return std::vector<Value*>(r.begin(), r.end());
    });
  FOR_T Check("matmul_group", "bf16+f16", T, 5e-5, [&](Harness& h) {
    Value* x = h.Arg("x", {-1, 1024});
    auto r = h.b->Build(ir::OpKind::kMatMulGroup, {x, h.Weight("wa", GgmlType::kBF16, {1024, 256}, -0.05f, 0.05f),
                                                   h.Weight("wb", GgmlType::kF16, {1024, 64}, -0.05f, 0.05f)});
    return std::vector<Value*>(r.begin(), r.end());
  });
  FOR_T Check(
      "qk_norm_rope", "f32", T, 1e-9,
      [](Harness& h) {
        Value* q = h.Arg("q", {-1, 16, 256});
        Value* k = h.Arg("k", {-1, 4, 256});
        Value* pos = h.b->Positions(h.State(ir::StateKind::kPosition, "pos", DType::kI32, {}), q);
        auto r = h.b->Build(ir::OpKind::kQkNormRope,
                            {q, k, h.Weight("qw", GgmlType::kF32, {256}), h.Weight("kw", GgmlType::kF32, {256}), pos},
                            {{"eps", 1e-6}, {"n_rot", int64_t{64}}, {"base", 1e7}});
        h.b->AdvancePositions(h.m->state("pos"), q);
        return std::vector<Value*>{r[0], r[1]};
      },
      2);
  // With freq factors (Gemma 4's full layers: 512-wide heads, every dim rotated, factors from 1 to 8).
  FOR_T Check(
      "qk_norm_rope", "f32 freq_factors", T, 1e-9,
      [](Harness& h) {
        Value* q = h.Arg("q", {-1, 8, 512});
        Value* k = h.Arg("k", {-1, 2, 512});
        Value* pos = h.b->Positions(h.State(ir::StateKind::kPosition, "pos", DType::kI32, {}), q);
        auto r = h.b->Build(ir::OpKind::kQkNormRope,
                            {q, k, h.Weight("qw", GgmlType::kF32, {512}), h.Weight("kw", GgmlType::kF32, {512}), pos,
                             h.Weight("ff", GgmlType::kF32, {256}, 1.0f, 8.0f)},
                            {{"eps", 1e-6}, {"n_rot", int64_t{512}}, {"base", 1e6}});
        h.b->AdvancePositions(h.m->state("pos"), q);
        return std::vector<Value*>{r[0], r[1]};
      },
      2);
  FOR_T Check(
      "attention_gated", "f32", T, 1e-9,
      [](Harness& h) {
        Value* q = h.Arg("q", {-1, 16, 256});
        Value* k = h.Arg("k", {-1, 4, 256});
        Value* v = h.Arg("v", {-1, 4, 256});
        Value* gate = h.Arg("gate", {-1, 16, 256});
        Value* ctr = h.State(ir::StateKind::kPosition, "pos", DType::kI32, {});
        Value* kc = h.State(ir::StateKind::kKv, "k_cache", DType::kF32, {2048, 4, 256});
        Value* vc = h.State(ir::StateKind::kKv, "v_cache", DType::kF32, {2048, 4, 256});
        Value* pos = h.b->Positions(ctr, q);
        h.b->KvAppend(k, v, kc, vc, pos);
        Value* o = h.b->Build1(ir::OpKind::kAttentionGated, {q, kc, vc, pos, gate}, {{"scale", 1.0 / 16.0}});
        h.b->AdvancePositions(ctr, q);
        return std::vector<Value*>{o};
      },
      2);
}

// The 9B's delta-net scan shape (16 key / 32 value heads of 128) with its own q / k l2 norms
// (qk_l2_eps, as fuse-delta-net-inputs forms it) at `precision` ("" : the attribute absent).
Value* ScanWithNorms(Harness& h, const std::string& precision) {
  Value* q = h.Arg("q", {-1, 16, 128});
  Value* k = h.Arg("k", {-1, 16, 128});
  Value* v = h.Arg("v", {-1, 32, 128});
  auto [beta, g] = h.b->DeltaNetGates(h.Arg("b", {-1, 32}), h.Arg("a", {-1, 32}), h.Weight("dt", GgmlType::kF32, {32}),
                                      h.Weight("ssm_a", GgmlType::kF32, {32}, -2, -0.1f));
  Value* st = h.State(ir::StateKind::kDelta, "delta", DType::kF32, {32, 128, 128});
  ir::AttrDict attrs = {{"scale", 1.0 / std::sqrt(128.0)}, {"qk_l2_eps", 1e-6}};
  if (!precision.empty()) attrs.Set("precision", precision);
  return h.b->Build1(ir::OpKind::kGatedDeltaScan, {q, k, v, g, beta, st}, attrs);
}

TEST_F(OpTableTest, DeltaNet) {
  FOR_T Check(
      "conv1d_causal", "f32", T, 1e-12,
      [](Harness& h) {
        Value* x = h.Arg("x", {-1, 1536});
        Value* st = h.State(ir::StateKind::kConv, "conv", DType::kF32, {1536, 3});
        return std::vector<Value*>{h.b->Conv1dCausal(x, h.Weight("w", GgmlType::kF32, {4, 1536}), st)};
      },
      2);
  FOR_T Check("delta_net_gates", "f32", T, 1e-12, [](Harness& h) {
    auto [beta, g] =
        h.b->DeltaNetGates(h.Arg("b", {-1, 32}), h.Arg("a", {-1, 32}), h.Weight("dt", GgmlType::kF32, {32}),
                           h.Weight("ssm_a", GgmlType::kF32, {32}, -2, -0.1f));
    return std::vector<Value*>{beta, g};
  });
  // The 9B's shape: 16 key heads, 32 value heads, d_state 128; two calls carry the state.
  FOR_T Check(
      "gated_delta_scan", "f32", T, 1e-8,
      [](Harness& h) {
        Value* q = h.b->L2Norm(h.Arg("q", {-1, 16, 128}), 1e-6);
        Value* k = h.b->L2Norm(h.Arg("k", {-1, 16, 128}), 1e-6);
        Value* v = h.Arg("v", {-1, 32, 128});
        auto [beta, g] =
            h.b->DeltaNetGates(h.Arg("b", {-1, 32}), h.Arg("a", {-1, 32}), h.Weight("dt", GgmlType::kF32, {32}),
                               h.Weight("ssm_a", GgmlType::kF32, {32}, -2, -0.1f));
        Value* st = h.State(ir::StateKind::kDelta, "delta", DType::kF32, {32, 128, 128});
        return std::vector<Value*>{h.b->GatedDeltaScan(q, k, v, g, beta, st, 1.0 / std::sqrt(128.0))};
      },
      2);
  // The forms fuse-delta-net-inputs makes: the conv's silu, the scan's own q / k l2 norms (the
  // CUDA scan scales its sums by the norms instead of normalizing q and k: f32 rounding apart).
  FOR_T Check(
      "conv1d_causal+silu", "f32", T, 1e-12,
      [](Harness& h) {
        Value* x = h.Arg("x", {-1, 1536});
        Value* st = h.State(ir::StateKind::kConv, "conv", DType::kF32, {1536, 3});
        return std::vector<Value*>{h.b->Build1(ir::OpKind::kConv1dCausal,
                                               {x, h.Weight("w", GgmlType::kF32, {4, 1536}), st},
                                               {{"activation", std::string("silu")}})};
      },
      2);
  FOR_T Check(
      "gated_delta_scan+l2", "f32", T, 1e-8, [](Harness& h) { return std::vector<Value*>{ScanWithNorms(h, "")}; }, 2);
  // At precision "bf16" (the lowering's choice for 16-bit and quantized models): T >= 64 runs the
  // chunked rule with K K^T, Q K^T and the state pass on tensor cores (bf16 operands, f32 state and
  // accumulation).
  FOR_T Check(
      "gated_delta_scan+l2", "bf16", T, T >= 64 ? 5e-5 : 1e-8,
      [](Harness& h) { return std::vector<Value*>{ScanWithNorms(h, "bf16")}; }, 2);
  // The chunked rule (DeltaNetChunked.cu, T >= 64) over 18 chunks, the last one partial.
  for (const char* precision : {"f32", "bf16"})
    Check(
        "gated_delta_scan+l2", std::string(precision) + " chunked", 1100, precision[0] == 'f' ? 1e-8 : 5e-5,
        [&](Harness& h) { return std::vector<Value*>{ScanWithNorms(h, precision)}; }, 2);
}

// The decode fusions (session 18), one token each: add_rms_norm_matmul's norm prologue on the
// GEMVs and delta_net_step (its own test, so compute-sanitizer can run it alone); below,
// gated_attention_step (session 19; its own test too).
TEST_F(OpTableTest, DecodeFusions) {
  const std::pair<GgmlType, double> types[] = {{GgmlType::kF32, 1e-10}, {GgmlType::kBF16, 5e-5}};
  // add_rms_norm_matmul (fuse-add-rmsnorm-matmul, one token): the norm as the GEMVs' prologue,
  // each form (one product, a group of four, SwiGLU and GeGLU) per float weight type.
  for (auto [t, bound] : types)
    for (const char* form : {"one", "group", "silu", "gelu"})
      Check("add_rms_norm_matmul", absl::StrCat(formats::GgmlTypeName(t), " ", form), 1, bound, [&](Harness& h) {
        std::vector<Value*> operands{h.Arg("a", {-1, 1024}), h.Arg("b", {-1, 1024}),
                                     h.Weight("nw", GgmlType::kF32, {1024}, 0.5f, 1.5f)};
        ir::AttrDict attrs = {{"eps", 1e-6}};
        const std::string f = form;
        if (f == "one") {
          operands.push_back(h.Weight("w", t, {1024, 512}, -0.05f, 0.05f));
        } else if (f == "group") {
          for (auto [name, n] : {std::pair<const char*, int64_t>{"wa", 640}, {"wb", 256}, {"wc", 32}, {"wd", 32}})
            operands.push_back(h.Weight(name, t, {1024, n}, -0.05f, 0.05f));
        } else {
          operands.push_back(h.Weight("wg", t, {1024, 768}, -0.05f, 0.05f));
          operands.push_back(h.Weight("wu", t, {1024, 768}, -0.05f, 0.05f));
          attrs.Set("glu", f);
        }
        auto r = h.b->Build(ir::OpKind::kAddRmsNormMatMul, operands, attrs);
        return std::vector<Value*>(r.begin(), r.end());
      });
  // matmul_add_rms_norm (fuse-matmul-add-rmsnorm, one token): the product and the add_rms_norm
  // after it in one launch (gemv_splitk_add_norm: the product's last block adds and normalizes;
  // its ticket must be zero again for the next of the 3 calls; gemv_add_norm where K leaves
  // gemv_splitk), or two (the product, then add_rms_norm) where the GEMV's geometry leaves no tail.
  // The 0.8B's attention output and down (block-row tails), a 512-wide row (the warp-row tail), the
  // 9B's attention output in f16 (16 values a thread) and its down (K = 12,288: gemv_add_norm), 640
  // rows over K = 4,608 (gemv_add_norm in blocks of 4 warps) and 642 (a warp without a row: two
  // launches); matrices in GGUF blocks (gemv_q_add_norm after gemv_q_quantize_x): the 0.8B's in
  // q8_0, Step 3.5's attention output in q4_K, and 5,120 columns in q6_K (the 27B's hidden size:
  // the tail reads its row twice).
  struct AddNormCase {
    const char* label;
    GgmlType w;
    int64_t K, N;
    double bound;
  };
  for (const AddNormCase& c : {AddNormCase{"bf16 1024x2048", GgmlType::kBF16, 2048, 1024, 5e-5},
                               AddNormCase{"bf16 1024x3584", GgmlType::kBF16, 3584, 1024, 5e-5},
                               AddNormCase{"bf16 512x1024 warp row", GgmlType::kBF16, 1024, 512, 5e-5},
                               AddNormCase{"f16 4096x4096", GgmlType::kF16, 4096, 4096, 5e-5},
                               AddNormCase{"f32 4096x12288 gemv tail", GgmlType::kF32, 12288, 4096, 1e-10},
                               AddNormCase{"bf16 640x4608 4-warp tail", GgmlType::kBF16, 4608, 640, 5e-5},
                               AddNormCase{"bf16 642x4608 two launches", GgmlType::kBF16, 4608, 642, 5e-5},
                               AddNormCase{"q8_0 1024x2048", GgmlType::kQ8_0, 2048, 1024, kQ8ActivationBound},
                               AddNormCase{"q4_K 4096x8192", GgmlType::kQ4_K, 8192, 4096, kQ8ActivationBound},
                               AddNormCase{"q6_K 5120x1280", GgmlType::kQ6_K, 1280, 5120, kQ8ActivationBound}})
    Check(
        "matmul_add_rms_norm", c.label, 1, c.bound,
        [&c](Harness& h) {
          h.static_t = 1;
          auto r = h.b->Build(ir::OpKind::kMatMulAddRmsNorm,
                              {h.Arg("x", {-1, c.K}), h.Weight("w", c.w, {c.K, c.N}, -0.05f, 0.05f),
                               h.Arg("b", {-1, c.N}), h.Weight("nw", GgmlType::kF32, {c.N}, 0.5f, 1.5f)},
                              {{"eps", 1e-6}});
          return std::vector<Value*>(r.begin(), r.end());
        },
        /*calls=*/3);
  // delta_net_step (fuse-delta-net-step, one token): the 9B's heads (16 key / 32 value heads of
  // 128, two blocks a cluster) and the 0.8B's (16 / 16), three calls carrying both states; each
  // with its state columns over 1, 2, 4 and 8 blocks a head (select-kernels{delta-step-split}:
  // the 9B's split of 8 falls back to 4, a cluster of 8).
  for (int64_t hv : {32, 16})
    for (int split : {1, 2, 4, 8})
      Check(
          "delta_net_step", absl::StrCat("f32 hv", hv, split > 1 ? absl::StrCat(" split", split) : ""), 1, 1e-8,
          [hv, split](Harness& h) {
            h.select.delta_step_split = split;
            const int64_t hk = 16, d = 128, c = 2 * hk * d + hv * d;
            Value* x = h.Arg("x", {-1, c});
            Value* z = h.Arg("z", {-1, hv, d});
            Value* cs = h.State(ir::StateKind::kConv, "conv", DType::kF32, {c, 3});
            Value* ds = h.State(ir::StateKind::kDelta, "delta", DType::kF32, {hv, d, d});
            ir::AttrDict attrs = {{"scale", 1.0 / std::sqrt(128.0)}, {"qk_l2_eps", 1e-6}, {"eps", 1e-6}};
            return std::vector<Value*>{
                h.b->Build1(ir::OpKind::kDeltaNetStep,
                            {x, h.Weight("w", GgmlType::kF32, {4, c}), h.Arg("b", {-1, hv}), h.Arg("a", {-1, hv}),
                             h.Weight("dt", GgmlType::kF32, {hv}), h.Weight("ssm_a", GgmlType::kF32, {hv}, -2, -0.1f),
                             z, h.Weight("nw", GgmlType::kF32, {d}), cs, ds},
                            attrs)};
          },
          3);
  // matmul_delta_net_step (fuse-matmul-delta-net-step, one token): the input projections whose
  // blocks run each key head's step (gemv_group_delta_step, a ticket per key head that must be zero
  // again for the next of the 3 calls, both states carried): the 0.8B's layer in bf16 (16 / 16
  // heads of 128 over K = 1,024), the 9B's heads (16 / 32, one block running both value heads of a
  // key head) in f16 over K = 2,048, and f32 weights with 256-wide value heads (blocks of 16 warps).
  struct ProjectedStepCase {
    const char* label;
    GgmlType w;
    int64_t hk, hv, dk, dv, K;
    double bound;
  };
  for (const ProjectedStepCase& c : {ProjectedStepCase{"bf16 0.8B", GgmlType::kBF16, 16, 16, 128, 128, 1024, 5e-5},
                                     ProjectedStepCase{"f16 9B heads", GgmlType::kF16, 16, 32, 128, 128, 2048, 5e-5},
                                     ProjectedStepCase{"f32 dv256", GgmlType::kF32, 4, 4, 128, 256, 512, 1e-8}})
    Check(
        "matmul_delta_net_step", c.label, 1, c.bound,
        [&c](Harness& h) {
          h.static_t = 1;
          const int64_t ch = 2 * c.hk * c.dk + c.hv * c.dv;
          Value* cs = h.State(ir::StateKind::kConv, "conv", DType::kF32, {ch, 3});
          Value* ds = h.State(ir::StateKind::kDelta, "delta", DType::kF32, {c.hv, c.dv, c.dk});
          ir::AttrDict attrs = {{"scale", 1.0 / std::sqrt(double(c.dk))}, {"qk_l2_eps", 1e-6}, {"eps", 1e-6}};
          return std::vector<Value*>{h.b->Build1(
              ir::OpKind::kMatMulDeltaNetStep,
              {h.Arg("x", {-1, c.K}), h.Weight("w_qkv", c.w, {c.K, ch}, -0.05f, 0.05f),
               h.Weight("w_z", c.w, {c.K, c.hv * c.dv}, -0.05f, 0.05f),
               h.Weight("w_b", c.w, {c.K, c.hv}, -0.05f, 0.05f), h.Weight("w_a", c.w, {c.K, c.hv}, -0.05f, 0.05f),
               h.Weight("cw", GgmlType::kF32, {4, ch}), h.Weight("dt", GgmlType::kF32, {c.hv}),
               h.Weight("ssm_a", GgmlType::kF32, {c.hv}, -2, -0.1f), h.Weight("nw", GgmlType::kF32, {c.dv}), cs, ds},
              attrs)};
        },
        3);
}

TEST_F(OpTableTest, GatedAttentionStep) {
  // gated_attention_step (fuse-gated-attention-step, one token): the 0.8B's heads (8 query / 2 KV
  // of 256) and the 9B's (16 / 4), rope over 64 dims, three calls. "deep": the caches hold 1,500
  // random keys before the first call (the position counter starts there), so every split-KV range
  // is live and the new key's range is not the first; bf16 caches from position 0 (the appended
  // row rounded as kv_append rounds it).
  struct StepGeo {
    int64_t hq, hkv;
    DType cache;
    int64_t start;            // the first call's position
    bool early = false;       // select-kernels{combine-early-loads}
    bool step_early = false;  // select-kernels{step-early-loads}
  };
  // q8_0: the new key is normalized and rotated on each side before it is quantized, so an element
  // at a rounding boundary may land one step (d = amax / 127) apart: a looser bound.
  for (const StepGeo& g :
       {StepGeo{8, 2, DType::kF32, 1500}, StepGeo{16, 4, DType::kF32, 1500}, StepGeo{8, 2, DType::kBF16, 0},
        StepGeo{16, 4, DType::kF32, 0}, StepGeo{16, 4, DType::kQ8_0, 0}, StepGeo{8, 2, DType::kF32, 1500, true},
        StepGeo{16, 4, DType::kBF16, 0, true}, StepGeo{8, 2, DType::kF32, 1500, true, true},
        StepGeo{16, 4, DType::kBF16, 0, true, true}, StepGeo{16, 4, DType::kQ8_0, 0, false, true}})
    Check(
        "gated_attention_step",
        absl::StrCat(g.hq, "q/", g.hkv, "kv ", ir::DTypeName(g.cache), g.start > 0 ? " deep" : "",
                     g.early ? " early" : "", g.step_early ? " step-early" : ""),
        1,
        g.cache == DType::kF32    ? 1e-9
        : g.cache == DType::kQ8_0 ? 1e-5
                                  : 1e-6,
        [g](Harness& h) {
          h.select.combine_early_loads = g.early;
          h.select.step_early_loads = g.step_early;
          constexpr int64_t d = 256, rows = 2048;
          Value* k = h.Arg("k", {-1, g.hkv, d});
          Value* v = h.Arg("v", {-1, g.hkv, d});
          Value* qg = h.Arg("qg", {-1, 2 * g.hq * d});
          Value* ctr = h.State(ir::StateKind::kPosition, "pos", DType::kI32, {});
          Value* kc = h.State(ir::StateKind::kKv, "k_cache", g.cache, {rows, g.hkv, d});
          Value* vc = h.State(ir::StateKind::kKv, "v_cache", g.cache, {rows, g.hkv, d});
          Value* pos = h.b->Positions(ctr, k);
          ir::AttrDict attrs = {{"n_head", g.hq}, {"head_dim", d},      {"eps", 1e-6},
                                {"n_rot", 64},    {"base", 10000000.0}, {"scale", 1.0 / 16.0}};
          Value* o = h.b->Build1(ir::OpKind::kGatedAttentionStep,
                                 {k, v, kc, vc, pos, qg, h.Weight("qw", GgmlType::kF32, {d}, 0.5f, 1.5f),
                                  h.Weight("kw", GgmlType::kF32, {d}, 0.5f, 1.5f)},
                                 attrs);
          h.b->AdvancePositions(ctr, k);
          if (g.start > 0) {
            const int64_t n = g.start * g.hkv * d;
            auto fill = std::make_shared<std::vector<float>>(2 * n);
            for (float& x : *fill) x = h.U(-2, 2);
            const int32_t start = static_cast<int32_t>(g.start);
            h.prepare = [fill, n, start](CpuExecutor& cpu, CudaExecutor& gpu) -> absl::Status {
              for (int i = 0; i < 2; ++i) {
                const char* name = i == 0 ? "k_cache" : "v_cache";
                const float* src = fill->data() + i * n;
                MEMRA_RETURN_IF_ERROR(cpu.WriteState(name, 0, src, n * 4));
                MEMRA_RETURN_IF_ERROR(gpu.WriteState(name, 0, src, n * 4));
              }
              MEMRA_RETURN_IF_ERROR(cpu.WriteState("pos", 0, &start, 4));
              return gpu.WriteState("pos", 0, &start, 4);
            };
          }
          return std::vector<Value*>{o};
        },
        3);
}

TEST_F(OpTableTest, QkNormRopeAppend) {
  // qk_norm_rope_append (fuse-qk-norm-rope-append): q rotated into the result, k rotated and v
  // (normed or not) appended to the caches, compared after three calls (the harness compares every
  // state). Gemma 4 31B's sliding heads (32 / 16 of 256, v normed), its full layers' width (512),
  // Step 3.5's (64 / 8 of 128, half rotated), a ring whose rows wrap (the position counter starts
  // at 150 over 64 rows), three tokens a call, and every cache type.
  struct Geo {
    int64_t hq, hkv, d, n_rot;
    DType cache;
    bool v_norm;
    int64_t ring, start, T;
    bool ff = false;  // rope's freq_factors (Gemma 4's full layers)
  };
  for (const Geo& g :
       {Geo{32, 16, 256, 256, DType::kF32, true, 0, 0, 1}, Geo{32, 4, 512, 512, DType::kBF16, true, 0, 0, 1},
        Geo{64, 8, 128, 64, DType::kF32, false, 0, 0, 1}, Geo{16, 8, 256, 256, DType::kF16, true, 64, 150, 1},
        Geo{8, 2, 64, 64, DType::kQ8_0, true, 0, 0, 1}, Geo{8, 2, 128, 128, DType::kF32, false, 0, 7, 3},
        Geo{32, 4, 512, 512, DType::kF32, true, 0, 0, 1, /*ff=*/true}})
    Check(
        "qk_norm_rope_append",
        absl::StrCat(g.hq, "q/", g.hkv, "kv x ", g.d, " rot ", g.n_rot, " ", ir::DTypeName(g.cache),
                     g.v_norm ? " vnorm" : "", g.ring ? " ring" : "", g.ff ? " freq_factors" : ""),
        g.T,
        g.cache == DType::kF32    ? 1e-12
        : g.cache == DType::kQ8_0 ? 1e-5
                                  : 1e-6,
        [g](Harness& h) {
          const int64_t rows = g.ring > 0 ? g.ring : 256;
          Value* k = h.Arg("k", {-1, g.hkv, g.d});
          Value* v = h.Arg("v", {-1, g.hkv, g.d});
          Value* q = h.Arg("q", {-1, g.hq, g.d});
          Value* ctr = h.State(ir::StateKind::kPosition, "pos", DType::kI32, {});
          Value* kc = h.State(ir::StateKind::kKv, "k_cache", g.cache, {rows, g.hkv, g.d});
          Value* vc = h.State(ir::StateKind::kKv, "v_cache", g.cache, {rows, g.hkv, g.d});
          Value* pos = h.b->Positions(ctr, k);
          ir::AttrDict attrs = {{"eps", 1e-6}, {"n_rot", g.n_rot}, {"base", 10000.0}};
          if (g.v_norm) attrs.Set("v_norm_eps", 1e-6);
          if (g.ring > 0) attrs.Set("ring", g.ring);
          std::vector<Value*> operands = {k,
                                          v,
                                          kc,
                                          vc,
                                          pos,
                                          q,
                                          h.Weight("qw", GgmlType::kF32, {g.d}, 0.5f, 1.5f),
                                          h.Weight("kw", GgmlType::kF32, {g.d}, 0.5f, 1.5f)};
          if (g.ff) operands.push_back(h.Weight("ff", GgmlType::kF32, {g.n_rot / 2}, 1.0f, 8.0f));
          Value* o = h.b->Build1(ir::OpKind::kQkNormRopeAppend, operands, attrs);
          h.b->AdvancePositions(ctr, k);
          if (g.start > 0) {
            const int32_t start = static_cast<int32_t>(g.start);
            h.prepare = [start](CpuExecutor& cpu, CudaExecutor& gpu) -> absl::Status {
              MEMRA_RETURN_IF_ERROR(cpu.WriteState("pos", 0, &start, 4));
              return gpu.WriteState("pos", 0, &start, 4);
            };
          }
          return std::vector<Value*>{o};
        },
        3);
}

// The chunked delta rule's grid law on the device: one call of 256 tokens and two calls of 128
// (a split on the 64-token chunk grid) give the same bits, outputs and state.
TEST_F(OpTableTest, ChunkedScanGridLaw) {
  for (const char* precision : {"f32", "bf16"}) {
    SCOPED_TRACE(precision);
    ChunkedScanGridLaw(precision);
  }
}

void OpTableTest::ChunkedScanGridLaw(const std::string& precision) {
  if (!TakeRow()) return;
  Harness h(5);
  Value* o = ScanWithNorms(h, precision);
  ASSERT_TRUE(h.Finish({o}).ok());
  if (Precompiling()) {
    PrecompileRow(h, 256, WeightMode::kBlocks);
    return PrecompileRow(h, 128, WeightMode::kBlocks);
  }
  const std::vector<HostTensor> all = h.Args(256);
  // Rows [r0, r0 + n) of every argument.
  auto rows = [&](int64_t r0, int64_t n) {
    std::vector<HostTensor> out;
    for (const HostTensor& a : all) {
      const int64_t per = a.numel() / a.dim(0);
      llvm::SmallVector<int64_t, 4> shape(a.shape().begin(), a.shape().end());
      shape[0] = n;
      out.push_back(HostTensor::FromF32(std::vector<float>(a.f32() + r0 * per, a.f32() + (r0 + n) * per), shape));
    }
    return out;
  };
  CudaExecutorOptions opt;
  opt.poison_arena = true;
  opt.progress = false;
  opt.kernel_cache_dir = cache_dir();
  auto one = CudaExecutor::Create(*h.m, *h.file, opt);
  auto two = CudaExecutor::Create(*h.m, *h.file, opt);
  ASSERT_TRUE(one.ok() && two.ok());
  auto r1 = (*one)->Run("f", all);
  ASSERT_TRUE(r1.ok()) << r1.status();
  auto a = (*two)->Run("f", rows(0, 128));
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = (*two)->Run("f", rows(128, 128));
  ASSERT_TRUE(b.ok()) << b.status();
  const int64_t half = (*a)[0].nbytes();
  EXPECT_EQ(std::memcmp((*r1)[0].data(), (*a)[0].data(), half), 0);
  EXPECT_EQ(std::memcmp(static_cast<const char*>((*r1)[0].data()) + half, (*b)[0].data(), half), 0);
  auto s1 = (*one)->ReadState("delta");
  auto s2 = (*two)->ReadState("delta");
  ASSERT_TRUE(s1.ok() && s2.ok());
  EXPECT_EQ(std::memcmp(s1->data(), s2->data(), s1->nbytes()), 0);
}

// The MoE ops. moe_route on the device must choose the CPU's experts (ids compared exactly through
// the nmse: a flip is O(1)) and weights to f32 rounding. The expert products: random ids (repeats
// within a token included) and weights as arguments, so routing ties cannot enter; every format
// GemvQuant.cu reads at a small shape (K 256, F 128, shared 256 or the routed width), the fused
// gate_up form, and a shared expert in another format than the routed ones (its launches apart);
// past 8 tokens (and for 16/32-bit experts) the grouped tensor-core products (MoeGemm.cu).
TEST_F(OpTableTest, Moe) {
  for (int64_t E : {8, 64, 256})
    FOR_T Check("moe_route", absl::StrCat("f32 E=", E), T, 1e-12, [E](Harness& h) {
      auto [w, ids] = h.b->MoeRoute(h.Arg("logits", {-1, E}), E >= 64 ? 8 : 2);
      return std::vector<Value*>{w, ids};
    });
  // moe_router (fuse-moe-router, one token): the router's product and the routing in one launch
  // (gemv_splitk_route: the product's last block routes; its ticket must be zero again for the
  // next of the 3 calls) or, where K leaves gemv_splitk, two (gemv, then the routing launch).
  // Gemma 4 26B-A4B's (softmax, per-expert scales), Qwen3.5 35B-A3B's, Step 3.5's (sigmoid,
  // selection bias, norm, scale) shapes, a bf16 router, and K = 160 (two launches).
  struct RouterCase {
    const char* label;
    GgmlType w;
    int64_t E, K, k;
    bool sigmoid, per_expert;
  };
  for (const RouterCase& rc :
       {RouterCase{"f32 E=128 K=2816 softmax scales", GgmlType::kF32, 128, 2816, 8, false, true},
        RouterCase{"f32 E=256 K=2048 softmax", GgmlType::kF32, 256, 2048, 8, false, false},
        RouterCase{"f32 E=288 K=4096 sigmoid bias", GgmlType::kF32, 288, 4096, 8, true, true},
        RouterCase{"bf16 E=64 K=512 sigmoid", GgmlType::kBF16, 64, 512, 4, true, false},
        RouterCase{"f32 E=32 K=160 softmax two launches", GgmlType::kF32, 32, 160, 4, false, false}})
    Check(
        "moe_router", rc.label, 1, 1e-10,
        [&rc](Harness& h) {
          h.static_t = 1;
          std::vector<Value*> ops = {h.Arg("x", {-1, rc.K}), h.Weight("router", rc.w, {rc.K, rc.E}, -0.1f, 0.1f)};
          if (rc.per_expert)
            ops.push_back(h.Weight("per_expert", GgmlType::kF32, {rc.E}, rc.sigmoid ? 0.0f : 0.5f, 1.0f));
          ir::AttrDict at;
          at.Set("k", rc.k);
          if (rc.sigmoid) {
            at.Set("gate", "sigmoid");
            at.Set("norm", int64_t{1});
            at.Set("scale", 2.5);
          }
          auto r = h.b->Build(ir::OpKind::kMoeRouter, ops, std::move(at));
          return std::vector<Value*>(r.begin(), r.end());
        },
        /*calls=*/3);
  FOR_T Check("gated_add", "f32", T, 1e-12, [](Harness& h) {
    return std::vector<Value*>{h.b->GatedAdd(h.Arg("a", {-1, 300}), h.Arg("b", {-1, 300}), h.Arg("g", {-1, 1}))};
  });
  constexpr int64_t E = 8, k = 2, K = 256, F = 128;
  struct MoeCase {
    std::string label;
    GgmlType routed, shared;
    int64_t Fs;
    bool fused, with_shared;
    int64_t width = F;  // the experts' width
  };
  std::vector<MoeCase> cases;
  for (DType d : kernels::cuda::GpuBlockFormats()) {
    const int64_t qk = ir::InfoOf(d).block_elems;
    if (K % qk != 0 || F % qk != 0) continue;
    cases.push_back({std::string(ir::DTypeName(d)), GgmlOf(d), GgmlOf(d), 256, false, true});
  }
  cases.push_back({"q8_0 fused gate_up", GgmlType::kQ8_0, GgmlType::kQ8_0, 256, true, true});
  cases.push_back({"q8_0 shared Fs=F", GgmlType::kQ8_0, GgmlType::kQ8_0, F, false, true});
  cases.push_back({"q4_0 + q8_0 shared", GgmlType::kQ4_0, GgmlType::kQ8_0, F, false, true});
  // The fused down's forms (GemvQuant.cu GQ_PACK / GQ_SPLIT, chosen from the row's lanes): F = 512
  // q4_K packs 4 choices a chunk; F = 1280 q8_0 rows take two chunks, split over the block's
  // warps; F = 1280 q6_K (20 lanes, realigned 210-byte blocks) neither packed nor split.
  cases.push_back({"q4_K shared Fs=F=512", GgmlType::kQ4_K, GgmlType::kQ4_K, 512, false, true, 512});
  cases.push_back({"q8_0 shared Fs=F=1280", GgmlType::kQ8_0, GgmlType::kQ8_0, 1280, false, true, 1280});
  cases.push_back({"q6_K shared Fs=F=1280", GgmlType::kQ6_K, GgmlType::kQ6_K, 1280, false, true, 1280});
  cases.push_back({"q8_0 experts only", GgmlType::kQ8_0, GgmlType::kQ8_0, 0, false, false});
  // 16/32-bit experts: the grouped products at every T (bf16 operands).
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16})
    cases.push_back({std::string(formats::GgmlTypeName(t)), t, t, 256, false, true});
  for (const MoeCase& mc : cases)
    for (int64_t T : kBlockTs) {
      // T <= 8 on blocks: the decode GEMVs (q8 activations); else MoeGemm.cu (bf16 operands).
      const bool blocks = mc.routed != GgmlType::kF32 && mc.routed != GgmlType::kF16 && mc.routed != GgmlType::kBF16;
      Check(
          mc.with_shared ? "moe_ffn" : "moe_experts", mc.label, T, blocks && T <= 8 ? kQ8ActivationBound : kBf16Bound,
          [&](Harness& h) {
            const int64_t W = mc.width;
            Value* x = h.Arg("x", {-1, K});
            Value* w = h.Arg("w", {-1, k});
            Value* ids = h.Arg("ids", {-1, k}, DType::kI32);
            Value* down = h.Weight("down", mc.routed, {W, K, E}, -0.2f, 0.2f);
            std::vector<Value*> gu;
            if (mc.fused) {
              gu.push_back(h.Weight("gate_up", mc.routed, {K, 2 * W, E}, -0.2f, 0.2f));
            } else {
              gu.push_back(h.Weight("gate", mc.routed, {K, W, E}, -0.2f, 0.2f));
              gu.push_back(h.Weight("up", mc.routed, {K, W, E}, -0.2f, 0.2f));
            }
            if (!mc.with_shared) return std::vector<Value*>{h.b->MoeExperts(x, w, ids, down, gu)};
            std::vector<Value*> ops = {x,
                                       w,
                                       ids,
                                       h.Weight("sh_gate_inp", GgmlType::kF32, {K, 1}, -0.2f, 0.2f),
                                       h.Weight("sh_gate", mc.shared, {K, mc.Fs}, -0.2f, 0.2f),
                                       h.Weight("sh_up", mc.shared, {K, mc.Fs}, -0.2f, 0.2f),
                                       h.Weight("sh_down", mc.shared, {mc.Fs, K}, -0.2f, 0.2f),
                                       down};
            ops.insert(ops.end(), gu.begin(), gu.end());
            return std::vector<Value*>{h.b->Build1(ir::OpKind::kMoeFfn, ops)};
          },
          1, E);
    }
  // Expert parallelism (expert_parts, shard-tensor-parallel): the stacks hold this rank's E of the
  // router's 2E (rank 0) or 4E (rank 3 of 4); ids span the router's experts, so about half (three
  // quarters) of the choices are other ranks' and add nothing. The decode GEMVs (fused down and,
  // with a q4_0 + q8_0 shared expert, gemv_q_moe + moe_combine) and the grouped products.
  struct EpCase {
    std::string label;
    GgmlType routed, shared;
    bool with_shared;
    int parts, rank;
  };
  for (const EpCase& ec : {EpCase{"q8_0 experts", GgmlType::kQ8_0, GgmlType::kQ8_0, false, 2, 1},
                           EpCase{"q8_0 + q8_0 shared", GgmlType::kQ8_0, GgmlType::kQ8_0, true, 4, 3},
                           EpCase{"q4_0 + q8_0 shared", GgmlType::kQ4_0, GgmlType::kQ8_0, true, 2, 0},
                           EpCase{"bf16 experts", GgmlType::kBF16, GgmlType::kBF16, false, 2, 1}})
    for (int64_t T : kBlockTs) {
      const bool blocks = ec.routed != GgmlType::kBF16;
      Check(
          ec.with_shared ? "moe_ffn" : "moe_experts", absl::StrCat(ec.label, " expert_parts=", ec.parts), T,
          blocks && T <= 8 ? kQ8ActivationBound : kBf16Bound,
          [&](Harness& h) {
            h.tp_rank = ec.rank;
            h.tp_size = ec.parts;
            Value* x = h.Arg("x", {-1, K});
            Value* w = h.Arg("w", {-1, k});
            Value* ids = h.Arg("ids", {-1, k}, DType::kI32);
            Value* down = h.Weight("down", ec.routed, {F, K, E}, -0.2f, 0.2f);
            Value* gate = h.Weight("gate", ec.routed, {K, F, E}, -0.2f, 0.2f);
            Value* up = h.Weight("up", ec.routed, {K, F, E}, -0.2f, 0.2f);
            Value* y = nullptr;
            if (!ec.with_shared) {
              y = h.b->MoeExperts(x, w, ids, down, {gate, up});
            } else {
              y = h.b->Build1(ir::OpKind::kMoeFfn,
                              {x, w, ids, h.Weight("sh_gate_inp", GgmlType::kF32, {K, 1}, -0.2f, 0.2f),
                               h.Weight("sh_gate", ec.shared, {K, F}, -0.2f, 0.2f),
                               h.Weight("sh_up", ec.shared, {K, F}, -0.2f, 0.2f),
                               h.Weight("sh_down", ec.shared, {F, K}, -0.2f, 0.2f), down, gate, up});
            }
            y->def()->attrs().Set("expert_parts", int64_t{ec.parts});
            return std::vector<Value*>{y};
          },
          1, E * ec.parts);
    }
  // Step 3.5's ungated shared expert (moe_ffn_ungated, weight 1): in the routed launches (q4_K, the
  // fused down), clamped (routed and shared tiles alike), of another format (apart: moe_combine
  // with no gate), bf16 (the grouped products), and rank 1 of 2 (expert parallelism).
  struct UngatedCase {
    std::string label;
    GgmlType routed, shared;
    double clamp;
    int parts, rank;
  };
  for (const UngatedCase& uc :
       {UngatedCase{"q4_K + q4_K shared", GgmlType::kQ4_K, GgmlType::kQ4_K, 0.0, 1, 0},
        UngatedCase{"q8_0 + q8_0 shared clamp 1.5", GgmlType::kQ8_0, GgmlType::kQ8_0, 1.5, 1, 0},
        UngatedCase{"q4_0 + q8_0 shared clamp 1.5", GgmlType::kQ4_0, GgmlType::kQ8_0, 1.5, 1, 0},
        UngatedCase{"bf16 shared clamp 1.5", GgmlType::kBF16, GgmlType::kBF16, 1.5, 1, 0},
        UngatedCase{"q8_0 + q8_0 shared expert_parts=2", GgmlType::kQ8_0, GgmlType::kQ8_0, 0.0, 2, 1}})
    for (int64_t T : kBlockTs) {
      const bool blocks = uc.routed != GgmlType::kBF16;
      Check(
          "moe_ffn_ungated", uc.label, T, blocks && T <= 8 ? kQ8ActivationBound : kBf16Bound,
          [&](Harness& h) {
            h.tp_rank = uc.rank;
            h.tp_size = uc.parts;
            const int64_t W = uc.routed == GgmlType::kQ4_K ? 256 : F;
            Value* x = h.Arg("x", {-1, K});
            Value* w = h.Arg("w", {-1, k});
            Value* ids = h.Arg("ids", {-1, k}, DType::kI32);
            Value* y =
                h.b->Build1(ir::OpKind::kMoeFfnUngated, {x, w, ids, h.Weight("sh_gate", uc.shared, {K, W}, -0.2f, 0.2f),
                                                         h.Weight("sh_up", uc.shared, {K, W}, -0.2f, 0.2f),
                                                         h.Weight("sh_down", uc.shared, {W, K}, -0.2f, 0.2f),
                                                         h.Weight("down", uc.routed, {W, K, E}, -0.2f, 0.2f),
                                                         h.Weight("gate", uc.routed, {K, W, E}, -0.2f, 0.2f),
                                                         h.Weight("up", uc.routed, {K, W, E}, -0.2f, 0.2f)});
            if (uc.clamp > 0) y->def()->attrs().Set("clamp", uc.clamp);
            if (uc.parts > 1) y->def()->attrs().Set("expert_parts", int64_t{uc.parts});
            return std::vector<Value*>{y};
          },
          1, E * uc.parts);
    }
  // GELU experts (Gemma 4): q8_0 (decode GEMVs at T <= 8, MoeGemm.cu past it) and bf16 (grouped).
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kBF16})
    for (int64_t T : kBlockTs) {
      const bool blocks = t == GgmlType::kQ8_0;
      Check(
          "moe_experts", absl::StrCat(formats::GgmlTypeName(t), " gelu"), T,
          blocks && T <= 8 ? kQ8ActivationBound : kBf16Bound,
          [&](Harness& h) {
            Value* x = h.Arg("x", {-1, K});
            Value* w = h.Arg("w", {-1, k});
            Value* ids = h.Arg("ids", {-1, k}, DType::kI32);
            Value* down = h.Weight("down", t, {F, K, E}, -0.2f, 0.2f);
            Value* gu = h.Weight("gate_up", t, {K, 2 * F, E}, -0.2f, 0.2f);
            return std::vector<Value*>{h.b->MoeExperts(x, w, ids, down, {gu}, "gelu")};
          },
          1, E);
    }
}

// The ops of a step over several sequences at the 9B's shapes: positions, the paged KV append
// and attention (split-KV for every row, slots of shuffled blocks), the per-entry conv and scan
// (with their fused forms), the last row of each entry. Two calls: the second attends over and
// continues from the state the first left, in another entry order.
TEST_F(OpTableTest, Sequences) {
  auto seq_harness = [](Harness& h) -> std::array<Value*, 3> {
    SeqModule(h);
    h.id_range = 1;  // the random fill of the i32 arguments, overwritten by fix_args
    h.fix_args = [](int64_t T, int call, std::vector<HostTensor>& args) { SeqBatchArgs(T, call, args, 0); };
    return {h.Arg("tok_seq", {-1}, DType::kI32), h.Arg("seq_slot", {kSlots}, DType::kI32),
            h.Arg("seq_start", {kSlots + 1}, DType::kI32)};
  };
  // f32, f16 and q8_0 pools (-ctk / -ctv f16 / q8_0: rounded or quantized on append, widened on
  // read, as the CPU does), and a sliding window of 16 keys (Gemma 4's SWA layers).
  for (auto [cache_t, window] :
       {std::pair<DType, int64_t>{DType::kF32, 0}, {DType::kF16, 0}, {DType::kQ8_0, 0}, {DType::kF32, 16}})
    FOR_T Check(
        "paged_attention", absl::StrCat(ir::DTypeName(cache_t), window > 0 ? " w16" : ""), T, 1e-9,
        [&](Harness& h) {
          auto [tok_seq, seq_slot, seq_start] = seq_harness(h);
          h.prepare = WriteBlockTable;
          Value* q = h.Arg("q", {-1, 16, 256});
          Value* k = h.Arg("k", {-1, 4, 256});
          Value* v = h.Arg("v", {-1, 4, 256});
          Value* ctr = h.State(ir::StateKind::kPosition, "pos", DType::kI32, {kSlots});
          Value* blocks = h.State(ir::StateKind::kBlocks, "kv_blocks", DType::kI32, {kSlots, kMaxBlocks});
          Value* kc = h.State(ir::StateKind::kKv, "k_cache", cache_t, {kPool, kKvBlock, 4, 256});
          Value* vc = h.State(ir::StateKind::kKv, "v_cache", cache_t, {kPool, kKvBlock, 4, 256});
          auto ps = h.b->SeqPositions(ctr, tok_seq, seq_slot, seq_start);
          h.b->PagedKvAppend(k, v, kc, vc, blocks, ps[0], ps[1]);
          Value* o = h.b->PagedAttention(q, kc, vc, blocks, ps[0], ps[1], 1.0 / 16.0, window);
          h.b->SeqAdvancePositions(ctr, seq_slot, seq_start);
          return std::vector<Value*>{o, ps[0], ps[1]};
        },
        2);
  for (bool silu : {false, true})
    FOR_T Check(
        silu ? "seq_conv1d+silu" : "seq_conv1d_causal", "f32", T, 1e-12,
        [&](Harness& h) {
          auto [tok_seq, seq_slot, seq_start] = seq_harness(h);
          Value* x = h.Arg("x", {-1, 1536});
          Value* st = h.State(ir::StateKind::kConv, "conv", DType::kF32, {kSlots, 1536, 3});
          ir::AttrDict a;
          if (silu) a.Set("activation", std::string("silu"));
          return std::vector<Value*>{h.b->Build1(
              ir::OpKind::kSeqConv1dCausal, {x, h.Weight("w", GgmlType::kF32, {4, 1536}), st, seq_slot, seq_start}, a)};
        },
        2);
  for (bool l2 : {false, true})
    FOR_T Check(
        l2 ? "seq_gated_delta_scan+l2" : "seq_gated_delta_scan", "f32", T, 1e-8,
        [&](Harness& h) {
          auto [tok_seq, seq_slot, seq_start] = seq_harness(h);
          Value* q = h.Arg("q", {-1, 16, 128});
          Value* k = h.Arg("k", {-1, 16, 128});
          if (!l2) {
            q = h.b->L2Norm(q, 1e-6);
            k = h.b->L2Norm(k, 1e-6);
          }
          Value* v = h.Arg("v", {-1, 32, 128});
          auto [beta, g] =
              h.b->DeltaNetGates(h.Arg("b", {-1, 32}), h.Arg("a", {-1, 32}), h.Weight("dt", GgmlType::kF32, {32}),
                                 h.Weight("ssm_a", GgmlType::kF32, {32}, -2, -0.1f));
          Value* st = h.State(ir::StateKind::kDelta, "delta", DType::kF32, {kSlots, 32, 128, 128});
          ir::AttrDict a{{"scale", 1.0 / std::sqrt(128.0)}};
          if (l2) a.Set("qk_l2_eps", 1e-6);
          return std::vector<Value*>{
              h.b->Build1(ir::OpKind::kSeqGatedDeltaScan, {q, k, v, g, beta, st, seq_slot, seq_start}, a)};
        },
        2);
  FOR_T Check("take_seq_last_rows", "f32", T, 0, [&](Harness& h) {
    auto [tok_seq, seq_slot, seq_start] = seq_harness(h);
    return std::vector<Value*>{h.b->TakeSeqLastRows(h.Arg("x", {-1, 1024}), seq_start)};
  });
}

TEST_F(OpTableTest, DataMovement) {
  FOR_T {
    Check("take_last_row", "f32", T, 0, [](Harness& h) {
      return std::vector<Value*>{h.b->TakeLastRow(h.Arg("x", {-1, 300}))};
    });
    Check("concat", "f32", T, 0, [](Harness& h) {
      return std::vector<Value*>{h.b->Concat({h.Arg("a", {-1, 100}), h.Arg("b", {-1, 60})}, 1)};
    });
    Check("split", "f32", T, 0, [](Harness& h) {
      auto p = h.b->Split(h.Arg("x", {-1, 160}), 1, {64, 64, 32});
      return std::vector<Value*>{p[0], p[1], p[2]};
    });
    // Sizes that are not whole 16-byte pieces: the element-wise copy (copy_axis_32).
    Check("split", "f32 odd", T, 0, [](Harness& h) {
      auto p = h.b->Split(h.Arg("x", {-1, 160}), 1, {7, 9, 144});
      return std::vector<Value*>{p[0], p[1], p[2]};
    });
    Check("view", "f32", T, 0, [](Harness& h) {
      return std::vector<Value*>{h.b->View(h.Arg("x", {-1, 160}), 1, 40, 80)};
    });
    Check("reshape", "f32", T, 0, [](Harness& h) {
      Value* y = h.b->Reshape(h.Arg("x", {-1, 160}), Shape{Dim::Symbol("T"), 4, 40});
      return std::vector<Value*>{h.b->Scale(y, 2.0)};
    });
    Check("cast", "f32", T, 0, [](Harness& h) {
      return std::vector<Value*>{h.b->Cast(h.Arg("x", {-1, 160}), DType::kF32)};
    });
  }
}

}  // namespace
}  // namespace memra::runtime

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    constexpr char kPrecompile[] = "--precompile-kernels=";
    if (std::strncmp(argv[i], kPrecompile, sizeof(kPrecompile) - 1) == 0 && argv[i][sizeof(kPrecompile) - 1] != 0) {
      memra::runtime::PrecompileDir() = argv[i] + sizeof(kPrecompile) - 1;
      continue;
    }
    int64_t index = 0, count = 0;
    char tail = 0;
    if (std::sscanf(argv[i], "--rows=%ld/%ld%c", &index, &count, &tail) != 2 || count < 1 || index < 0 ||
        index >= count) {
      std::fprintf(stderr,
                   "OpTable_test: unknown argument '%s' (--rows=I/N, I < N; --precompile-kernels=DIR; and gtest's "
                   "flags)\n",
                   argv[i]);
      return 2;
    }
    memra::runtime::Shard().index = index;
    memra::runtime::Shard().count = count;
  }
  return RUN_ALL_TESTS();
}
