#include "runtime/cuda/CudaExecutor.h"

#include "runtime/ArgumentBinding.h"
#include "runtime/DeviceMemory.h"
#include "runtime/KvCapacity.h"
#include "runtime/StateMemory.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "codegen/KernelModules.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/Function.h"
#include "ir/ResultBuffer.h"
#include "ir/StatusMacros.h"
#include "ir/support/ProgressBar.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/Weight.h"
#include "kernels/cuda/GemvQuant.h"
#include "kernels/formats/Quant.h"
#include "passes/Capture.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaExecutorImpl.h"

namespace memra::runtime {

namespace kc = memra::kernels::cpu;

absl::StatusOr<kernels::cuda::Target> CudaDeviceTarget(int ordinal) {
  MEMRA_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaDevice> dev, cuda::CudaDevice::Open(ordinal));
  return dev->target();
}

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
  workspace_.reset();
  modules_.clear();
  blas_.reset();
}

absl::StatusOr<std::unique_ptr<CudaExecutor>> CudaExecutor::Create(const ir::Module& module, const gguf::GgufFile& file,
                                                                   const CudaExecutorOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  // An op without any CUDA unit (the MoE ops today) is refused before the device is touched.
  MEMRA_RETURN_IF_ERROR(kcu::CheckGpuUnitsImplement(module));
  std::unique_ptr<CudaExecutor> e(new CudaExecutor(module, file, options));
  MEMRA_ASSIGN_OR_RETURN(e->dev_, cuda::CudaDevice::Open(options.device));
  e->dev_->FailAllocAt(options.fail_device_alloc);
  e->target_ = e->dev_->target();
  MEMRA_RETURN_IF_ERROR(kcu::CheckKernelsSupport(e->target_));
  e->programmatic_launch_ = e->options_.pdl && e->target_.arch >= 90;
  codegen::CompileOptions co;
  co.arch = e->dev_->arch();
  co.cache_dir = options.kernel_cache_dir;
  co.jobs = options.compile_jobs;
  co.fail_compile_at = options.fail_compile;
  MEMRA_ASSIGN_OR_RETURN(e->compiler_, codegen::KernelCompiler::Create(co));
  if (options.precompiled) e->compiler_->AddPrecompiled(*options.precompiled);
  // The exact decode class pins one cuBLASLt algorithm per weight shape (kernels/cuda/DecodeClass.h).
  MEMRA_ASSIGN_OR_RETURN(const kcu::DecodeClass decode_class, kcu::ReadDecodeClass(module));
  MEMRA_ASSIGN_OR_RETURN(e->blas_, cuda::CublasLt::Create(32u << 20, decode_class == kcu::DecodeClass::kExact));
  MEMRA_RETURN_IF_ERROR(e->PlanDeviceMemory());
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

DeviceMemoryBytes CudaExecutor::device_memory() const {
  DeviceMemoryBytes m;
  m.weights = weight_bytes_;
  for (const auto& [v, b] : state_) {
    const auto* s = static_cast<const ir::StateVar*>(v);
    switch (s->state_kind()) {
      case ir::StateKind::kKv:
        m.kv_cache += b->bytes();
        break;
      case ir::StateKind::kConv:
      case ir::StateKind::kDelta:
        m.recurrent += b->bytes();
        break;
      default:
        m.other_state += b->bytes();
    }
  }
  if (token_ring_) m.other_state += token_ring_->bytes();
  for (const auto& [k, p] : programs_) m.arenas += p->arena.bytes();
  m.workspace = (workspace_ ? workspace_->bytes() : 0) + (blas_ ? blas_->workspace_bytes() : 0);
  return m;
}

absl::Status CudaExecutor::PlanDeviceMemory() {
  // The weight mode the module's kernels were selected for (select-kernels' kernel_weights) must be
  // the one the weights are uploaded in: the records name the dequantization launches (or not).
  MEMRA_ASSIGN_OR_RETURN(std::optional<kcu::WeightMode> selected, kcu::ReadSelectionWeights(module_));
  if (selected && *selected != options_.weights)
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda executor: the module's kernels were selected for --weights ", kcu::WeightModeName(*selected),
        " but the executor holds the weights as ", kcu::WeightModeName(options_.weights), ": run with --weights ",
        kcu::WeightModeName(*selected), " or recompile with --weights ", kcu::WeightModeName(options_.weights)));
  // 1. Every weight's tensor, type and layout: a missing tensor, a mistyped one or a matrix whose
  // type has no GPU layout is refused here, before anything is uploaded.
  MEMRA_ASSIGN_OR_RETURN(weight_plans_, PlanWeights(module_, file_, options_.weights));
  // 2. The weights, the state, the units' workspace (the largest matrix in blocks a product
  // dequantizes) and the largest planned arena, against the free memory.
  MEMRA_ASSIGN_OR_RETURN(const DeviceMemoryBytes need,
                         PlannedDeviceMemory(module_, weight_plans_, target_, options_.weights));
  MEMRA_ASSIGN_OR_RETURN(const StateBytes state, StateBytesOf(module_));
  const int64_t workspace = static_cast<int64_t>(need.workspace);
  size_t free_b = 0, total_b = 0;
  dev_->driver().cuMemGetInfo(&free_b, &total_b);
  const bool capped = options_.memory_budget > 0 && options_.memory_budget < free_b;
  if (capped) free_b = options_.memory_budget;
  MEMRA_RETURN_IF_ERROR(
      CheckStateFits(state, free_b, capped ? "device memory (--max-device-memory)" : "device memory"));
  MEMRA_RETURN_IF_ERROR(CheckDeviceMemoryFits(
      need, free_b, capped ? absl::StrCat(dev_->name(), " within --max-device-memory") : dev_->name()));
  if (workspace > 0) {
    MEMRA_ASSIGN_OR_RETURN(cuda::DeviceBuffer b,
                           dev_->Alloc(static_cast<size_t>(workspace), "the dequantization workspace"));
    workspace_ = std::make_unique<cuda::DeviceBuffer>(std::move(b));
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::MakeCurrent() const { return dev_->MakeCurrent(); }

absl::Status CudaExecutor::UploadWeights() {
  uint64_t total = 0;
  for (const PlannedWeight& p : weight_plans_) total += p.tensor->data.size();
  std::optional<ProgressBar> bar;
  if (options_.progress && total > (64u << 20)) bar.emplace("upload weights", total);
  uint64_t done = 0;
  for (const PlannedWeight& plan : weight_plans_) {
    const ir::Weight* w = plan.weight;
    const gguf::TensorInfo* t = plan.tensor;
    // A tensor-parallel rank uploads its slice, cut here so only one slice is on the host at once.
    TensorSlice slice;
    gguf::TensorInfo local;
    if (plan.shard) {
      MEMRA_ASSIGN_OR_RETURN(slice, SliceTensor(*t, *plan.shard, options_.tp_rank, options_.tp_size));
      local = *t;
      local.ne = slice.ne;
      local.nbytes = slice.bytes.size();
      local.data = absl::MakeConstSpan(slice.bytes);
      t = &local;
    }
    auto dw = std::make_unique<DeviceWeight>();
    dw->weight = w;
    if (plan.layout != nullptr) {
      // The layout (kernels/cuda/WeightLayout.h): the GGUF bytes as they are (f32/f16/bf16, blocks),
      // or repacked here once (--weights bf16: dequantized on the host).
      dw->rows = plan.rows;
      dw->cols = plan.cols;
      dw->layout = plan.layout;
      const bool as_is =
          plan.layout->kind == kcu::WeightLayoutKind::kAsStored || plan.layout->kind == kcu::WeightLayoutKind::kBlocks;
      kcu::RepackedMatrix repacked;
      if (!as_is) {
        auto r = kcu::Repack(*plan.layout, w->dtype(), plan.rows, plan.cols, t->data);
        if (!r.ok())
          return absl::Status(r.status().code(), absl::StrCat("tensor \"", w->name(), "\": ", r.status().message()));
        repacked = *std::move(r);
      }
      const uint8_t* src = as_is ? reinterpret_cast<const uint8_t*>(t->data.data()) : repacked.data.data();
      const size_t bytes = as_is ? t->data.size() : repacked.data.size();
      // Spare bytes, zeroed: GemvQuant.cu's realigned copies read past a matrix's last row.
      static const uint8_t kZeros[kcu::kGemvQuantMatrixTailBytes] = {};
      MEMRA_ASSIGN_OR_RETURN(dw->matrix,
                             dev_->Alloc(bytes + kcu::kGemvQuantMatrixTailBytes, absl::StrCat("weight ", w->name())));
      dw->matrix_bytes = static_cast<int64_t>(bytes);
      MEMRA_RETURN_IF_ERROR(dev_->Upload(dw->matrix.ptr(), src, bytes));
      MEMRA_RETURN_IF_ERROR(dev_->Upload(dw->matrix.ptr() + bytes, kZeros, kcu::kGemvQuantMatrixTailBytes));
      if (!repacked.scales.empty()) {
        MEMRA_ASSIGN_OR_RETURN(dw->scales,
                               dev_->Alloc(repacked.scales.size(), absl::StrCat("weight ", w->name(), " (scales)")));
        MEMRA_RETURN_IF_ERROR(dev_->Upload(dw->scales.ptr(), repacked.scales.data(), repacked.scales.size()));
      }
      weight_bytes_ += dw->matrix_bytes + dw->scales.bytes();
    }
    if (plan.value_bytes > 0) {
      const int64_t n = t->NumElements();
      std::vector<float> vals(static_cast<size_t>(n));
      MEMRA_ASSIGN_OR_RETURN(kc::WeightView flat, kc::WeightView::Make(t->type, 1, n, t->data));
      MEMRA_RETURN_IF_ERROR(kc::DequantizeRow(flat, 0, vals.data()));
      MEMRA_ASSIGN_OR_RETURN(dw->values, dev_->Alloc(vals.size() * 4, absl::StrCat("weight ", w->name())));
      MEMRA_RETURN_IF_ERROR(dev_->Upload(dw->values.ptr(), vals.data(), vals.size() * 4));
      weight_bytes_ += dw->values.bytes();
    }
    done += plan.tensor->data.size();
    if (bar) bar->Update(done);
    weights_[w] = std::move(dw);
  }
  if (bar) bar->Finish();
  weight_plans_.clear();
  return absl::OkStatus();
}

absl::Status CudaExecutor::AllocateState() {
  // Checked with the weights before the upload (PlanDeviceMemory); again here against what is left.
  MEMRA_ASSIGN_OR_RETURN(const StateBytes need, StateBytesOf(module_));
  {
    size_t free_b = 0, total_b = 0;
    dev_->driver().cuMemGetInfo(&free_b, &total_b);
    MEMRA_RETURN_IF_ERROR(CheckStateFits(need, free_b, "device memory"));
  }
  for (const auto& sp : module_.states()) {
    const ir::StateVar* s = sp.get();
    if (!s->shape().IsStatic())
      return absl::InvalidArgumentError(absl::StrCat("state @", s->name(), " has a symbolic shape"));
    // KV caches may be 16-bit or q8_0 (-ctk / -ctv); the kernels read them through storage codes.
    MEMRA_ASSIGN_OR_RETURN(const int64_t bytes, StateStorageBytes(*s, "CUDA"));
    MEMRA_ASSIGN_OR_RETURN(cuda::DeviceBuffer b, dev_->Alloc(bytes, absl::StrCat("state @", s->name())));
    state_[s] = std::make_unique<cuda::DeviceBuffer>(std::move(b));
    if (s->state_kind() == ir::StateKind::kPosition && (position_state_ == nullptr || s->name() == "pos"))
      position_state_ = s;
  }
  kv_capacity_ = KvContextCapacity(module_);
  return ResetState();
}

absl::Status CudaExecutor::ResetState() {
  MEMRA_RETURN_IF_ERROR(dev_->MakeCurrent());
  for (auto& [s, b] : state_) MEMRA_RETURN_IF_ERROR(dev_->Zero(b->ptr(), b->bytes()));
  position_ = 0;
  return dev_->Synchronize("state reset");
}

absl::Status CudaExecutor::WriteState(absl::string_view name, int64_t offset, const void* data, int64_t bytes) {
  const ir::StateVar* s = module_.state(name);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("cuda executor: no state @", name));
  const cuda::DeviceBuffer& b = *state_.at(s);
  if (offset < 0 || bytes < 0 || static_cast<uint64_t>(offset + bytes) > b.bytes())
    return absl::OutOfRangeError(absl::StrCat("cuda executor: write of ", bytes, " bytes at ", offset, " into state @",
                                              name, " of ", b.bytes(), " bytes"));
  MEMRA_RETURN_IF_ERROR(dev_->MakeCurrent());
  if (data) return dev_->Upload(b.ptr() + offset, data, static_cast<size_t>(bytes));
  return dev_->Zero(b.ptr() + offset, static_cast<size_t>(bytes));
}

absl::Status CudaExecutor::AllocateStash(int64_t bytes) {
  if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("cuda executor: a stash of ", bytes, " bytes"));
  MEMRA_RETURN_IF_ERROR(dev_->MakeCurrent());
  MEMRA_RETURN_IF_ERROR(dev_->Synchronize("freeing the state stash"));
  stash_.reset();
  if (bytes == 0) return absl::OkStatus();
  MEMRA_ASSIGN_OR_RETURN(cuda::DeviceBuffer b, dev_->Alloc(static_cast<size_t>(bytes), "the state stash"));
  stash_ = std::make_unique<cuda::DeviceBuffer>(std::move(b));
  return absl::OkStatus();
}

absl::Status CudaExecutor::CopyStash(absl::string_view name, int64_t state_offset, int64_t stash_offset, int64_t bytes,
                                     bool to_stash) {
  const ir::StateVar* s = module_.state(name);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("cuda executor: no state @", name));
  const cuda::DeviceBuffer& b = *state_.at(s);
  const uint64_t stash_bytes = stash_ ? stash_->bytes() : 0;
  if (state_offset < 0 || bytes < 0 || static_cast<uint64_t>(state_offset + bytes) > b.bytes() || stash_offset < 0 ||
      static_cast<uint64_t>(stash_offset + bytes) > stash_bytes)
    return absl::OutOfRangeError(absl::StrCat("cuda executor: a stash copy of ", bytes, " bytes between state @", name,
                                              " (", b.bytes(), " bytes) at ", state_offset, " and the stash (",
                                              stash_bytes, " bytes) at ", stash_offset));
  if (bytes == 0) return absl::OkStatus();
  MEMRA_RETURN_IF_ERROR(dev_->MakeCurrent());
  const CUdeviceptr st = b.ptr() + state_offset, sh = stash_->ptr() + stash_offset;
  return dev_->CopyDevice(to_stash ? sh : st, to_stash ? st : sh, static_cast<size_t>(bytes));
}

absl::StatusOr<HostTensor> CudaExecutor::ReadState(absl::string_view name) const {
  const ir::StateVar* s = module_.state(name);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("no state @", name));
  llvm::SmallVector<int64_t, 4> shape;
  for (const ir::Dim& d : s->shape().dims()) shape.push_back(d.value());
  HostTensor t = HostTensor::Zeros(s->dtype(), shape);
  if (t.nbytes() != static_cast<int64_t>(state_.at(s)->bytes()))
    return absl::InternalError(
        absl::StrCat("state @", name, ": ", t.nbytes(), " host bytes for ", state_.at(s)->bytes(), " device bytes"));
  MEMRA_RETURN_IF_ERROR(dev_->MakeCurrent());
  MEMRA_RETURN_IF_ERROR(dev_->Download(t.mutable_data(), state_.at(s)->ptr(), static_cast<size_t>(t.nbytes())));
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
  if (name == "decode" && kcu::GreedyNextLaunch(*fn, target_).ok()) MEMRA_RETURN_IF_ERROR(PrepareGreedy(*p));
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
  // 1. The selection per op: the op's record when select-kernels annotated this static function
  // (a plan, memra run's pipeline), made for a target whose selection fields match this device;
  // else selected now for this device by the units of kernels/cuda/GpuOps.def.
  bool use_records = false;
  if (bucket == 0 && kcu::IsStaticFunction(fn)) {
    MEMRA_ASSIGN_OR_RETURN(std::optional<kcu::Target> recorded, kcu::ReadSelectionTarget(module_));
    if (recorded) {
      const std::vector<std::string> diff = kcu::SelectionMismatches(*recorded, target_);
      if (!diff.empty())
        return absl::FailedPreconditionError(absl::StrCat(
            "cuda executor: @", fn.name(), ": its kernels were selected for another GPU (", absl::StrJoin(diff, "; "),
            "): recompile for this device (memra compile --arch ", target_.ArchName(), ") or run the GGUF"));
      use_records = true;
    }
  }
  MEMRA_ASSIGN_OR_RETURN(std::vector<kcu::OpSelection> selections,
                         kcu::SelectionsOf(fn, shape_bucket, target_, options_.weights, use_records));
  std::vector<codegen::ModuleSpec> modules;
  size_t next = 0;
  for (const Op* op : fn.Ops()) {
    if (op->is(OpKind::kSegment)) continue;
    Step s;
    s.op = op;
    MEMRA_ASSIGN_OR_RETURN(s.shapes, kcu::ShapesAt(*op, shape_bucket, options_.weights));
    s.selection = std::move(selections[next++]);
    s.impl = kcu::FindGpuOpImpl(s.selection.impl);
    if (s.impl == nullptr || !s.impl->Implements(op->kind()))
      return OpError(*op, absl::StrCat("implementation \"", s.selection.impl, "\" does not implement this op"));
    const int64_t have = workspace_ ? static_cast<int64_t>(workspace_->bytes()) : 0;
    if (s.selection.workspace_bytes > have)
      return OpError(
          *op, absl::StrCat("needs ", s.selection.workspace_bytes, " bytes of workspace, the executor sized ", have,
                            " (a unit whose workspace grows with the bucket?)"));
    for (const kcu::Launch& l : s.selection.launches) {
      s.launches.push_back({l, nullptr});
      modules.push_back(l.kernel.module);
    }
    // gated_attention_step and qk_norm_rope_append append too (their first operands are kv_append's).
    if (op->is(OpKind::kKvAppend) || op->is(OpKind::kGatedAttentionStep) || op->is(OpKind::kQkNormRopeAppend))
      p->kv_appends.push_back(op);
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
      MEMRA_ASSIGN_OR_RETURN(l.fn, modules_.at(l.spec.kernel.module.Key())->Function(l.spec.kernel.entry, l.spec.smem));
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
      b = ir::ResultBufferBytes(op, i, b);  // a q8 companion after the values
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
    if (s.selection.scratch_bytes > 0)
      s.scratch_offset = place(s.selection.scratch_bytes, static_cast<int64_t>(si), static_cast<int64_t>(si));
  }
  for (const Placed& q : placed) p->arena_bytes = std::max(p->arena_bytes, q.off + q.bytes);
  // 3b. A memory-planned static function (plan-memory's `arena` offsets, e.g. from a plan file):
  // its layout replaces the one above, so the device addresses are the ones the plan records.
  // Per-step scratch goes where plan-memory placed the op's `scratch_bytes` when select-kernels
  // requested it, else into one region past the planned arena (a step's scratch lives only during
  // its step). Aliases (reshape, cast) keep sharing their root's bytes.
  if (const std::optional<int64_t> planned = fn.attrs().GetI64("arena_bytes"); bucket == 0 && planned) {
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda executor: @", fn.name(), ": the memory plan is unusable: ", what));
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
      const int64_t scratch = s.selection.scratch_bytes;
      if (scratch == 0) continue;
      const std::optional<int64_t> at = op.attrs().GetI64("scratch");
      if (at && op.attrs().I64Or("scratch_bytes", 0) >= scratch && *at % 256 == 0 && *at + scratch <= *planned) {
        s.scratch_offset = *at;
      } else {
        s.scratch_offset = (*planned + 255) / 256 * 256;
        extra = std::max(extra, scratch);
      }
    }
    p->arena_bytes = extra > 0 ? (*planned + 255) / 256 * 256 + extra : *planned;
    p->planned_arena = true;
  }
  for (auto& [alias, r] : root) p->slots[alias] = p->slots[Root(alias)];
  // 3c. The steps' tickets (OpSelection::ticket_words) past the arena's planned bytes: zeroed once
  // here and kept zero by their kernels, so nothing is planned over them and no poison reaches them.
  const int64_t tickets_at = (p->arena_bytes + 255) / 256 * 256;
  int64_t ticket_words = 0;
  for (Step& s : p->steps)
    if (s.selection.ticket_words > 0) {
      s.tickets_offset = tickets_at + ticket_words * 4;
      ticket_words += s.selection.ticket_words;
    }
  MEMRA_ASSIGN_OR_RETURN(p->arena, dev_->Alloc(ticket_words > 0 ? tickets_at + ticket_words * 4 : p->arena_bytes,
                                               absl::StrCat("arena of @", fn.name(), " bucket ", bucket)));
  if (ticket_words > 0)
    MEMRA_RETURN_IF_ERROR(CuCheck(dev_->driver().cuMemsetD32Async(p->arena.ptr() + tickets_at, 0,
                                                                  static_cast<size_t>(ticket_words), dev_->stream()),
                                  absl::StrCat("@", fn.name(), ": zeroing the steps' tickets")));
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

absl::StatusOr<std::vector<HostTensor>> CudaExecutor::Run(absl::string_view name, std::vector<HostTensor> args,
                                                          const std::vector<bool>* want) {
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
    MEMRA_RETURN_IF_ERROR(CheckKvAppendFits(*op, position_, kshape[0]));
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
    MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemsetD8Async(p->arena.ptr(), 0xff, p->arena_bytes, stream), "arena poison"));
  for (unsigned i = 0; i < fn->num_arguments(); ++i) {
    const HostTensor& t = args[i];
    const void* src = t.dtype() == DType::kF32   ? static_cast<const void*>(t.f32())
                      : t.dtype() == DType::kI32 ? static_cast<const void*>(t.i32())
                                                 : static_cast<const void*>(t.i64());
    MEMRA_RETURN_IF_ERROR(
        CuCheck(d.cuMemcpyHtoDAsync(p->Ptr(fn->argument(i)), src, t.numel() * ElemBytes(t.dtype()), stream),
                absl::StrCat("@", name, ": argument upload")));
  }
  cuda::CUevent ev0 = nullptr, ev1 = nullptr;
  d.cuEventCreate(&ev0, cuda::kCuEventDefault);
  d.cuEventCreate(&ev1, cuda::kCuEventDefault);
  d.cuEventRecord(ev0, stream);

  std::vector<HostTensor> results;
  const Op* ret = p->steps.empty() ? nullptr : p->steps.back().op;
  if (ret != nullptr && ret->is(OpKind::kReturn))
    for (unsigned i = 0; i < ret->num_operands(); ++i) {
      const ir::Value* v = ret->operand(i);
      MEMRA_ASSIGN_OR_RETURN(auto shape, ConcreteShape(v, bindings));
      if (v->dtype() != DType::kF32 && v->dtype() != DType::kI32) return OpError(*ret, "results must be f32 or i32");
      const bool wanted = want == nullptr || (i < want->size() && (*want)[i]);
      results.push_back(wanted ? HostTensor::Zeros(v->dtype(), shape) : HostTensor());
    }
  MEMRA_ASSIGN_OR_RETURN(const int64_t position_delta, PositionAdvance(*p, bindings, position_state_));
  MEMRA_RETURN_IF_ERROR(EnqueueProgram(*p, bindings, /*allow_graphs=*/true));
  d.cuEventRecord(ev1, stream);
  // Results back to the host.
  if (ret != nullptr && ret->is(OpKind::kReturn))
    for (unsigned i = 0; i < ret->num_operands(); ++i) {
      HostTensor& t = results[i];
      if (want != nullptr && !(i < want->size() && (*want)[i])) continue;  // left on the device
      void* dst = t.dtype() == DType::kF32 ? static_cast<void*>(t.f32()) : static_cast<void*>(t.i32());
      MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemcpyDtoHAsync(dst, p->Ptr(ret->operand(i)), t.numel() * 4, stream),
                                    absl::StrCat("@", name, ": result download")));
    }
  absl::Status st = dev_->Synchronize(absl::StrCat("@", name, " (bucket ", bucket, ")"));
  if (!st.ok())
    return absl::Status(st.code(),
                        absl::StrCat("cuda executor: ", st.message(), " (set sync_each_op to find the failing op)"));
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

std::string CudaExecutor::ProfileReport() const {
  double total = 0;
  for (const auto& [k, e] : profile_) total += e.ms;
  std::vector<std::pair<std::string, ProfileEntry>> rows(profile_.begin(), profile_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  // % of roofline: the time the op's FLOPs (at the dense bf16 tensor rate) or its bytes (at the
  // read bandwidth), whichever is longer, would take, over the time it took.
  const double peak_flops = target_.bf16_tflops * 1e12, peak_bytes = target_.mem_gbps * 1e9;
  std::string out = absl::StrFormat("%-22s %8s %10s %6s %9s %9s %9s  %s\n", "op", "calls", "ms", "%", "TFLOP/s", "GB/s",
                                    "roofline", "bound by");
  double floor_ms = 0;
  for (const auto& [k, e] : rows) {
    const double s = e.ms * 1e-3;
    const double t_flops = peak_flops > 0 ? e.flops / peak_flops : 0,
                 t_bytes = peak_bytes > 0 ? e.bytes / peak_bytes : 0;
    floor_ms += std::max(t_flops, t_bytes) * 1e3;
    absl::StrAppend(&out,
                    absl::StrFormat("%-22s %8d %10.3f %5.1f%% %9.2f %9.0f %8.1f%%  %s\n", k, e.count, e.ms,
                                    total > 0 ? 100 * e.ms / total : 0, s > 0 ? e.flops / s / 1e12 : 0,
                                    s > 0 ? e.bytes / s / 1e9 : 0, s > 0 ? 100 * std::max(t_flops, t_bytes) / s : 0,
                                    t_flops > t_bytes ? "FLOPs" : "bytes"));
  }
  absl::StrAppend(&out, absl::StrFormat("%-22s %8s %10.3f  (roofline %.3f ms = %.1f%%; ceilings %d GB/s, %d bf16 "
                                        "TFLOP/s from the target; KV-cache reads not counted)\n",
                                        "total", "", total, floor_ms, total > 0 ? 100 * floor_ms / total : 0,
                                        target_.mem_gbps, target_.bf16_tflops));
  return out;
}

}  // namespace memra::runtime
