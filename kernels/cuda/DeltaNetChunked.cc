// The unit of kernels/cuda/DeltaNetChunked.cu: gated_delta_scan over a prefill bucket (T >= 64)
// as the chunked (WY) rule, two launches (per-chunk preparation in parallel, then the state pass
// over the chunks) with a per-(head, chunk) scratch; the state pass on tensor cores where the op
// allows bf16 operands (precision "bf16"), else in f32 on CUDA cores. Smaller buckets, and head dims the kernels'
// thread tiles do not take, keep the sequential scan (DeltaNet.cc).
#include <algorithm>
#include <cmath>
#include <string>

#include "ir/StatusMacros.h"
#include "kernels/cuda/DeltaNetBind.h"
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
    const std::string precision = c.op.attrs().GetString("precision").value_or("f32");
    if (precision != "f32" && precision != "bf16")
      return Unsupported(c.op, "gated_delta_scan precision must be \"f32\" or \"bf16\"");
    // bf16: the state pass on tensor cores, 32 state columns per block (GDN_NC). f32: CUDA cores,
    // 16 columns per block, 2 blocks per SM at the 9B's 32 heads x 128 columns (that pass is
    // latency-bound).
    const bool bf16 = precision == "bf16" && Dv % 32 == 0 && Dk % 32 == 0;
    const int64_t cols = bf16 ? 32 : 16;
    // DeltaNetChunked.cu's GDN_PREP_SMEM_FLOATS / GDN_PREP16_SMEM_BYTES, GDN_SCAN_SMEM_FLOATS /
    // GDN_SCAN_SMEM_BYTES and GDN_SCR / GDN_SCR16.
    const int64_t prep_smem =
        bf16 ? kChunk * (2 * (Dk + 8) + (Dv + 8)) * 2 + (kChunk * (kChunk + 1) + 3 * 256 + 2 * kChunk) * 4
             : (2 * kChunk * (Dk + 1) + kChunk * (kChunk + 1) + 4 * kChunk) * 4;
    const int64_t stage_u16 = 3 * kChunk * Dk + kChunk * kChunk + 8 + 2 * kChunk * cols;
    const int64_t scan_smem =
        bf16
            ? 2 * (2 * stage_u16 + Dk * (cols + 8) + kChunk * (cols + 8)) + 16
            : (3 * kChunk * (Dk + 1) + kChunk * (kChunk + 1) + 2 * kChunk * (cols + 1) + Dk * (cols + 1) + 2 * kChunk) *
                  4;
    const int64_t scratch_floats = bf16 ? (3 * kChunk * Dk + kChunk * kChunk + 8) / 2 + Dv * kChunk
                                        : kChunk * Dk + kChunk * kChunk + kChunk * Dv + 3 * kChunk;
    if (std::max(prep_smem, scan_smem) > std::max(c.target.smem_per_block, c.target.smem_per_block_optin))
      return std::optional<OpSelection>();
    const int64_t chunks = (c.shapes.bucket + kChunk - 1) / kChunk;
    Launch prep;
    prep.kernel.module.file = "DeltaNetChunked.cu";
    prep.kernel.module.defines =
        MakeDefines({Def("GDN_HK", Hk), Def("GDN_HV", Hv), Def("GDN_DK", Dk), Def("GDN_DV", Dv), Def("GDN_COLS", cols),
                     Def("GDN_L2", c.op.attrs().Has("qk_l2_eps") ? 1 : 0), Def("GDN_BF16", bf16 ? 1 : 0)});
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
    s.scratch_bytes = chunks * Hv * scratch_floats * 4;  // per (chunk, head)
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(auto v, c.InShape(2));
    GdnChunkParams p;
    MEMRA_RETURN_IF_ERROR(FillScanParams(c, p));
    p.scratch = c.Scratch();
    w.Kernel(0, p);
    w.Kernel(1, p);
    // FLOPs of the chunked form per head and chunk: K K^T and Q K^T, the solve, then W S, Q S, M U
    // and K^T U (the profile's roofline).
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
