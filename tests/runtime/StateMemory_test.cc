// The bytes a module's state takes (runtime/StateMemory.h): q8_0 KV caches count their blocks
// (34 bytes for 32 elements), not 4 bytes an element; the per-state check both executors run
// before allocating refuses a type they do not keep, naming the state and the executor.
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "ir/Module.h"
#include "runtime/StateMemory.h"

namespace memra::runtime {
namespace {

using ir::DType;
using ir::StateKind;

TEST(StateMemoryTest, Q8_0KvCachesCountTheirBlocks) {
  ir::Module m;
  m.AddState(StateKind::kPosition, "pos", {DType::kI32, {}});
  m.AddState(StateKind::kKv, "blk.0.k_cache", {DType::kQ8_0, {4096, 2, 64}});
  m.AddState(StateKind::kKv, "blk.0.v_cache", {DType::kF16, {4096, 2, 64}});
  m.AddState(StateKind::kConv, "blk.1.conv", {DType::kF32, {256, 3}});
  auto bytes = StateBytesOf(m);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->kv, uint64_t{4096 * 2 * 64 / 32 * 34 + 4096 * 2 * 64 * 2});
  EXPECT_EQ(bytes->recurrent, uint64_t{256 * 3 * 4});
  EXPECT_EQ(bytes->context, 4096);
  for (const char* executor : {"CPU", "CUDA"}) {
    auto k = StateStorageBytes(*m.state("blk.0.k_cache"), executor);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(*k, 4096 * 2 * 64 / 32 * 34);
    auto v = StateStorageBytes(*m.state("blk.0.v_cache"), executor);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, 4096 * 2 * 64 * 2);
  }
}

TEST(StateMemoryTest, TypesAnExecutorDoesNotKeepAreNamed) {
  ir::Module m;
  m.AddState(StateKind::kConv, "blk.1.conv", {DType::kF16, {256, 3}});       // 16-bit: KV caches only
  m.AddState(StateKind::kKv, "blk.0.k_cache", {DType::kQ4_0, {64, 2, 64}});  // q4_0: no KV cache
  m.AddState(StateKind::kKv, "blk.0.v_cache", {DType::kQ8_0, {64, 2, 48}});  // not whole blocks
  auto conv = StateStorageBytes(*m.state("blk.1.conv"), "CUDA");
  EXPECT_EQ(conv.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(conv.status().message(), "state @blk.1.conv: the CUDA executor keeps"))
      << conv.status();
  EXPECT_TRUE(absl::StrContains(conv.status().message(), "not f16")) << conv.status();
  auto q4 = StateStorageBytes(*m.state("blk.0.k_cache"), "CPU");
  EXPECT_EQ(q4.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(q4.status().message(), "the CPU executor")) << q4.status();
  auto partial = StateStorageBytes(*m.state("blk.0.v_cache"), "CPU");
  EXPECT_EQ(partial.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(partial.status().message(), "not whole q8_0 blocks")) << partial.status();
}

}  // namespace
}  // namespace memra::runtime
