// kernels/cuda/Common.cuh's memra_l2_prefetch without a GPU: the pieces it asks the L2 for,
// recorded through the emulation's hook, cover the 16-byte aligned part of the range exactly (each
// byte once, nothing outside it), each piece 16-byte aligned, a multiple of 16 bytes and at most
// 64 KB, piece i issued by lane 0 of warp i mod W of the launch's first blocks (W: their warps). Cases:
// aligned and unaligned starts, a range shorter than its unaligned head, an empty range, fewer
// blocks than the issuing count, a one-warp launch, a range of many pieces per warp. Exit status
// 1 on any difference.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <vector>

#include "tests/cuda/emulation/CudaHostEmulation.h"
#define __CUDACC__ 1
#include "kernels/cuda/Common.cuh"
#undef __CUDACC__

float emu_half(unsigned short) { return 0.0f; }
void emu_register(const char*, void (*)(const void*)) {}

namespace {

struct Args {
  const void* p;
  long long bytes;
  int blocks;
};
struct Piece {
  uintptr_t at;
  unsigned n, block, thread;
};
std::mutex mu;
std::vector<Piece> pieces;

void Record(const void* p, unsigned n) {
  std::lock_guard<std::mutex> lock(mu);
  pieces.push_back({reinterpret_cast<uintptr_t>(p), n, blockIdx.x, threadIdx.x});
}

struct Case {
  uintptr_t base;
  long long bytes;
  unsigned grid, block;
  int blocks;
};

// The failures of one case (0: it checks).
int Check(const Case& c) {
  pieces.clear();
  // The range is never read: any address serves, unaligned ones included.
  Args a{reinterpret_cast<const void*>(c.base), c.bytes, c.blocks};
  emu_launch(
      [](const void* p) {
        const Args& args = *static_cast<const Args*>(p);
        memra_l2_prefetch(args.p, args.bytes, args.blocks);
      },
      c.grid, c.block, &a);
  const uintptr_t start = (c.base + 15) & ~uintptr_t{15};
  const long long len = std::max<long long>(0, (c.bytes - static_cast<long long>(start - c.base)) & ~15LL);
  const unsigned warps = c.block / 32, issuers = std::min<unsigned>(c.grid, c.blocks) * warps;
  std::sort(pieces.begin(), pieces.end(), [](const Piece& x, const Piece& y) { return x.at < y.at; });
  int bad = 0;
  auto fail = [&](const char* what, const Piece* p) {
    if (bad++ < 5)
      std::printf("  base %#lx bytes %lld grid %u block %u: %s (piece at +%lld, %u bytes, block %u thread %u)\n",
                  static_cast<unsigned long>(c.base), c.bytes, c.grid, c.block, what,
                  p ? static_cast<long long>(p->at - start) : -1LL, p ? p->n : 0u, p ? p->block : 0u,
                  p ? p->thread : 0u);
  };
  uintptr_t next = start;
  for (const Piece& p : pieces) {
    if (p.at != next) fail(p.at < next ? "overlap" : "gap", &p);
    if (p.at % 16 != 0 || p.n % 16 != 0 || p.n == 0 || p.n > (64u << 10)) fail("a piece's size or alignment", &p);
    const long long i = static_cast<long long>(p.at - start) / (64 << 10);
    if (p.thread % 32 != 0 || p.block * warps + p.thread / 32 != static_cast<unsigned>(i % issuers))
      fail("issued by the wrong warp or lane", &p);
    next = p.at + p.n;
  }
  if (static_cast<long long>(next - start) != len) fail("the pieces do not end where the aligned range ends", nullptr);
  std::printf("%-4s base %#8lx bytes %9lld grid %3u block %3u blocks %2d: %zu pieces, %lld bytes\n",
              bad ? "FAIL" : "ok", static_cast<unsigned long>(c.base), c.bytes, c.grid, c.block, c.blocks,
              pieces.size(), len);
  return bad;
}

}  // namespace

int main() {
  emu_l2_prefetch_hook = &Record;
  const Case cases[] = {
      {0x10000, 1 << 20, 40, 256, 16},        // 16 pieces, one a warp of the first two blocks
      {0x10005, 100000, 40, 256, 16},         // unaligned start and end
      {0x10003, 10, 4, 256, 16},              // shorter than its head: nothing
      {0x10000, 0, 8, 256, 16},               // empty
      {0x10000, (3 << 20) + 48, 3, 128, 16},  // fewer blocks than 16: 12 warps issue 49 pieces
      {0x10009, 64 << 10, 1, 32, 16},         // one warp, one piece short of 64 KB
      {0x20000, 50ll << 20, 200, 256, 16},    // 800 pieces over 128 warps
  };
  int fails = 0;
  for (const Case& c : cases) fails += Check(c) != 0;
  std::printf("%zu cases, %d failed\n", sizeof(cases) / sizeof(cases[0]), fails);
  return fails ? 1 : 0;
}
