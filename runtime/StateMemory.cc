#include "runtime/StateMemory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "frontends/LowerOptions.h"
#include "ir/DType.h"

namespace memra::runtime {
namespace {

constexpr uint64_t kLimit = uint64_t{1} << 62;

std::string Bytes(uint64_t b) {
  if (b >= (uint64_t{1} << 30)) return absl::StrFormat("%.1f GiB", b / 1073741824.0);
  return absl::StrFormat("%.1f MiB", b / 1048576.0);
}

}  // namespace

absl::StatusOr<StateBytes> StateBytesOf(const ir::Module& module) {
  StateBytes out;
  for (const auto& sp : module.states()) {
    const ir::StateVar* s = sp.get();
    if (!s->shape().IsStatic())
      return absl::InvalidArgumentError(absl::StrCat("state @", s->name(), " has a symbolic shape"));
    uint64_t n = 1;
    for (const ir::Dim& d : s->shape().dims()) {
      const int64_t v = d.value();
      if (v < 0 || (v > 0 && n > kLimit / static_cast<uint64_t>(v)))
        return absl::ResourceExhaustedError(
            absl::StrCat("state @", s->name(), " needs more than 2^62 elements: lower --ctx-size"));
      n *= static_cast<uint64_t>(v);
    }
    const uint64_t elem = ir::StorageBytes(s->dtype(), 1).value_or(4);
    if (n > kLimit / elem)
      return absl::ResourceExhaustedError(
          absl::StrCat("state @", s->name(), " needs more than 2^62 bytes: lower --ctx-size"));
    // A quantized state (a q8_0 KV cache) takes its blocks' bytes, fewer than 4 an element.
    const uint64_t bytes =
        ir::IsQuantized(s->dtype())
            ? static_cast<uint64_t>(ir::StorageBytes(s->dtype(), static_cast<int64_t>(n)).value_or(n * 4))
            : n * elem;
    switch (s->state_kind()) {
      case ir::StateKind::kKv:
        out.kv += bytes;
        // [C, Hkv, D], or a paged pool [NB, BS, Hkv, D] of NB * BS positions (all slots together).
        // A sliding-window ring holds only its window: it does not say the context.
        if (!s->attrs().Has("ring"))
          out.context = s->rank() == 4 ? s->shape()[0].value() * s->shape()[1].value() : s->shape()[0].value();
        break;
      case ir::StateKind::kConv:
      case ir::StateKind::kDelta:
        out.recurrent += bytes;
        break;
      default:
        out.other += bytes;
    }
    if (out.total() > kLimit)
      return absl::ResourceExhaustedError("the state needs more than 2^62 bytes: lower --ctx-size");
  }
  return out;
}

std::string DescribeStateBytes(const StateBytes& bytes) {
  return absl::StrCat("KV cache ", Bytes(bytes.kv), " + recurrent state ", Bytes(bytes.recurrent));
}

absl::Status CheckStateFits(const StateBytes& need, uint64_t available, absl::string_view where) {
  if (need.total() <= available) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "a context of ", need.context, " tokens needs ", Bytes(need.kv), " of KV cache + ", Bytes(need.recurrent),
      " of recurrent state, more than the ", Bytes(available), " of ", where, " available: lower --ctx-size"));
}

namespace {

uint64_t MemAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view v = line;
    if (!absl::ConsumePrefix(&v, "MemAvailable:")) continue;
    v = absl::StripAsciiWhitespace(v);
    absl::ConsumeSuffix(&v, "kB");
    v = absl::StripAsciiWhitespace(v);
    uint64_t kb = 0;
    if (absl::SimpleAtoi(v, &kb)) return kb * 1024;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : UINT64_MAX;
}

// What an address-space limit (ulimit -v) leaves: the limit less the current virtual size.
uint64_t AddressSpaceLeft() {
  rlimit lim{};
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
  std::ifstream in("/proc/self/statm");
  uint64_t vm_pages = 0;
  if (!(in >> vm_pages)) return lim.rlim_cur;
  const uint64_t used = vm_pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return lim.rlim_cur > used ? lim.rlim_cur - used : 0;
}

}  // namespace

absl::StatusOr<int64_t> StateStorageBytes(const ir::StateVar& s, absl::string_view executor) {
  const ir::DType dt = s.dtype();
  const bool kv = s.state_kind() == ir::StateKind::kKv && frontends::IsKvCacheType(dt);
  if (dt != ir::DType::kF32 && dt != ir::DType::kI32 && dt != ir::DType::kI64 && !kv)
    return absl::UnimplementedError(absl::StrCat("state @", s.name(), ": the ", executor,
                                                 " executor keeps f32, i32 and i64 state (and f16 / bf16 / q8_0 KV "
                                                 "caches), not ",
                                                 ir::DTypeName(dt)));
  const int64_t n = s.shape().NumElements().value_or(0);
  const std::optional<int64_t> bytes = ir::StorageBytes(dt, n);
  // A quantized cache is read and written a head's row at a time: each row whole blocks.
  const int64_t row = s.rank() > 0 ? s.shape().dims().back().value() : 1;
  if (!bytes || row % ir::InfoOf(dt).block_elems != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("state @", s.name(), ": rows of ", row, " elements are not whole ", ir::DTypeName(dt), " blocks"));
  return *bytes;
}

uint64_t AvailableHostMemory() { return std::min(MemAvailable(), AddressSpaceLeft()); }

}  // namespace memra::runtime
