// kernels/cuda/Attention.cu's decode path without a GPU: attention_split + attention_combine of one
// module (the ATT_* -D constants) on the host emulation (CudaHostEmulation.h), the caches stored
// in the module's element types (ATT_KT / ATT_VT: f32, f16, bf16, q8_0, written by Common.cuh's
// kv_store_warp as kv_append does), at four live lengths: one range's worth of keys and one that
// fills a third of the ranges (the blocks of the others write nothing, and the merge must read
// only the live ones: live_ranges), one that fills them all, and the last row of the cache;
// with ATT_EMU_WINDOW > 0 as a sliding window. Checked against a float64 reference over the
// rounded rows; partials and outputs are NaN-poisoned first, so a range or a head the kernels do
// not write fails. ATT_EMU_GATE: the combine applies an output gate (per element, or per head). With MEMRA_Q8X_OFF (a
// q8 companion, kernels/cuda/Q8Companion.h) the combine's companion after the outputs must equal gemv_q_quantize_x's
// bytes of them (Q8xReference.h). With ATT_MERGE the split launch alone (each head chunk's last
// block merges the ranges): its output must equal attention_combine's over the same partials bit
// for bit, and its tickets must be zero again after every launch. Prints the normalized MSE;
// exit status 1 past the bound.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#define __CUDACC__ 1
#include "kernels/cuda/AttentionParams.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/KernelParams.h"
#undef __CUDACC__
#include "tests/cuda/emulation/KvStoreEmu.h"
#include "tests/cuda/emulation/Q8xReference.h"

float emu_half(unsigned short h) { return f16_to_f32(h); }
void emu_register(const char*, void (*)(const void*)) {}

namespace att_emu {
#include "kernels/cuda/Attention.cu"
}

#ifndef ATT_EMU_ROWS
#define ATT_EMU_ROWS 900
#endif
#ifndef ATT_RING
#define ATT_RING 0
#endif
#ifndef ATT_EMU_WINDOW
#define ATT_EMU_WINDOW 0
#endif
#ifndef ATT_EMU_GATE
#define ATT_EMU_GATE 0  // 1: attention_gated's output gate in the combine (ATT_GATE_HEAD: one a head)
#endif

int main() {
  constexpr int HQ = ATT_HQ, HKV = ATT_HKV, D = ATT_D, G = HQ / HKV, ROWS = ATT_EMU_ROWS;
  std::mt19937 rng(11);
  std::normal_distribution<float> N(0.0f, 1.0f);
  std::vector<float> q(HQ * D), k(ROWS * HKV * D), v(ROWS * HKV * D);
  for (float& x : q) x = N(rng);
  for (float& x : k) x = N(rng);
  for (float& x : v) x = 2.0f * N(rng);
  // The caches as kv_append writes them, and the values the kernels then read. ATT_RING > 0: a
  // sliding-window ring of ATT_RING rows (key j in row j % ATT_RING), refilled for each position
  // with the keys it holds then.
  constexpr int SROWS = ATT_RING > 0 ? ATT_RING : ROWS, W = HKV * D;
  std::vector<unsigned char> kc(emu_kv_bytes<ATT_KT>(SROWS * W)), vc(emu_kv_bytes<ATT_VT>(SROWS * W));
  std::vector<double> kr(k.size()), vr(v.size());
  auto fill_ring = [&](int last) {  // rows last - SROWS + 1 .. last, each ring row once
    const int first = std::max(0, last - SROWS + 1);
    const i64 n = (i64)(last + 1 - first) * W;
    auto at = [&](long long i) { return (i64)((first + i / W) % SROWS) * W + i % W; };
    const std::vector<float> kb = emu_store_kv<ATT_KT>(kc.data(), k.data() + (i64)first * W, n, at);
    const std::vector<float> vb = emu_store_kv<ATT_VT>(vc.data(), v.data() + (i64)first * W, n, at);
    for (i64 i = 0; i < n; ++i) {
      kr[(i64)first * W + i] = kb[i];
      vr[(i64)first * W + i] = vb[i];
    }
  };
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int min_chunk = ATT_MIN_CHUNK;
  // One live range (a few keys), a third of them live, all of them, the last row. The partials
  // start as NaN: a range the merge reads that no block wrote shows.
  const int positions[] = {3, min_chunk * ATT_SPLITS / 3, min_chunk * ATT_SPLITS + 37, ROWS - 1};
  int fail = 0;
  for (int pos : positions) {
    if (pos >= ROWS) continue;
    fill_ring(pos);
#ifdef MEMRA_Q8X_OFF
    static_assert(MEMRA_Q8X_ELEMS == HQ * D && MEMRA_Q8X_OFF % 4 == 0 && MEMRA_Q8X_OFF >= HQ * D * 4);
    constexpr size_t kO = MEMRA_Q8X_OFF / 4 + (EmuQ8xBytes(HQ * D) + 3) / 4 + 64;  // + a guard
#else
    constexpr size_t kO = HQ * D;
#endif
    std::vector<float> part(HQ * ATT_SPLITS * (D + 4), std::nanf("")), o(kO, std::nanf(""));
    AttentionParams p{};
    p.q = q.data();
    p.k_cache = kc.data();
    p.v_cache = vc.data();
    p.pos = &pos;
    p.part = part.data();
    p.n_tok = 1;
    p.scale = scale;
    p.window = ATT_EMU_WINDOW;
    AttentionCombineParams c{};  // no gate (zeroed)
    c.part = part.data();
    c.o = o.data();
    c.pos = &pos;
    c.window = ATT_EMU_WINDOW;
#if ATT_EMU_GATE
    // attention_gated's output gate applied by the combine: per element, or (ATT_GATE_HEAD) a head.
#ifdef ATT_GATE_HEAD
    std::vector<float> gate(HQ);
    c.gate_stride = 1;
#else
    std::vector<float> gate(HQ * D);
    c.gate_stride = D;
#endif
    for (float& x : gate) x = 2.0f * N(rng);
    c.gate = gate.data();
#endif
#ifdef ATT_MERGE
    // The split merges in its last blocks; then attention_combine over the same partials into a
    // second output, which must be the same bits.
    static std::vector<unsigned> tickets(HQ / ATT_GH, 0u);  // zero between launches, across positions
    p.o = o.data();
    p.gate = c.gate;
    p.gate_stride = c.gate_stride;
    p.tickets = tickets.data();
    emu_launch([](const void* a) { att_emu::attention_split(*static_cast<const AttentionParams*>(a)); },
               HQ / ATT_GH * ATT_SPLITS, ATT_WARPS * 32, &p);
    for (unsigned t : tickets)
      if (t != 0) {
        std::printf("  a head chunk's ticket is %u after the launch (not zero)\n", t);
        fail = 1;
      }
    std::vector<float> o2(kO, std::nanf(""));
    c.o = o2.data();
    emu_launch([](const void* a) { att_emu::attention_combine(*static_cast<const AttentionCombineParams*>(a)); }, HQ,
               ATT_CW * 32, &c);
    if (std::memcmp(o.data(), o2.data(), kO * sizeof(float)) != 0) {
      std::printf("  the merged split's output differs from attention_combine's\n");
      fail = 1;
    }
#else
    p.o = nullptr;  // the partials only
    emu_launch([](const void* a) { att_emu::attention_split(*static_cast<const AttentionParams*>(a)); },
               HQ / ATT_GH * ATT_SPLITS, ATT_WARPS * 32, &p);
    emu_launch([](const void* a) { att_emu::attention_combine(*static_cast<const AttentionCombineParams*>(a)); }, HQ,
               ATT_CW * 32, &c);
#if ATT_MERGE_EARLY
    // The combine with its first loads early (select-kernels{combine-early-loads}) against the
    // merge without them over the same partials: the same bits.
    {
      std::vector<float> o2(kO, std::nanf(""));
      AttentionCombineParams c2 = c;
      c2.o = o2.data();
      emu_launch(
          [](const void* a) {
            const auto& cp = *static_cast<const AttentionCombineParams*>(a);
            att_emu::merge_ranges<1>(cp.part, blockIdx.x, cp.o, cp.gate, cp.gate_stride,
                                     att_emu::live_ranges(cp.pos[0], cp.window));
          },
          HQ, ATT_CW * 32, &c2);
      if (std::memcmp(o.data(), o2.data(), kO * sizeof(float)) != 0) {
        std::printf("  the combine with early loads differs from the merge without them\n");
        fail = 1;
      }
    }
#endif
#endif
    double err = 0, ref = 0;
    int bad = 0;
    const int first = ATT_EMU_WINDOW > 0 ? std::max(0, pos - ATT_EMU_WINDOW + 1) : 0;
    for (int h = 0; h < HQ; ++h) {
      const int kvh = h / G;
      std::vector<double> s(pos + 1, 0.0);
      double m = -1e300;
      for (int j = first; j <= pos; ++j) {
        double d = 0;
        for (int c2 = 0; c2 < D; ++c2) d += double(q[h * D + c2]) * kr[(j * HKV + kvh) * D + c2];
        s[j] = d * scale;
        m = std::max(m, s[j]);
      }
      double l = 0;
      for (int j = first; j <= pos; ++j) l += std::exp(s[j] - m);
      for (int c2 = 0; c2 < D; ++c2) {
        double acc = 0;
        for (int j = first; j <= pos; ++j) acc += std::exp(s[j] - m) * vr[(j * HKV + kvh) * D + c2];
        double want = acc / l;
#if ATT_EMU_GATE
#ifdef ATT_GATE_HEAD
        want *= 1.0 / (1.0 + std::exp(-double(gate[h])));
#else
        want *= 1.0 / (1.0 + std::exp(-double(gate[h * D + c2])));
#endif
#endif
        const double got = o[h * D + c2];
        if (!std::isfinite(got)) ++bad;
        err += (got - want) * (got - want);
        ref += want * want;
      }
    }
#ifdef MEMRA_Q8X_OFF
    {
      const unsigned char* got = reinterpret_cast<const unsigned char*>(o.data()) + MEMRA_Q8X_OFF;
      const std::vector<float> poison(1, std::nanf(""));
      std::vector<unsigned char> fresh(EmuQ8xBytes(HQ * D));  // every group is written
      for (size_t i = 0; i < fresh.size(); i += 4)
        std::memcpy(&fresh[i], &poison[0], std::min<size_t>(4, fresh.size() - i));
      EmuQ8xReference(o.data(), HQ * D, HQ * D, fresh.data());
      int diff = 0;
      for (size_t i = 0; i < fresh.size(); ++i) diff += fresh[i] != got[i];
      for (size_t i = (MEMRA_Q8X_OFF + fresh.size() + 3) / 4; i < o.size(); ++i) bad += !std::isnan(o[i]);
      std::printf("  q8 companion: %d of %zu bytes differ\n", diff, fresh.size());
      if (diff) fail = 1;
    }
#endif
    const double nmse = err / ref;
#ifdef ATT_MERGE
    const int merged = 1;
#else
    const int merged = 0;
#endif
    std::printf(
        "attention_split HQ %d HKV %d D %d GH %d splits %d kt %d vt %d window %d ring %d merged %d pos %d: nmse "
        "%.3g%s\n",
        HQ, HKV, D, ATT_GH, ATT_SPLITS, ATT_KT, ATT_VT, ATT_EMU_WINDOW, ATT_RING, merged, pos, nmse,
        bad ? " (unwritten outputs)" : "");
    if (bad || !(nmse < 1e-10)) fail = 1;
  }
  return fail;
}
