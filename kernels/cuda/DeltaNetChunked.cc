// The unit of kernels/cuda/DeltaNetChunked.cu: gated_delta_scan over a prefill bucket (T >= 64)
// as the chunked (WY) rule, two launches (per-chunk preparation in parallel, then the state pass
// over the chunks) with a per-(head, chunk) scratch. Smaller buckets, and head dims the kernels'
// thread tiles do not take, keep the sequential scan (DeltaNet.cc).
#include <algorithm>
#include <cmath>

#include "ir/StatusMacros.h"
#include "kernels/cuda/DeltaNetParams.h"
#include "kernels/cuda/GpuOp.h"

namespace memra::kernels::cuda {

namespace {

constexpr int64_t kChunk = 64;     // GDN_C
constexpr int64_t kThreads = 256;  // GDN_PREP_THREADS, GDN_SCAN_THREADS

class GatedDeltaScanChunkedImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "gated_delta_scan_chunked"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kGatedDeltaScan; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const int64_t Hk = c.shapes.in[0][1], Dk = c.shapes.in[0][2], Hv = c.shapes.in[2][1], Dv = c.shapes.in[2][2];
    if (c.shapes.bucket < kChunk || Dk % 16 != 0 || Dk > 256 || Dv % 16 != 0) return std::optional<OpSelection>();
    // 16 state columns per scan block: 2 blocks per SM at the 9B's 32 heads x 128 columns (the
    // pass is latency-bound; 32 columns halve the blocks for no gain in reuse that matters).
    const int64_t cols = 16;
    // DeltaNetChunked.cu's GDN_PREP_SMEM_FLOATS and GDN_SCAN_SMEM_FLOATS.
    const int64_t prep_smem = (2 * kChunk * (Dk + 1) + kChunk * (kChunk + 1) + 3 * kChunk) * 4;
    const int64_t scan_smem =
        (3 * kChunk * (Dk + 1) + kChunk * (kChunk + 1) + 2 * kChunk * (cols + 1) + Dk * (cols + 1) + 2 * kChunk) * 4;
    if (std::max(prep_smem, scan_smem) > std::max(c.target.smem_per_block, c.target.smem_per_block_optin))
      return std::optional<OpSelection>();
    const int64_t chunks = (c.shapes.bucket + kChunk - 1) / kChunk;
    Launch prep;
    prep.kernel.module.file = "DeltaNetChunked.cu";
    prep.kernel.module.defines =
        MakeDefines({Def("GDN_HK", Hk), Def("GDN_HV", Hv), Def("GDN_DK", Dk), Def("GDN_DV", Dv), Def("GDN_COLS", cols),
                     Def("GDN_L2", c.op.attrs().Has("qk_l2_eps") ? 1 : 0)});
    prep.kernel.entry = "gdn_chunk_prep";
    prep.block = kThreads;
    prep.grid = static_cast<uint32_t>(Hv * chunks);
    prep.smem = static_cast<uint32_t>(prep_smem);
    Launch scan = prep;
    scan.kernel.entry = "gdn_chunk_scan";
    scan.grid = static_cast<uint32_t>(Hv * (Dv / cols));
    scan.smem = static_cast<uint32_t>(scan_smem);
    OpSelection s;
    s.launches = {prep, scan};
    // GDN_SCR floats per (chunk, head): W, M, Y, gamma and the two inverse norms.
    s.scratch_bytes = chunks * Hv * (kChunk * Dk + kChunk * kChunk + kChunk * Dv + 3 * kChunk) * 4;
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(auto v, c.InShape(2));
    GdnChunkParams p;
    p.q = c.In(0);
    p.k = c.In(1);
    p.v = c.In(2);
    p.g = c.In(3);
    p.beta = c.In(4);
    p.state = c.In(5);
    p.o = c.Out(0);
    p.scratch = c.Scratch();
    p.n_tok = static_cast<int>(x[0]);
    p.scale = static_cast<float>(c.op().attrs().F64Or("scale", 1.0));
    p.qk_eps = static_cast<float>(c.op().attrs().F64Or("qk_l2_eps", 0.0));
    w.Kernel(0, p);
    w.Kernel(1, p);
    // FLOPs of the chunked form per head and chunk: K K^T and Q K^T, the solve, then W S, Q S, M U
    // and K^T U (the profile's roofline; CUDA cores today, so far below the tensor rate).
    const double n = static_cast<double>(x[0]), dk = static_cast<double>(x[2]), dv = static_cast<double>(v[2]),
                 hv = static_cast<double>(v[1]);
    const double per_chunk = 2.0 * (2 * kChunk * kChunk * dk + kChunk * kChunk / 2.0 * (dk + dv) +
                                    kChunk * dk * dv * 3 + kChunk * kChunk * dv);
    w.Count(hv * std::ceil(n / kChunk) * per_chunk, 0);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateGatedDeltaScanChunked() { return std::make_unique<GatedDeltaScanChunkedImpl>(); }

}  // namespace memra::kernels::cuda
