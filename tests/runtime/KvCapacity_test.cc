// The context a module's KV caches allow (runtime/KvCapacity.h): sliding-window rings do not bound
// it, the full-length caches and the lowering's n_ctx do; and the per-call check both executors
// run before anything: context overflow on a full cache, more rows than a ring's window leaves room
// for.
#include <string>

#include "gtest/gtest.h"
#include "ir/Parser.h"
#include "runtime/KvCapacity.h"

namespace memra::runtime {
namespace {

std::unique_ptr<ir::Module> Parse(const std::string& text) {
  auto m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

constexpr char kRingAndFull[] = R"(module attributes {n_ctx = 4096}
state kv @ring_k : f32[23, 2, 8] {ring = 16}
state kv @ring_v : f32[23, 2, 8] {ring = 16}
state kv @full_k : f32[4096, 2, 8]
state kv @full_v : f32[4096, 2, 8]
func @f(%k: f32[T, 2, 8], %p: i32[T]) -> () {
  kv_append(%k, %k, @ring_k, @ring_v, %p) {ring = 16}
  kv_append(%k, %k, @full_k, @full_v, %p)
  return
}
)";

TEST(KvCapacityTest, RingsDoNotBoundTheContext) {
  auto m = Parse(kRingAndFull);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(KvContextCapacity(*m), 4096);
  // Only rings: the lowering's n_ctx still bounds it.
  auto rings = Parse(R"(module attributes {n_ctx = 65536}
state kv @k : f32[23, 2, 8] {ring = 16}
state kv @v : f32[23, 2, 8] {ring = 16}
func @f(%k: f32[T, 2, 8], %p: i32[T]) -> () {
  kv_append(%k, %k, @k, @v, %p) {ring = 16}
  return
}
)");
  ASSERT_NE(rings, nullptr);
  EXPECT_EQ(KvContextCapacity(*rings), 65536);
}

TEST(KvCapacityTest, CallsThatDoNotFitAreRefusedByName) {
  auto m = Parse(kRingAndFull);
  ASSERT_NE(m, nullptr);
  const ir::Function* f = m->function("f");
  ASSERT_NE(f, nullptr);
  const ir::Op* ring = nullptr;
  const ir::Op* full = nullptr;
  for (const ir::Op* op : f->Ops())
    if (op->is(ir::OpKind::kKvAppend)) (op->attrs().Has("ring") ? ring : full) = op;
  ASSERT_TRUE(ring != nullptr && full != nullptr);
  // A ring of 23 rows for a window of 16 takes 8 rows per call, at any position.
  EXPECT_TRUE(CheckKvAppendFits(*ring, 100000, 8).ok());
  absl::Status s = CheckKvAppendFits(*ring, 0, 9);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("@ring_k of 23 rows (window 16) takes at most 8 rows per call"), std::string::npos) << s;
  // A full cache: up to its last row, not past it.
  EXPECT_TRUE(CheckKvAppendFits(*full, 4000, 96).ok());
  s = CheckKvAppendFits(*full, 4000, 97);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("exceed the context length of 4096"), std::string::npos) << s;
}

}  // namespace
}  // namespace memra::runtime
