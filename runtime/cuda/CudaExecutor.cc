#include "runtime/cuda/CudaExecutor.h"

#include "runtime/ArgumentBinding.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codegen/KernelSelect.h"
#include "frontends/gguf/GgufFile.h"
#include "frontends/gguf/Quant.h"
#include "ir/Function.h"
#include "ir/StatusMacros.h"
#include "ir/support/ProgressBar.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/Weight.h"
#include "passes/Capture.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaDevice.h"

namespace memra::runtime {

namespace kc = memra::kernels::cpu;
using cuda::CUdeviceptr;
using cuda::CUfunction;
using cuda::CuCheck;
using ir::DType;
using ir::Op;
using ir::OpKind;

struct CudaExecutor::DeviceWeight {
  const ir::Weight* weight = nullptr;
  cuda::DeviceBuffer matrix;   // device storage of matrix uses (f32 / f16 / bf16)
  DType matrix_dtype = DType::kF32;
  int64_t rows = 0, cols = 0;
  cuda::DeviceBuffer values;   // f32 values for element consumers (norms, conv, biases)
  // Q8_0 matrices also keep their blocks for the one-token GEMV (kernels/cuda/Gemv.cu), repacked
  // so loads stay 16-byte aligned: int8 values [rows, cols] and one f32 scale per 32 values.
  cuda::DeviceBuffer q8, q8_scales;
};

namespace {

struct ResolvedLaunch {
  codegen::Launch spec;
  CUfunction fn = nullptr;
};

// A value's place in the arena (or an alias of another's).
struct Slot {
  int64_t offset = -1;
  int64_t bytes = 0;
};

struct Step {
  const Op* op = nullptr;
  codegen::OpShapes shapes;  // at T = bucket
  std::vector<ResolvedLaunch> launches;
  bool gemm = false;
  bool gemv = false;
  codegen::StepScratch scratch;
  int64_t scratch_offset = -1;  // the step's scratch: the GEMM's 16-bit activation copy first,
  int64_t aux_offset = -1;      // then an f32 temporary of fused ops (matmul_swiglu's gate
                                // product, qk_norm_rope's normed q / k)
  int64_t scratch_bytes = 0;
};

int64_t ElemBytes(DType d) { return d == DType::kI64 || d == DType::kF64 ? 8 : d == DType::kF16 || d == DType::kBF16 ? 2 : 4; }

int64_t Numel(llvm::ArrayRef<int64_t> s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

uint16_t F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Kernel arguments, packed as cuLaunchKernel wants them (pointers to each value).
class KernelArgs {
 public:
  template <typename T>
  KernelArgs& Add(T v) {
    static_assert(sizeof(T) <= 8);
    std::memcpy(store_[n_].data(), &v, sizeof(T));
    ptrs_[n_] = store_[n_].data();
    ++n_;
    return *this;
  }
  void** ptrs() { return ptrs_.data(); }

 private:
  std::array<std::array<uint8_t, 8>, 24> store_{};
  std::array<void*, 24> ptrs_{};
  int n_ = 0;
};

absl::StatusOr<llvm::SmallVector<int64_t, 4>> ConcreteShape(const ir::Value* v, const ir::SymbolBindings& bindings) {
  llvm::SmallVector<int64_t, 4> out;
  for (const ir::Dim& d : v->shape().dims()) {
    auto x = d.Evaluate(bindings);
    if (!x) return absl::InvalidArgumentError(absl::StrCat("unbound symbol ", d.ToString()));
    out.push_back(*x);
  }
  return out;
}

// Token ring of the device decode loop: capacity (ids) + one write index.
constexpr int64_t kTokenRing = 1024;

absl::Status OpError(const Op& op, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("cuda executor: ", op.Summary(), ": ", msg));
}

}  // namespace

// A run of steps executed together: one CUDA graph when capturable (instantiated on the
// program's second call), else eagerly op by op.
struct SegmentRun {
  size_t begin = 0, end = 0;  // steps [begin, end)
  bool capturable = false;
  std::string reason;         // why not (from the IR's segment or passes/Capture.h)
  cuda::CUgraphExec exec = nullptr;
};

struct CudaExecutor::Program {
  ~Program() {
    if (driver == nullptr) return;
    for (SegmentRun& r : segments)
      if (r.exec) driver->cuGraphExecDestroy(r.exec);
    if (greedy_exec) driver->cuGraphExecDestroy(greedy_exec);
    for (cuda::CUevent e : events) driver->cuEventDestroy(e);
  }
  const cuda::CudaDriver* driver = nullptr;
  const ir::Function* fn = nullptr;
  int64_t bucket = 1;
  int64_t calls = 0;  // completed Run calls (graphs are captured from the second on)
  bool planned_arena = false;  // the layout is the module's memory plan (plan-memory offsets)
  std::vector<Step> steps;
  std::vector<SegmentRun> segments;
  std::vector<std::pair<double, double>> step_work;  // per step: FLOPs, weight bytes (profile)
  ResolvedLaunch greedy;                  // @decode: the greedy pick closing the device loop
  cuda::CUgraphExec greedy_exec = nullptr;  // @decode: the whole step + greedy pick
  absl::flat_hash_map<const ir::Value*, Slot> slots;  // args and results (aliases resolved)
  cuda::DeviceBuffer arena;
  int64_t arena_bytes = 0;
  std::vector<const Op*> kv_appends;
  std::vector<cuda::CUevent> events;  // profiling: one before each step, one after the last
  CUdeviceptr Ptr(const ir::Value* v) const { return arena.ptr() + slots.at(v).offset; }
};

CudaExecutor::CudaExecutor(const ir::Module& module, const gguf::GgufFile& file, CudaExecutorOptions options)
    : module_(module), file_(file), options_(std::move(options)) {}

CudaExecutor::~CudaExecutor() {
  if (dev_) {
    (void)dev_->MakeCurrent();
    (void)dev_->Synchronize("shutdown");
  }
  programs_.clear();
  state_.clear();
  weights_.clear();
  modules_.clear();
  blas_.reset();
}

absl::StatusOr<std::unique_ptr<CudaExecutor>> CudaExecutor::Create(const ir::Module& module,
                                                                   const gguf::GgufFile& file,
                                                                   const CudaExecutorOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<CudaExecutor> e(new CudaExecutor(module, file, options));
  MEMRA_ASSIGN_OR_RETURN(e->dev_, cuda::CudaDevice::Open(options.device));
  codegen::CompileOptions co;
  co.arch = e->dev_->arch();
  co.cache_dir = options.kernel_cache_dir;
  co.jobs = options.compile_jobs;
  MEMRA_ASSIGN_OR_RETURN(e->compiler_, codegen::KernelCompiler::Create(co));
  if (options.precompiled) e->compiler_->AddPrecompiled(*options.precompiled);
  MEMRA_ASSIGN_OR_RETURN(e->blas_, cuda::CublasLt::Create());
  MEMRA_RETURN_IF_ERROR(e->UploadWeights());
  MEMRA_RETURN_IF_ERROR(e->AllocateState());
  e->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return e;
}

const codegen::CompileStats& CudaExecutor::compile_stats() const { return compiler_->stats(); }
std::string CudaExecutor::DeviceDescription() const { return dev_->Describe(); }

bool CudaExecutor::UsesMemoryPlan(absl::string_view name) const {
  for (const auto& [k, p] : programs_)
    if (k.first == name && p->planned_arena) return true;
  return false;
}

std::map<std::string, uint64_t> CudaExecutor::arena_bytes() const {
  std::map<std::string, uint64_t> out;
  for (const auto& [k, p] : programs_) out[absl::StrCat(k.first, "@", k.second)] = p->arena_bytes;
  return out;
}

absl::Status CudaExecutor::UploadWeights() {
  uint64_t total = 0;
  for (const auto& wp : module_.weights())
    if (const gguf::TensorInfo* t = file_.FindTensor(wp->name())) total += t->data.size();
  std::optional<ProgressBar> bar;
  if (options_.progress && total > (64u << 20)) bar.emplace("upload weights", total);
  uint64_t done = 0;
  kc::ThreadPool pool(0);
  for (const auto& wp : module_.weights()) {
    const ir::Weight* w = wp.get();
    const gguf::TensorInfo* t = file_.FindTensor(w->name());
    if (t == nullptr)
      return absl::NotFoundError(absl::StrCat(file_.path(), ": tensor \"", w->name(), "\" (a weight of the module) not found"));
    if (!w->shape().IsStatic())
      return absl::InvalidArgumentError(absl::StrCat("weight @", w->name(), " has a symbolic shape"));
    if (ir::InfoOf(w->dtype()).ggml_id != static_cast<int>(t->type))
      return absl::InvalidArgumentError(absl::StrCat(file_.path(), ": tensor \"", w->name(), "\" has type ",
                                                     gguf::GgmlTypeName(t->type), ", the module declares ",
                                                     ir::DTypeName(w->dtype())));
    bool matrix_use = false, value_use = false;
    for (const ir::Use& u : w->uses()) {
      const OpKind k = u.user->kind();
      const bool m = ((k == OpKind::kMatMul || k == OpKind::kMatMulGroup || k == OpKind::kMatMulSwiglu) &&
                      u.operand_index >= 1) ||
                     (k == OpKind::kEmbed && u.operand_index == 1);
      (m ? matrix_use : value_use) = true;
    }
    auto dw = std::make_unique<DeviceWeight>();
    dw->weight = w;
    const int64_t n = t->NumElements();
    if (matrix_use) {
      MEMRA_ASSIGN_OR_RETURN(kc::WeightView view, kc::WeightView::FromTensor(*t));
      dw->rows = view.rows;
      dw->cols = view.cols;
      dw->matrix_dtype = codegen::DeviceWeightDType(w->dtype());
      if (dw->matrix_dtype == w->dtype()) {
        MEMRA_ASSIGN_OR_RETURN(dw->matrix, dev_->Alloc(t->data.size(), absl::StrCat("weight ", w->name())));
        MEMRA_RETURN_IF_ERROR(dev_->Upload(dw->matrix.ptr(), t->data.data(), t->data.size()));
      } else {
        // Quantized: dequantize rows on the host (bit-exact with ggml), round to bf16, upload.
        if (!kc::CanDecode(t->type))
          return absl::UnimplementedError(absl::StrCat("tensor \"", w->name(), "\": no dequantizer for ",
                                                       gguf::GgmlTypeName(t->type)));
        std::vector<uint16_t> bf(static_cast<size_t>(n));
        absl::Status err;
        std::mutex mu;
        pool.ParallelFor(0, view.rows, 16, [&](int64_t lo, int64_t hi) {
          std::vector<float> row(static_cast<size_t>(view.cols));
          for (int64_t r = lo; r < hi; ++r) {
            absl::Status s = kc::DequantizeRow(view, r, row.data());
            if (!s.ok()) {
              std::lock_guard<std::mutex> l(mu);
              err = s;
              return;
            }
            for (int64_t c = 0; c < view.cols; ++c) bf[r * view.cols + c] = F32ToBf16(row[c]);
          }
        });
        MEMRA_RETURN_IF_ERROR(err);
        MEMRA_ASSIGN_OR_RETURN(dw->matrix, dev_->Alloc(bf.size() * 2, absl::StrCat("weight ", w->name())));
        MEMRA_RETURN_IF_ERROR(dev_->Upload(dw->matrix.ptr(), bf.data(), bf.size() * 2));
      }
      weight_bytes_ += dw->matrix.bytes();
      if (codegen::GemvStorage(w->dtype()) == 3) {  // the q8 GEMV reads repacked blocks
        const int64_t blocks = view.rows * (view.cols / 32);
        if (static_cast<int64_t>(t->data.size()) != blocks * 34)
          return absl::InvalidArgumentError(absl::StrCat("tensor \"", w->name(), "\": q8_0 data size mismatch"));
        std::vector<int8_t> qs(static_cast<size_t>(blocks * 32));
        std::vector<float> scales(static_cast<size_t>(blocks));
        const uint8_t* src = reinterpret_cast<const uint8_t*>(t->data.data());
        for (int64_t b = 0; b < blocks; ++b) {
          uint16_t d;
          std::memcpy(&d, src + b * 34, 2);
          scales[b] = gguf::HalfToFloat(d);
          std::memcpy(qs.data() + b * 32, src + b * 34 + 2, 32);
        }
        MEMRA_ASSIGN_OR_RETURN(dw->q8, dev_->Alloc(qs.size(), absl::StrCat("weight ", w->name(), " (q8 values)")));
        MEMRA_RETURN_IF_ERROR(dev_->Upload(dw->q8.ptr(), qs.data(), qs.size()));
        MEMRA_ASSIGN_OR_RETURN(dw->q8_scales, dev_->Alloc(scales.size() * 4, absl::StrCat("weight ", w->name(), " (q8 scales)")));
        MEMRA_RETURN_IF_ERROR(dev_->Upload(dw->q8_scales.ptr(), scales.data(), scales.size() * 4));
        weight_bytes_ += dw->q8.bytes() + dw->q8_scales.bytes();
      }
    }
    if (value_use) {
      std::vector<float> vals(static_cast<size_t>(n));
      MEMRA_ASSIGN_OR_RETURN(kc::WeightView flat, kc::WeightView::Make(t->type, 1, n, t->data));
      MEMRA_RETURN_IF_ERROR(kc::DequantizeRow(flat, 0, vals.data()));
      MEMRA_ASSIGN_OR_RETURN(dw->values, dev_->Alloc(vals.size() * 4, absl::StrCat("weight ", w->name())));
      MEMRA_RETURN_IF_ERROR(dev_->Upload(dw->values.ptr(), vals.data(), vals.size() * 4));
      weight_bytes_ += dw->values.bytes();
    }
    done += t->data.size();
    if (bar) bar->Update(done);
    weights_[w] = std::move(dw);
  }
  if (bar) bar->Finish();
  return absl::OkStatus();
}

absl::Status CudaExecutor::AllocateState() {
  for (const auto& sp : module_.states()) {
    const ir::StateVar* s = sp.get();
    if (!s->shape().IsStatic())
      return absl::InvalidArgumentError(absl::StrCat("state @", s->name(), " has a symbolic shape"));
    int64_t n = 1;
    for (const ir::Dim& d : s->shape().dims()) n *= d.value();
    const DType dt = s->dtype();
    if (dt != DType::kF32 && dt != DType::kI32 && dt != DType::kI64)
      return absl::UnimplementedError(absl::StrCat("state @", s->name(), ": the CUDA executor keeps f32, i32 and i64 state"));
    MEMRA_ASSIGN_OR_RETURN(cuda::DeviceBuffer b, dev_->Alloc(n * ElemBytes(dt), absl::StrCat("state @", s->name())));
    state_[s] = std::make_unique<cuda::DeviceBuffer>(std::move(b));
    if (s->state_kind() == ir::StateKind::kPosition && (position_state_ == nullptr || s->name() == "pos"))
      position_state_ = s;
    if (s->state_kind() == ir::StateKind::kKv) kv_capacity_ = std::min(kv_capacity_, s->shape()[0].value());
  }
  return ResetState();
}

absl::Status CudaExecutor::ResetState() {
  MEMRA_RETURN_IF_ERROR(dev_->MakeCurrent());
  for (auto& [s, b] : state_) MEMRA_RETURN_IF_ERROR(dev_->Zero(b->ptr(), b->bytes()));
  position_ = 0;
  return dev_->Synchronize("state reset");
}

absl::StatusOr<HostTensor> CudaExecutor::ReadState(absl::string_view name) const {
  const ir::StateVar* s = module_.state(name);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("no state @", name));
  llvm::SmallVector<int64_t, 4> shape;
  for (const ir::Dim& d : s->shape().dims()) shape.push_back(d.value());
  if (s->dtype() != DType::kF32 && s->dtype() != DType::kI32)
    return absl::UnimplementedError(absl::StrCat("state @", name, ": only f32 / i32 can be read"));
  HostTensor t = HostTensor::Zeros(s->dtype(), shape);
  MEMRA_RETURN_IF_ERROR(dev_->MakeCurrent());
  void* dst = s->dtype() == DType::kF32 ? static_cast<void*>(t.f32()) : static_cast<void*>(t.i32());
  MEMRA_RETURN_IF_ERROR(dev_->Download(dst, state_.at(s)->ptr(), t.numel() * 4));
  return t;
}

absl::Status CudaExecutor::Prepare(absl::string_view name, int64_t T) {
  const ir::Function* fn = module_.function(name);
  if (fn == nullptr) return absl::NotFoundError(absl::StrCat("cuda executor: the module has no function @", name));
  bool symbolic = false;
  for (unsigned i = 0; i < fn->num_arguments(); ++i)
    for (const ir::Dim& d : fn->argument(i)->shape().dims()) symbolic |= d.IsSymbolic();
  MEMRA_RETURN_IF_ERROR(dev_->MakeCurrent());
  MEMRA_ASSIGN_OR_RETURN(Program * p, GetProgram(*fn, symbolic ? codegen::TokenBucket(T) : 0));
  // @decode also gets the greedy pick of the device decode loop (when it returns one logits row).
  if (name == "decode" && codegen::GreedyNextKernel(*fn).ok()) MEMRA_RETURN_IF_ERROR(PrepareGreedy(*p));
  return absl::OkStatus();
}

absl::StatusOr<CudaExecutor::Program*> CudaExecutor::GetProgram(const ir::Function& fn, int64_t bucket) {
  const auto key = std::make_pair(fn.name(), bucket);
  if (auto it = programs_.find(key); it != programs_.end()) return it->second.get();
  auto p = std::make_unique<Program>();
  p->fn = &fn;
  p->bucket = bucket;
  // A static function is specialized to its own bucket (select-kernels and the plan key its
  // modules by it; @decode: 1); a generic one to the call's.
  const int64_t shape_bucket = bucket == 0 ? fn.attrs().I64Or("bucket", 1) : bucket;
  // 1. Kernel selection per op.
  std::vector<codegen::ModuleSpec> modules;
  for (const Op* op : fn.Ops()) {
    if (op->is(OpKind::kSegment)) continue;
    Step s;
    s.op = op;
    MEMRA_ASSIGN_OR_RETURN(s.shapes, codegen::ShapesAt(*op, shape_bucket));
    MEMRA_ASSIGN_OR_RETURN(codegen::OpKernels k, codegen::SelectKernels(*op, s.shapes));
    s.gemm = k.gemm;
    s.gemv = k.gemv;
    s.scratch = codegen::ScratchFor(*op, s.shapes, k);
    for (const codegen::Launch& l : k.launches) {
      s.launches.push_back({l, nullptr});
      modules.push_back(l.kernel.module);
    }
    if (op->is(OpKind::kKvAppend)) p->kv_appends.push_back(op);
    p->steps.push_back(std::move(s));
  }
  // 2. Compile (parallel, cached) and load.
  MEMRA_ASSIGN_OR_RETURN(auto cubins, compiler_->CompileAll(modules));
  for (size_t i = 0; i < modules.size(); ++i) {
    const std::string k = modules[i].Key();
    if (!modules_.count(k)) {
      MEMRA_ASSIGN_OR_RETURN(modules_[k], cuda::LoadedModule::Load(*dev_, *cubins[i], k));
    }
  }
  for (Step& s : p->steps)
    for (ResolvedLaunch& l : s.launches) {
      MEMRA_ASSIGN_OR_RETURN(l.fn, modules_.at(l.spec.kernel.module.Key())->Function(l.spec.kernel.entry));
    }
  // 3. Arena layout: liveness over the steps, first-fit offsets (256-byte aligned).
  absl::flat_hash_map<const ir::Value*, const ir::Value*> root;  // alias -> owner
  auto Root = [&](const ir::Value* v) {
    while (root.count(v)) v = root.at(v);
    return v;
  };
  struct Interval {
    int64_t bytes = 0, def = -1, last = -1;
  };
  std::vector<const ir::Value*> order;
  absl::flat_hash_map<const ir::Value*, Interval> live;
  auto bytes_of = [&](const ir::Value* v) -> absl::StatusOr<int64_t> {
    int64_t n = 1;
    for (const ir::Dim& d : v->shape().dims()) {
      auto x = d.IsConstant() ? std::optional<int64_t>(d.value()) : d.Evaluate({{d.symbol(), shape_bucket}});
      if (!x) return absl::InternalError("unbound dim");
      n *= *x;
    }
    return n * ElemBytes(v->dtype());
  };
  for (unsigned i = 0; i < fn.num_arguments(); ++i) {
    MEMRA_ASSIGN_OR_RETURN(int64_t b, bytes_of(fn.argument(i)));
    live[fn.argument(i)] = {b, -1, -1};
    order.push_back(fn.argument(i));
  }
  std::vector<std::pair<int64_t, int64_t>> scratch;  // (step, bytes)
  for (size_t si = 0; si < p->steps.size(); ++si) {
    const Step& s = p->steps[si];
    const Op& op = *s.op;
    for (unsigned i = 0; i < op.num_operands(); ++i) {
      const ir::Value* v = op.operand(i);
      if (v->kind() == ir::Value::Kind::kWeight || v->kind() == ir::Value::Kind::kState) continue;
      const ir::Value* r = Root(v);
      if (!live.count(r)) return OpError(op, absl::StrCat("operand ", i, " is not defined before use"));
      live[r].last = op.is(OpKind::kReturn) ? INT64_MAX : static_cast<int64_t>(si);
    }
    const bool alias = op.is(OpKind::kReshape) || op.is(OpKind::kCast);
    for (unsigned i = 0; i < op.num_results(); ++i) {
      const ir::Value* r = op.result(i);
      if (alias) {
        root[r] = Root(op.operand(0));
        continue;
      }
      MEMRA_ASSIGN_OR_RETURN(int64_t b, bytes_of(r));
      live[r] = {b, static_cast<int64_t>(si), static_cast<int64_t>(si)};
      order.push_back(r);
    }
  }
  // Place buffers in definition order; a buffer may reuse space whose owner died before it is
  // defined (strictly: last use < def, so a kernel never reads and writes the same bytes).
  struct Placed {
    int64_t off, bytes, def, last;
  };
  std::vector<Placed> placed;
  auto place = [&](int64_t bytes, int64_t def, int64_t last) {
    bytes = (bytes + 255) / 256 * 256;
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Placed& q : placed)
      if (!(q.last < def || last < q.def)) busy.push_back({q.off, q.off + q.bytes});
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (auto [b, e] : busy) {
      if (off + bytes <= b) break;
      off = std::max(off, e);
    }
    placed.push_back({off, bytes, def, last});
    return off;
  };
  for (const ir::Value* v : order) {
    Interval iv = live[v];
    if (iv.last < iv.def) iv.last = iv.def;  // unused result: still written
    p->slots[v] = {place(iv.bytes, iv.def, iv.last), iv.bytes};
  }
  for (size_t si = 0; si < p->steps.size(); ++si) {
    Step& s = p->steps[si];
    const int64_t cast = s.scratch.cast, aux = s.scratch.aux;  // codegen::ScratchFor (select-kernels' rule)
    if (cast + aux > 0) {
      s.scratch_bytes = cast + aux;
      s.scratch_offset = place(cast + aux, static_cast<int64_t>(si), static_cast<int64_t>(si));
      s.aux_offset = s.scratch_offset + cast;
    }
  }
  for (const Placed& q : placed) p->arena_bytes = std::max(p->arena_bytes, q.off + q.bytes);
  // 3b. A memory-planned static function (plan-memory's `arena` offsets, e.g. from a plan file):
  // its layout replaces the one above, so the device addresses are the ones the plan records.
  // Per-step scratch goes where plan-memory placed the op's `scratch_bytes` when select-kernels
  // requested it, else into one region past the planned arena (a step's scratch lives only during
  // its step). Aliases (reshape, cast) keep sharing their root's bytes.
  if (const std::optional<int64_t> planned = fn.attrs().GetI64("arena_bytes"); bucket == 0 && planned) {
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat("cuda executor: @", fn.name(), ": the memory plan is unusable: ", what));
    };
    const std::vector<int64_t> args = fn.attrs().GetI64Array("arena_args").value_or(std::vector<int64_t>{});
    if (args.size() != fn.num_arguments()) return bad("arena_args does not give one offset per argument");
    auto set = [&](const ir::Value* v, int64_t off) -> absl::Status {
      const int64_t bytes = live.at(v).bytes;
      if (off < 0 || off % 256 != 0 || off + bytes > *planned)
        return bad(absl::StrCat("%", v->name(), " at offset ", off, " (", bytes, " bytes) is outside the ", *planned,
                                "-byte arena or misaligned"));
      p->slots[v] = {off, bytes};
      return absl::OkStatus();
    };
    for (unsigned i = 0; i < fn.num_arguments(); ++i) MEMRA_RETURN_IF_ERROR(set(fn.argument(i), args[i]));
    int64_t extra = 0;
    for (Step& s : p->steps) {
      const Op& op = *s.op;
      if (!op.is(OpKind::kReshape) && !op.is(OpKind::kCast) && op.num_results() > 0) {
        const std::vector<int64_t> offs = op.attrs().GetI64Array("arena").value_or(std::vector<int64_t>{});
        if (offs.size() != op.num_results()) return bad(absl::StrCat(op.Summary(), " has no arena offset per result"));
        for (unsigned i = 0; i < op.num_results(); ++i) MEMRA_RETURN_IF_ERROR(set(op.result(i), offs[i]));
      }
      if (s.scratch_bytes == 0) continue;
      const int64_t cast = s.aux_offset - s.scratch_offset;
      const std::optional<int64_t> at = op.attrs().GetI64("scratch");
      if (at && op.attrs().I64Or("scratch_bytes", 0) >= s.scratch_bytes && *at % 256 == 0 &&
          *at + s.scratch_bytes <= *planned) {
        s.scratch_offset = *at;
      } else {
        s.scratch_offset = (*planned + 255) / 256 * 256;
        extra = std::max(extra, s.scratch_bytes);
      }
      s.aux_offset = s.scratch_offset + cast;
    }
    p->arena_bytes = extra > 0 ? (*planned + 255) / 256 * 256 + extra : *planned;
    p->planned_arena = true;
  }
  for (auto& [alias, r] : root) p->slots[alias] = p->slots[Root(alias)];
  MEMRA_ASSIGN_OR_RETURN(p->arena, dev_->Alloc(p->arena_bytes, absl::StrCat("arena of @", fn.name(), " bucket ", bucket)));
  // 4. Segments: the IR's (partition-segments), else the same per-op rule; only a static
  // function's segments are captured (a generic one's kernels take the call's T).
  p->driver = &dev_->driver();
  p->step_work.assign(p->steps.size(), {0.0, 0.0});
  const Op* run_owner = nullptr;
  for (size_t i = 0; i < p->steps.size(); ++i) {
    const Op* op = p->steps[i].op;
    const Op* seg = op->parent_op();
    bool capturable = false;
    std::string reason;
    if (seg != nullptr) {
      capturable = seg->attrs().I64Or("capturable", 0) != 0;
      reason = seg->attrs().GetString("reason").value_or("");
    } else if (op->is(OpKind::kReturn)) {
      reason = "host sync: the results are copied to the host";
    } else {
      passes::CaptureVerdict v = passes::ClassifyForCapture(*op, /*require_arena=*/false);
      capturable = v.capturable;
      reason = v.reason;
    }
    if (bucket != 0 && capturable) {
      capturable = false;
      reason = "data-dependent shape (a generic function: its kernels take the call's token count)";
    }
    if (!p->segments.empty() && run_owner == seg && p->segments.back().capturable == capturable) {
      p->segments.back().end = i + 1;
      continue;
    }
    p->segments.push_back({i, i + 1, capturable, reason, nullptr});
    run_owner = seg;
  }
  Program* out = p.get();
  programs_[key] = std::move(p);
  return out;
}

// How far a call of `p` moves the position counter (its advance_positions ops on @pos).
absl::StatusOr<int64_t> PositionAdvance(const CudaExecutor::Program& p, const ir::SymbolBindings& bindings,
                                        const ir::StateVar* position_state);

absl::StatusOr<std::vector<HostTensor>> CudaExecutor::Run(absl::string_view name, std::vector<HostTensor> args) {
  const ir::Function* fn = module_.function(name);
  if (fn == nullptr) return absl::NotFoundError(absl::StrCat("cuda executor: the module has no function @", name));
  MEMRA_ASSIGN_OR_RETURN(ir::SymbolBindings bindings, BindArguments(*fn, args, /*min_symbol_value=*/1));
  const bool symbolic = !bindings.empty();
  int64_t max_sym = 1;
  for (const auto& [s, v] : bindings) max_sym = std::max(max_sym, v);
  const int64_t bucket = symbolic ? codegen::TokenBucket(max_sym) : 0;
  MEMRA_RETURN_IF_ERROR(dev_->MakeCurrent());
  MEMRA_ASSIGN_OR_RETURN(Program * p, GetProgram(*fn, bucket));
  auto concrete = [&](const ir::Value* v) { return ConcreteShape(v, bindings); };
  // Context overflow and token ids: refuse before anything runs.
  for (const Op* op : p->kv_appends) {
    MEMRA_ASSIGN_OR_RETURN(auto kshape, concrete(op->operand(0)));
    const int64_t cap = op->operand(2)->shape()[0].value();
    if (position_ + kshape[0] > cap)
      return absl::OutOfRangeError(absl::StrCat("context overflow: ", kshape[0], " more tokens at position ", position_,
                                                " exceed the context length of ", cap,
                                                " (the KV cache size; raise it with --ctx-size)"));
  }
  for (const Step& s : p->steps) {
    if (!s.op->is(OpKind::kEmbed)) continue;
    const ir::Value* ids = s.op->operand(0);
    for (unsigned i = 0; i < fn->num_arguments(); ++i)
      if (fn->argument(i) == ids) {
        const int64_t V = weights_.at(s.op->operand(1))->rows;
        for (int64_t j = 0; j < args[i].numel(); ++j)
          if (args[i].i32()[j] < 0 || args[i].i32()[j] >= V)
            return absl::InvalidArgumentError(absl::StrCat("cuda executor: ", s.op->Summary(), ": token id ",
                                                           args[i].i32()[j], " outside the vocabulary [0, ", V, ")"));
      }
  }
  const cuda::CudaDriver& d = dev_->driver();
  const cuda::CUstream stream = dev_->stream();
  if (options_.poison_arena)
    MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemsetD8Async(p->arena.ptr(), 0xff, p->arena.bytes(), stream), "arena poison"));
  for (unsigned i = 0; i < fn->num_arguments(); ++i) {
    const HostTensor& t = args[i];
    const void* src = t.dtype() == DType::kF32 ? static_cast<const void*>(t.f32())
                      : t.dtype() == DType::kI32 ? static_cast<const void*>(t.i32())
                                                 : static_cast<const void*>(t.i64());
    MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemcpyHtoDAsync(p->Ptr(fn->argument(i)), src, t.numel() * ElemBytes(t.dtype()), stream),
                                  absl::StrCat("@", name, ": argument upload")));
  }
  cuda::CUevent ev0 = nullptr, ev1 = nullptr;
  d.cuEventCreate(&ev0, cuda::kCuEventDefault);
  d.cuEventCreate(&ev1, cuda::kCuEventDefault);
  d.cuEventRecord(ev0, stream);

  std::vector<HostTensor> results;
  const Op* ret = p->steps.empty() ? nullptr : p->steps.back().op;
  if (ret != nullptr && ret->is(OpKind::kReturn))
    for (const ir::Value* v : ret->operands()) {
      MEMRA_ASSIGN_OR_RETURN(auto shape, ConcreteShape(v, bindings));
      if (v->dtype() != DType::kF32 && v->dtype() != DType::kI32) return OpError(*ret, "results must be f32 or i32");
      results.push_back(HostTensor::Zeros(v->dtype(), shape));
    }
  MEMRA_ASSIGN_OR_RETURN(const int64_t position_delta, PositionAdvance(*p, bindings, position_state_));
  MEMRA_RETURN_IF_ERROR(EnqueueProgram(*p, bindings, /*allow_graphs=*/true));
  d.cuEventRecord(ev1, stream);
  // Results back to the host.
  if (ret != nullptr && ret->is(OpKind::kReturn))
    for (unsigned i = 0; i < ret->num_operands(); ++i) {
      HostTensor& t = results[i];
      void* dst = t.dtype() == DType::kF32 ? static_cast<void*>(t.f32()) : static_cast<void*>(t.i32());
      MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemcpyDtoHAsync(dst, p->Ptr(ret->operand(i)), t.numel() * 4, stream),
                                    absl::StrCat("@", name, ": result download")));
    }
  absl::Status st = dev_->Synchronize(absl::StrCat("@", name, " (bucket ", bucket, ")"));
  if (!st.ok())
    return absl::Status(st.code(), absl::StrCat("cuda executor: ", st.message(),
                                                " (set sync_each_op to find the failing op)"));
  float ms = 0;
  d.cuEventElapsedTime(&ms, ev0, ev1);
  last_run_ms_ = ms;
  d.cuEventDestroy(ev0);
  d.cuEventDestroy(ev1);
  AccumulateProfile(*p);
  ++p->calls;
  position_ += position_delta;
  return results;
}


void CudaExecutor::AccumulateProfile(const Program& p) {
  if (!options_.profile || p.events.empty()) return;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    float step_ms = 0;
    dev_->driver().cuEventElapsedTime(&step_ms, p.events[i], p.events[i + 1]);
    ProfileEntry& e = profile_[std::string(ir::Mnemonic(p.steps[i].op->kind()))];
    ++e.count;
    e.ms += step_ms;
    e.flops += p.step_work[i].first;
    e.bytes += p.step_work[i].second;
  }
}

bool CudaExecutor::GraphsAllowed() const {
  return options_.cuda_graphs && !options_.profile && !options_.sync_each_op && !observer_;
}

absl::StatusOr<cuda::CUgraphExec> CudaExecutor::Capture(const std::function<absl::Status()>& enqueue,
                                                        absl::string_view what) {
  const cuda::CudaDriver& d = dev_->driver();
  const cuda::CUstream stream = dev_->stream();
  const auto t0 = std::chrono::steady_clock::now();
  MEMRA_RETURN_IF_ERROR(CuCheck(d.cuStreamBeginCapture(stream, cuda::kCuStreamCaptureModeThreadLocal),
                                absl::StrCat("cuda executor: begin capture of ", what)));
  absl::Status st = enqueue();
  cuda::CUgraph graph = nullptr;
  const cuda::CUresult end = d.cuStreamEndCapture(stream, &graph);  // always ends the capture
  if (!st.ok()) {
    if (graph) d.cuGraphDestroy(graph);
    return absl::Status(st.code(), absl::StrCat("while capturing ", what, ": ", st.message()));
  }
  MEMRA_RETURN_IF_ERROR(CuCheck(end, absl::StrCat("cuda executor: end capture of ", what)));
  cuda::CUgraphExec exec = nullptr;
  const cuda::CUresult inst = d.cuGraphInstantiate(&exec, graph, 0);
  d.cuGraphDestroy(graph);
  MEMRA_RETURN_IF_ERROR(CuCheck(inst, absl::StrCat("cuda executor: instantiate the graph of ", what)));
  ++graph_stats_.captured;
  graph_stats_.capture_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return exec;
}

absl::Status CudaExecutor::EnqueueProgram(Program& p, const ir::SymbolBindings& bindings, bool allow_graphs) {
  const cuda::CudaDriver& d = dev_->driver();
  const cuda::CUstream stream = dev_->stream();
  const bool graphs = allow_graphs && GraphsAllowed() && p.calls > 0;
  if (options_.profile && p.events.empty()) {
    p.events.resize(p.steps.size() + 1);
    for (auto& e : p.events) d.cuEventCreate(&e, cuda::kCuEventDefault);
  }
  for (SegmentRun& seg : p.segments) {
    if (graphs && seg.capturable) {
      if (seg.exec == nullptr) {
        auto exec = Capture(
            [&]() -> absl::Status {
              for (size_t i = seg.begin; i < seg.end; ++i)
                MEMRA_RETURN_IF_ERROR(EnqueueStep(p, i, bindings, &p.step_work[i]));
              return absl::OkStatus();
            },
            absl::StrCat("@", p.fn->name(), " steps ", seg.begin, "..", seg.end));
        if (exec.ok()) {
          seg.exec = *exec;
        } else {
          // Runs eagerly from now on (a real launch error shows up there too); the reason is kept.
          seg.capturable = false;
          seg.reason = std::string(exec.status().message());
          ++graph_stats_.capture_failures;
          graph_stats_.last_capture_failure = seg.reason;
        }
      }
      if (seg.exec != nullptr) {
        MEMRA_RETURN_IF_ERROR(
            CuCheck(d.cuGraphLaunch(seg.exec, stream), absl::StrCat("cuda executor: graph launch of @", p.fn->name())));
        ++graph_stats_.launches;
        continue;
      }
    }
    ++graph_stats_.eager_segments;
    for (size_t i = seg.begin; i < seg.end; ++i) {
      const Op& op = *p.steps[i].op;
      if (options_.profile) d.cuEventRecord(p.events[i], stream);
      p.step_work[i] = {0.0, 0.0};
      MEMRA_RETURN_IF_ERROR(EnqueueStep(p, i, bindings, &p.step_work[i]));
      if (options_.sync_each_op || observer_) {
        absl::Status st = dev_->Synchronize(op.Summary());
        if (!st.ok()) return absl::Status(st.code(), absl::StrCat("cuda executor: @", p.fn->name(), ": ", st.message()));
      }
      if (observer_) {
        for (unsigned r = 0; r < op.num_results(); ++r) {
          const ir::Value* v = op.result(r);
          if (v->name().empty() || (v->dtype() != DType::kF32 && v->dtype() != DType::kI32)) continue;
          MEMRA_ASSIGN_OR_RETURN(auto shape, ConcreteShape(v, bindings));
          HostTensor t = HostTensor::Zeros(v->dtype(), shape);
          void* dst = v->dtype() == DType::kF32 ? static_cast<void*>(t.f32()) : static_cast<void*>(t.i32());
          MEMRA_RETURN_IF_ERROR(dev_->Download(dst, p.Ptr(v), t.numel() * 4));
          observer_(*v, t);
        }
      }
    }
  }
  if (options_.profile) d.cuEventRecord(p.events.back(), stream);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PositionAdvance(const CudaExecutor::Program& p, const ir::SymbolBindings& bindings,
                                        const ir::StateVar* position_state) {
  int64_t delta = 0;
  for (const Step& s : p.steps)
    if (s.op->is(OpKind::kAdvancePositions) && s.op->operand(0) == position_state) {
      MEMRA_ASSIGN_OR_RETURN(auto like, ConcreteShape(s.op->operand(1), bindings));
      delta += like[0];
    }
  return delta;
}

absl::Status CudaExecutor::PrepareGreedy(Program& p) {
  if (p.greedy.fn == nullptr) {
    MEMRA_ASSIGN_OR_RETURN(codegen::Launch l, codegen::GreedyNextKernel(*p.fn));
    MEMRA_ASSIGN_OR_RETURN(auto cubins, compiler_->CompileAll({l.kernel.module}));
    const std::string k = l.kernel.module.Key();
    if (!modules_.count(k)) {
      MEMRA_ASSIGN_OR_RETURN(modules_[k], cuda::LoadedModule::Load(*dev_, *cubins[0], k));
    }
    p.greedy.spec = l;
    MEMRA_ASSIGN_OR_RETURN(p.greedy.fn, modules_.at(k)->Function(l.kernel.entry));
  }
  if (token_ring_ == nullptr) {
    MEMRA_ASSIGN_OR_RETURN(cuda::DeviceBuffer b, dev_->Alloc((kTokenRing + 1) * 4, "decode token ring"));
    token_ring_ = std::make_unique<cuda::DeviceBuffer>(std::move(b));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> CudaExecutor::DecodeGreedy(int32_t token, int64_t n_steps) {
  const ir::Function* fn = module_.function("decode");
  if (fn == nullptr) return absl::NotFoundError("cuda executor: the module has no function @decode");
  if (n_steps <= 0) return std::vector<int32_t>{};
  if (fn->num_arguments() != 1 || fn->argument(0)->dtype() != DType::kI32 || !fn->argument(0)->shape().IsStatic())
    return absl::FailedPreconditionError("cuda executor: @decode does not take one static i32 token argument");
  MEMRA_RETURN_IF_ERROR(dev_->MakeCurrent());
  MEMRA_ASSIGN_OR_RETURN(Program * p, GetProgram(*fn, 0));
  const ir::SymbolBindings none;
  MEMRA_ASSIGN_OR_RETURN(const int64_t step_advance, PositionAdvance(*p, none, position_state_));
  if (position_ + n_steps * step_advance > kv_capacity_)
    return absl::OutOfRangeError(absl::StrCat("context overflow: ", n_steps, " decode steps at position ", position_,
                                              " exceed the context length of ", kv_capacity_,
                                              " (the KV cache size; raise it with --ctx-size)"));
  for (const Step& s : p->steps)
    if (s.op->is(OpKind::kEmbed) && s.op->operand(0) == fn->argument(0)) {
      const int64_t V = weights_.at(s.op->operand(1))->rows;
      if (token < 0 || token >= V)
        return absl::InvalidArgumentError(absl::StrCat("cuda executor: token id ", token, " outside the vocabulary [0, ", V, ")"));
    }
  MEMRA_RETURN_IF_ERROR(PrepareGreedy(*p));
  const cuda::CudaDriver& d = dev_->driver();
  const cuda::CUstream stream = dev_->stream();
  const Op* ret = p->steps.back().op;
  const CUdeviceptr logits = p->Ptr(ret->operand(0));
  const CUdeviceptr token_slot = p->Ptr(fn->argument(0));
  const CUdeviceptr ring = token_ring_->ptr(), ring_pos = ring + kTokenRing * 4;
  auto launch_greedy = [&]() -> absl::Status {
    KernelArgs a;
    a.Add(logits).Add(token_slot).Add(ring).Add(ring_pos).Add(static_cast<int>(kTokenRing));
    return CuCheck(d.cuLaunchKernel(p->greedy.fn, p->greedy.spec.grid, 1, 1, p->greedy.spec.block, 1, 1,
                                    p->greedy.spec.smem, stream, a.ptrs(), nullptr),
                   "cuda executor: launch of greedy_next");
  };
  auto enqueue_step = [&]() -> absl::Status {
    for (size_t i = 0; i < p->steps.size(); ++i) MEMRA_RETURN_IF_ERROR(EnqueueStep(*p, i, none, &p->step_work[i]));
    return launch_greedy();
  };
  bool all_capturable = true;
  for (const SegmentRun& seg : p->segments)
    all_capturable &= seg.capturable || (seg.end - seg.begin == 1 && p->steps[seg.begin].op->is(OpKind::kReturn));
  MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemcpyHtoDAsync(token_slot, &token, 4, stream), "cuda executor: decode token upload"));
  cuda::CUevent ev0 = nullptr, ev1 = nullptr;
  d.cuEventCreate(&ev0, cuda::kCuEventDefault);
  d.cuEventCreate(&ev1, cuda::kCuEventDefault);
  d.cuEventRecord(ev0, stream);
  std::vector<int32_t> out(static_cast<size_t>(n_steps));
  for (int64_t done = 0; done < n_steps;) {
    const int64_t n = std::min<int64_t>(kTokenRing, n_steps - done);
    MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemsetD32Async(ring_pos, 0, 1, stream), "cuda executor: token ring reset"));
    for (int64_t i = 0; i < n; ++i) {
      // The first step ever runs eagerly (loads lazily loaded kernels), later ones replay.
      if (GraphsAllowed() && all_capturable && p->calls > 0 && p->greedy_exec == nullptr) {
        auto exec = Capture(enqueue_step, "@decode + greedy pick");
        if (exec.ok()) {
          p->greedy_exec = *exec;
        } else {  // eager steps from now on, as in EnqueueProgram
          all_capturable = false;
          for (SegmentRun& seg : p->segments) seg.capturable = false;
          ++graph_stats_.capture_failures;
          graph_stats_.last_capture_failure = std::string(exec.status().message());
        }
      }
      if (GraphsAllowed() && all_capturable && p->greedy_exec != nullptr) {
        MEMRA_RETURN_IF_ERROR(CuCheck(d.cuGraphLaunch(p->greedy_exec, stream), "cuda executor: graph launch of @decode"));
        ++graph_stats_.launches;
      } else if (options_.profile || options_.sync_each_op || observer_) {
        // Op by op with the profile events / per-op checks of Run, then the greedy pick.
        MEMRA_RETURN_IF_ERROR(EnqueueProgram(*p, none, /*allow_graphs=*/false));
        MEMRA_RETURN_IF_ERROR(launch_greedy());
        MEMRA_RETURN_IF_ERROR(dev_->Synchronize("@decode greedy step"));
        AccumulateProfile(*p);
        ++p->calls;
      } else {
        MEMRA_RETURN_IF_ERROR(enqueue_step());
        ++graph_stats_.eager_segments;
        ++p->calls;
      }
    }
    MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemcpyDtoHAsync(out.data() + done, ring, n * 4, stream),
                                  "cuda executor: token ring download"));
    absl::Status st = dev_->Synchronize("@decode greedy loop");
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("cuda executor: ", st.message()));
    done += n;
  }
  d.cuEventRecord(ev1, stream);
  MEMRA_RETURN_IF_ERROR(dev_->Synchronize("@decode greedy loop"));
  float ms = 0;
  d.cuEventElapsedTime(&ms, ev0, ev1);
  last_run_ms_ = ms;
  d.cuEventDestroy(ev0);
  d.cuEventDestroy(ev1);
  position_ += n_steps * step_advance;
  return out;
}

absl::Status CudaExecutor::EnqueueStep(Program& p, size_t step_index, const ir::SymbolBindings& bindings,
                                       std::pair<double, double>* work) {
  const cuda::CudaDriver& d = dev_->driver();
  const cuda::CUstream stream = dev_->stream();
  auto concrete = [&](const ir::Value* v) { return ConcreteShape(v, bindings); };
  const Step& s = p.steps[step_index];
  const Op& op = *s.op;
  const ir::AttrDict& at = op.attrs();
  auto In = [&](unsigned i) -> CUdeviceptr {
    const ir::Value* v = op.operand(i);
    if (v->kind() == ir::Value::Kind::kState) return state_.at(v)->ptr();
    if (v->kind() == ir::Value::Kind::kWeight) {
      const DeviceWeight& w = *weights_.at(v);
      return w.matrix.ptr() != 0 && (op.is(OpKind::kMatMul) || op.is(OpKind::kMatMulGroup) || op.is(OpKind::kEmbed))
                 ? w.matrix.ptr()
                 : w.values.ptr();
    }
    return p.Ptr(v);
  };
  auto Out = [&](unsigned i) { return p.Ptr(op.result(i)); };
  auto launch = [&](size_t li, KernelArgs& a) -> absl::Status {
    const ResolvedLaunch& l = s.launches[li];
    const cuda::CUresult r = d.cuLaunchKernel(l.fn, l.spec.grid, 1, 1, l.spec.block, 1, 1, l.spec.smem, stream,
                                              a.ptrs(), nullptr);
    if (r != 0)
      return absl::InternalError(absl::StrCat("cuda executor: ", op.Summary(), ": launch of ", l.spec.kernel.ToString(),
                                              " (grid ", l.spec.grid, ", block ", l.spec.block, "): ", d.ErrorText(r)));
    return absl::OkStatus();
  };
  llvm::SmallVector<int64_t, 4> x0;
  if (op.num_operands() > 0) {
    MEMRA_ASSIGN_OR_RETURN(x0, concrete(op.operand(0)));
  }
  const int64_t n0 = Numel(x0);
  const int64_t cols0 = x0.empty() ? 1 : x0.back();
  const int64_t rows0 = n0 / std::max<int64_t>(cols0, 1);
  const float eps = static_cast<float>(at.F64Or("eps", 0));
  if (s.gemv) {
    // One token: Gemv.cu per weight (matmul_swiglu: one fused gate/up launch).
    auto wptr = [&](unsigned i) {
      const DeviceWeight& w = *weights_.at(op.operand(i));
      return std::make_pair(w.q8.ptr() != 0 ? w.q8.ptr() : w.matrix.ptr(), w.q8_scales.ptr());
    };
    for (unsigned i = 1; i < op.num_operands(); ++i) {
      const DeviceWeight& w = *weights_.at(op.operand(i));
      if (w.cols != cols0) return OpError(op, "K mismatch");
      work->first += 2.0 * w.rows * w.cols;
      work->second += static_cast<double>(w.q8.ptr() != 0 ? w.q8.bytes() + w.q8_scales.bytes() : w.matrix.bytes());
    }
    if (op.is(OpKind::kMatMulSwiglu)) {
      const auto [wg, sg] = wptr(1);
      const auto [wu, su] = wptr(2);
      KernelArgs a;
      a.Add(wg).Add(sg).Add(wu).Add(su).Add(In(0)).Add(Out(0)).Add(static_cast<int>(weights_.at(op.operand(1))->rows));
      return launch(0, a);
    }
    if (s.launches.size() == 1 && s.launches[0].spec.kernel.entry == "gemv_group") {
      KernelArgs a;
      for (unsigned i = 1; i <= 4; ++i) {
        const bool used = i < op.num_operands();
        const auto [wv, sv] = used ? wptr(i) : std::make_pair(CUdeviceptr{0}, CUdeviceptr{0});
        a.Add(wv).Add(sv).Add(used ? Out(i - 1) : CUdeviceptr{0});
      }
      a.Add(In(0));
      for (unsigned i = 1; i <= 4; ++i)
        a.Add(static_cast<int>(i < op.num_operands() ? weights_.at(op.operand(i))->rows : 0));
      return launch(0, a);
    }
    for (unsigned i = 1; i < op.num_operands(); ++i) {
      const auto [wv, sv] = wptr(i);
      KernelArgs a;
      a.Add(wv).Add(sv).Add(In(0)).Add(Out(i - 1)).Add(static_cast<int>(weights_.at(op.operand(i))->rows));
      MEMRA_RETURN_IF_ERROR(launch(i - 1, a));
    }
    return absl::OkStatus();
  }
  switch (op.kind()) {
    case OpKind::kEmbed: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(Out(0)).Add(static_cast<int>(n0));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kRmsNorm: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(Out(0)).Add(rows0).Add(eps);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kL2Norm: {
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(rows0).Add(eps);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kGatedRmsNorm: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(In(2)).Add(Out(0)).Add(rows0).Add(eps);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kAddRmsNorm: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(In(2)).Add(Out(0)).Add(Out(1)).Add(rows0).Add(eps);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kSoftmax:
    case OpKind::kArgmax: {
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(rows0);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kAdd:
    case OpKind::kMul: {
      MEMRA_ASSIGN_OR_RETURN(auto bshape, concrete(op.operand(1)));
      const int64_t nb = Numel(bshape);
      if (nb == 0 || n0 % nb != 0) return OpError(op, "broadcast operand does not divide the first");
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(Out(0)).Add(n0).Add(nb);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kScale: {
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(n0).Add(static_cast<float>(at.F64Or("factor", 1.0)));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kSigmoid:
    case OpKind::kSilu:
    case OpKind::kSoftplus:
    case OpKind::kExp: {
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(n0);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kSwiglu: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(Out(0)).Add(n0);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kMatMul:
    case OpKind::kMatMulGroup: {
      const CUdeviceptr scratch = s.scratch_offset >= 0 ? p.arena.ptr() + s.scratch_offset : 0;
      DType cast_type = DType::kF32;
      for (unsigned i = 1; i < op.num_operands(); ++i) {
        const DeviceWeight& w = *weights_.at(op.operand(i));
        if (w.cols != cols0) return OpError(op, "K mismatch");
        CUdeviceptr xin = In(0);
        if (w.matrix_dtype != DType::kF32) {
          if (cast_type != w.matrix_dtype) {
            // The launch for this 16-bit type (SelectKernels emits one per distinct type).
            size_t li = 0;
            for (; li < s.launches.size(); ++li)
              if (s.launches[li].spec.kernel.entry == (w.matrix_dtype == DType::kBF16 ? "cast_f32_bf16" : "cast_f32_f16")) break;
            if (li == s.launches.size()) return OpError(op, "no activation cast selected");
            KernelArgs a;
            a.Add(In(0)).Add(scratch).Add(n0);
            MEMRA_RETURN_IF_ERROR(launch(li, a));
            cast_type = w.matrix_dtype;
          }
          xin = scratch;
        }
        work->first += 2.0 * rows0 * w.rows * w.cols;
        work->second += static_cast<double>(w.matrix.bytes());
        absl::Status st = blas_->Matmul(xin, w.matrix.ptr(), Out(i - 1), rows0, w.rows, w.cols, w.matrix_dtype, stream);
        if (!st.ok()) return absl::Status(st.code(), absl::StrCat("cuda executor: ", op.Summary(), ": ", st.message()));
      }
      break;
    }
    case OpKind::kMatMulSwiglu: {
      // gate product into the scratch, up product into y, then y = silu(gate) * y in place.
      const CUdeviceptr scratch = s.scratch_offset >= 0 ? p.arena.ptr() + s.scratch_offset : 0;
      const CUdeviceptr gate = p.arena.ptr() + s.aux_offset;
      DType cast_type = DType::kF32;
      int64_t n_out = 0;
      for (unsigned i = 1; i <= 2; ++i) {
        const DeviceWeight& w = *weights_.at(op.operand(i));
        if (w.cols != cols0) return OpError(op, "K mismatch");
        CUdeviceptr xin = In(0);
        if (w.matrix_dtype != DType::kF32) {
          if (cast_type != w.matrix_dtype) {
            size_t li = 0;
            for (; li + 1 < s.launches.size(); ++li)
              if (s.launches[li].spec.kernel.entry == (w.matrix_dtype == DType::kBF16 ? "cast_f32_bf16" : "cast_f32_f16")) break;
            if (li + 1 >= s.launches.size()) return OpError(op, "no activation cast selected");
            KernelArgs a;
            a.Add(In(0)).Add(scratch).Add(n0);
            MEMRA_RETURN_IF_ERROR(launch(li, a));
            cast_type = w.matrix_dtype;
          }
          xin = scratch;
        }
        n_out = rows0 * w.rows;
        work->first += 2.0 * rows0 * w.rows * w.cols;
        work->second += static_cast<double>(w.matrix.bytes());
        absl::Status st = blas_->Matmul(xin, w.matrix.ptr(), i == 1 ? gate : Out(0), rows0, w.rows, w.cols,
                                        w.matrix_dtype, stream);
        if (!st.ok()) return absl::Status(st.code(), absl::StrCat("cuda executor: ", op.Summary(), ": ", st.message()));
      }
      KernelArgs a;
      a.Add(gate).Add(Out(0)).Add(Out(0)).Add(n_out);
      MEMRA_RETURN_IF_ERROR(launch(s.launches.size() - 1, a));
      break;
    }
    case OpKind::kQkNormRope: {
      // Per head: rms_norm into the scratch, rope from it into the result (q, then k).
      const CUdeviceptr tmp = p.arena.ptr() + s.aux_offset;
      const int64_t n_rot = at.I64Or("n_rot", 0);
      const float base = static_cast<float>(at.F64Or("base", 10000.0));
      const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
      for (unsigned i = 0; i < 2; ++i) {
        MEMRA_ASSIGN_OR_RETURN(auto xs, concrete(op.operand(i)));
        KernelArgs a;
        a.Add(In(i)).Add(In(2 + i)).Add(tmp).Add(xs[0] * xs[1]).Add(eps);
        MEMRA_RETURN_IF_ERROR(launch(2 * i, a));
        KernelArgs r;
        r.Add(tmp).Add(Out(i)).Add(In(4)).Add(static_cast<int>(xs[0])).Add(theta_scale);
        MEMRA_RETURN_IF_ERROR(launch(2 * i + 1, r));
      }
      break;
    }
    case OpKind::kQGateSplit: {
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(Out(1)).Add(static_cast<int>(x0[0]));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kRope: {
      const int64_t n_rot = at.I64Or("n_rot", 0);
      const float base = static_cast<float>(at.F64Or("base", 10000.0));
      const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(In(1)).Add(static_cast<int>(x0[0])).Add(theta_scale);
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kPositions: {
      MEMRA_ASSIGN_OR_RETURN(auto like, concrete(op.operand(1)));
      KernelArgs a;
      a.Add(In(0)).Add(Out(0)).Add(static_cast<int>(like[0]));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kAdvancePositions: {
      MEMRA_ASSIGN_OR_RETURN(auto like, concrete(op.operand(1)));
      KernelArgs a;
      a.Add(In(0)).Add(static_cast<int>(like[0]));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kKvAppend: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(In(2)).Add(In(3)).Add(In(4)).Add(static_cast<int>(x0[0]));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kAttention:
    case OpKind::kAttentionGated: {
      const float scale = static_cast<float>(at.F64Or("scale", 1.0));
      size_t next = 1;
      if (s.launches[0].spec.kernel.entry == "attention_split") {
        // Decode: partials per key range into the step's scratch, then the merge into o.
        const CUdeviceptr part = p.arena.ptr() + s.aux_offset;
        KernelArgs a;
        a.Add(In(0)).Add(In(1)).Add(In(2)).Add(In(3)).Add(part).Add(scale);
        MEMRA_RETURN_IF_ERROR(launch(0, a));
        KernelArgs c;
        c.Add(part).Add(Out(0));
        MEMRA_RETURN_IF_ERROR(launch(1, c));
        next = 2;
      } else {
        KernelArgs a;
        a.Add(In(0)).Add(In(1)).Add(In(2)).Add(In(3)).Add(Out(0)).Add(static_cast<int>(x0[0])).Add(scale);
        MEMRA_RETURN_IF_ERROR(launch(0, a));
      }
      if (op.is(OpKind::kAttentionGated)) {
        KernelArgs g;
        g.Add(Out(0)).Add(In(4)).Add(Out(0)).Add(n0);
        MEMRA_RETURN_IF_ERROR(launch(next, g));
      }
      break;
    }
    case OpKind::kConv1dCausal: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(In(2)).Add(Out(0)).Add(static_cast<int>(x0[0]));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      if (s.launches.size() == 2) {  // conv1d_causal_tokens, then the state update
        KernelArgs u;
        u.Add(In(0)).Add(In(2)).Add(static_cast<int>(x0[0]));
        MEMRA_RETURN_IF_ERROR(launch(1, u));
      }
      break;
    }
    case OpKind::kDeltaNetGates: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(In(2)).Add(In(3)).Add(Out(0)).Add(Out(1)).Add(static_cast<int>(x0[0]));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kGatedDeltaScan: {
      KernelArgs a;
      a.Add(In(0)).Add(In(1)).Add(In(2)).Add(In(3)).Add(In(4)).Add(In(5)).Add(Out(0))
          .Add(static_cast<int>(x0[0])).Add(static_cast<float>(at.F64Or("scale", 1.0)));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kConcat:
    case OpKind::kSplit:
    case OpKind::kView: {
      int64_t axis = at.I64Or("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(x0.size());
      auto prod = [](llvm::ArrayRef<int64_t> s, size_t from, size_t to) {
        int64_t n = 1;
        for (size_t i = from; i < std::min(to, s.size()); ++i) n *= s[i];
        return n;
      };
      const int64_t outer = prod(x0, 0, axis);
      const int64_t inner = prod(x0, axis + 1, SIZE_MAX);
      if (ElemBytes(op.operand(0)->dtype()) != 4) return OpError(op, "only 4-byte elements are supported");
      if (op.is(OpKind::kConcat)) {
        int64_t total = 0;
        std::vector<int64_t> lens;
        for (unsigned i = 0; i < op.num_operands(); ++i) {
          MEMRA_ASSIGN_OR_RETURN(auto si, concrete(op.operand(i)));
          lens.push_back(si[axis]);
          total += si[axis];
        }
        int64_t off = 0;
        for (unsigned i = 0; i < op.num_operands(); ++i) {
          KernelArgs a;
          a.Add(In(i)).Add(Out(0)).Add(outer).Add(lens[i]).Add(int64_t{0}).Add(total).Add(off).Add(lens[i]).Add(inner);
          MEMRA_RETURN_IF_ERROR(launch(i, a));
          off += lens[i];
        }
      } else {
        std::vector<int64_t> sizes = op.is(OpKind::kSplit) ? at.GetI64Array("sizes").value_or(std::vector<int64_t>{})
                                                            : std::vector<int64_t>{at.I64Or("size", 0)};
        int64_t off = op.is(OpKind::kView) ? at.I64Or("offset", 0) : 0;
        for (size_t i = 0; i < sizes.size(); ++i) {
          KernelArgs a;
          a.Add(In(0)).Add(Out(static_cast<unsigned>(i))).Add(outer).Add(x0[axis]).Add(off).Add(sizes[i])
              .Add(int64_t{0}).Add(sizes[i]).Add(inner);
          MEMRA_RETURN_IF_ERROR(launch(i, a));
          off += sizes[i];
        }
      }
      break;
    }
    case OpKind::kTakeLastRow: {
      const int64_t row_bytes = (n0 / std::max<int64_t>(x0[0], 1)) * ElemBytes(op.operand(0)->dtype());
      MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemcpyDtoDAsync(Out(0), In(0) + (x0[0] - 1) * row_bytes, row_bytes, stream),
                                    absl::StrCat("cuda executor: ", op.Summary(), ": copy")));
      break;
    }
    case OpKind::kConstant: {
      MEMRA_ASSIGN_OR_RETURN(auto shape, concrete(op.result(0)));
      KernelArgs a;
      a.Add(Out(0)).Add(Numel(shape));
      if (op.result(0)->dtype() == DType::kI32) a.Add(static_cast<int>(at.F64Or("value", 0)));
      else a.Add(static_cast<float>(at.F64Or("value", 0)));
      MEMRA_RETURN_IF_ERROR(launch(0, a));
      break;
    }
    case OpKind::kReshape:
    case OpKind::kCast:
    case OpKind::kSegment:
      break;
    case OpKind::kReturn:  // the results are downloaded by Run
      break;
    case OpKind::kTopK:
    case OpKind::kSample:
      return OpError(op, "not implemented on the GPU");
    default:
      return OpError(op, "no CUDA implementation for this op yet");
  }
  return absl::OkStatus();
}

std::string CudaExecutor::ProfileReport() const {
  double total = 0;
  for (const auto& [k, e] : profile_) total += e.ms;
  std::vector<std::pair<std::string, ProfileEntry>> rows(profile_.begin(), profile_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  std::string out = absl::StrFormat("%-18s %8s %10s %6s %10s %10s\n", "op", "calls", "ms", "%", "TFLOP/s", "weight GB/s");
  for (const auto& [k, e] : rows) {
    absl::StrAppend(&out, absl::StrFormat("%-18s %8d %10.3f %5.1f%%", k, e.count, e.ms, total > 0 ? 100 * e.ms / total : 0));
    if (e.flops > 0)
      absl::StrAppend(&out, absl::StrFormat(" %10.1f %10.0f", e.flops / (e.ms * 1e9), e.bytes / (e.ms * 1e6)));
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, absl::StrFormat("%-18s %8s %10.3f\n", "total", "", total));
  return out;
}

}  // namespace memra::runtime
