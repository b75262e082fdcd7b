// CUDA graphs for the CUDA executor: capture/replay of a program's capturable segments (captured
// on its second call) and the device greedy decode loop (one graph = the decode step + the greedy
// pick, launched n times per synchronization). See CudaExecutor.h.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/KernelModules.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/NormParams.h"
#include "runtime/Logits.h"
#include "runtime/cuda/CudaExecutorImpl.h"

namespace memra::runtime {

void CudaExecutor::AccumulateProfile(const Program& p) {
  if (!options_.profile || p.events.empty()) return;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    float step_ms = 0;
    dev_->driver().cuEventElapsedTime(&step_ms, p.events[i], p.events[i + 1]);
    // Per op and the unit that ran it (matmul by gemv or cuBLASLt, attention split or grouped...).
    const Step& st = p.steps[i];
    const absl::string_view op = ir::Mnemonic(st.op->kind());
    const absl::string_view unit = st.impl ? st.impl->name() : absl::string_view();
    ProfileEntry& e = profile_[unit.empty() || unit == op ? std::string(op) : absl::StrCat(op, "/", unit)];
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
        if (!st.ok())
          return absl::Status(st.code(), absl::StrCat("cuda executor: @", p.fn->name(), ": ", st.message()));
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
    MEMRA_ASSIGN_OR_RETURN(kcu::Launch l, kcu::GreedyNextLaunch(*p.fn, target_));
    MEMRA_ASSIGN_OR_RETURN(auto cubins, compiler_->CompileAll({l.kernel.module}));
    const std::string k = l.kernel.module.Key();
    if (!modules_.count(k)) {
      MEMRA_ASSIGN_OR_RETURN(modules_[k], cuda::LoadedModule::Load(*dev_, *cubins[0], k));
    }
    p.greedy.spec = l;
    MEMRA_ASSIGN_OR_RETURN(p.greedy.fn, modules_.at(k)->Function(l.kernel.entry));
  }
  if (token_ring_ == nullptr) {
    MEMRA_ASSIGN_OR_RETURN(cuda::DeviceBuffer b, dev_->Alloc((kTokenRing + kTokenRingTail) * 4, "decode token ring"));
    // greedy_next's ticket starts at 0 (its last block resets it after every call).
    MEMRA_RETURN_IF_ERROR(
        CuCheck(dev_->driver().cuMemsetD32Async(b.ptr(), 0, kTokenRing + kTokenRingTail, dev_->stream()),
                "cuda executor: token ring init"));
    token_ring_ = std::make_unique<cuda::DeviceBuffer>(std::move(b));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> CudaExecutor::DecodeGreedy(int32_t token, int64_t n_steps, int64_t first_step) {
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
        return absl::InvalidArgumentError(
            absl::StrCat("cuda executor: token id ", token, " outside the vocabulary [0, ", V, ")"));
    }
  MEMRA_RETURN_IF_ERROR(PrepareGreedy(*p));
  const cuda::CudaDriver& d = dev_->driver();
  const cuda::CUstream stream = dev_->stream();
  const Op* ret = p->steps.back().op;
  const CUdeviceptr logits = p->Ptr(ret->operand(0));
  const CUdeviceptr token_slot = p->Ptr(fn->argument(0));
  const CUdeviceptr ring = token_ring_->ptr(), ring_pos = ring + kTokenRing * 4, bad = ring_pos + 4;
  auto launch_greedy = [&]() -> absl::Status {
    kcu::GreedyNextParams a;
    a.logits = logits;
    a.token = token_slot;
    a.ring = ring;
    a.ring_pos = ring_pos;
    a.bad = bad;
    a.part = ring + kTokenRingParts * 4;
    a.ticket = ring + kTokenRingTicket * 4;
    a.ring_cap = static_cast<int>(kTokenRing);
    void* args[] = {&a};
    return CuCheck(cuda::LaunchKernel(d, p->greedy.fn, p->greedy.spec.grid, p->greedy.spec.block, p->greedy.spec.smem,
                                      stream, args, programmatic_launch_),
                   "cuda executor: launch of greedy_next");
  };
  auto enqueue_step = [&]() -> absl::Status {
    for (size_t i = 0; i < p->steps.size(); ++i) MEMRA_RETURN_IF_ERROR(EnqueueStep(*p, i, none, &p->step_work[i]));
    return launch_greedy();
  };
  bool all_capturable = true;
  for (const SegmentRun& seg : p->segments)
    all_capturable &= seg.capturable || (seg.end - seg.begin == 1 && p->steps[seg.begin].op->is(OpKind::kReturn));
  MEMRA_RETURN_IF_ERROR(
      CuCheck(d.cuMemcpyHtoDAsync(token_slot, &token, 4, stream), "cuda executor: decode token upload"));
  cuda::CUevent ev0 = nullptr, ev1 = nullptr;
  d.cuEventCreate(&ev0, cuda::kCuEventDefault);
  d.cuEventCreate(&ev1, cuda::kCuEventDefault);
  d.cuEventRecord(ev0, stream);
  std::vector<int32_t> out(static_cast<size_t>(n_steps));
  for (int64_t done = 0; done < n_steps;) {
    const int64_t n = std::min<int64_t>(kTokenRing, n_steps - done);
    // The write index and the non-finite record's step, adjacent.
    MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemsetD32Async(ring_pos, 0, 2, stream), "cuda executor: token ring reset"));
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
        MEMRA_RETURN_IF_ERROR(
            CuCheck(d.cuGraphLaunch(p->greedy_exec, stream), "cuda executor: graph launch of @decode"));
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
    int32_t bad_record[3] = {0, 0, 0};
    MEMRA_RETURN_IF_ERROR(
        CuCheck(d.cuMemcpyDtoHAsync(out.data() + done, ring, n * 4, stream), "cuda executor: token ring download"));
    MEMRA_RETURN_IF_ERROR(CuCheck(d.cuMemcpyDtoHAsync(bad_record, bad, sizeof(bad_record), stream),
                                  "cuda executor: token ring download"));
    absl::Status st = dev_->Synchronize("@decode greedy loop");
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("cuda executor: ", st.message()));
    done += n;
    // Every step of the chunk ran: the device position counts them. Under skip_ops (timing only)
    // non-finite logits are expected and not an error.
    if (bad_record[0] != 0 && options_.skip_ops.empty()) {
      position_ += done * step_advance;
      d.cuEventDestroy(ev0);
      d.cuEventDestroy(ev1);
      float value;
      std::memcpy(&value, &bad_record[2], sizeof(value));
      return NonFiniteLogitsError(absl::StrCat("decode step ", first_step + done - n + bad_record[0] - 1), value,
                                  bad_record[1]);
    }
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

}  // namespace memra::runtime
