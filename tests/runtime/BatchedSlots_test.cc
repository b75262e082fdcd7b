// BatchedSlots (runtime/BatchedSlots.h) on the CPU: one module lowered with slots, every step one
// @step call over all entries. Against SessionSlots (one one-sequence Session per slot, the
// reference the Scheduler tests pin to Session::Generate): the same StepBatch sequence gives the
// same logits row per sampled entry (the CPU kernels are row-wise, so equal to f32 rounding of the
// same operations) and the scheduler gives the same greedy tokens alone, among 8 and staggered;
// on the MoE fixture too. The block pool: blocks come and go with the slots, a full pool and a
// row past the context are refused by name before anything runs, a slot reused after a reset
// starts fresh.
#include "runtime/BatchedSlots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "kernels/cpu/Sampling.h"
#include "runtime/Scheduler.h"
#include "runtime/SessionSlots.h"
#include "tests/TestUtil.h"
#include "tests/TinyPrompts.h"

namespace memra::runtime {
namespace {

using memra::testing::FileExists;
using memra::testing::TestDataPath;

constexpr int64_t kCtx = 512;

std::string Dense() { return TestDataPath("models/qwen35-tiny-f32.gguf"); }
std::string Moe() { return TestDataPath("models/qwen35moe-tiny-q8_0.gguf"); }

SessionOptions OneSeqOpts() {
  SessionOptions so;
  so.threads = 1;
  so.backend = Backend::kCpu;
  so.n_ctx = kCtx;
  return so;
}

BatchedSlotsOptions BatchOpts(int slots) {
  BatchedSlotsOptions o;
  o.slots = slots;
  o.n_ctx = kCtx;
  o.exec.cpu.threads = 1;
  return o;
}

std::vector<std::vector<int32_t>> Prompts() { return memra::testing::EightPrompts(); }

// Runs every batch on both backends and compares the sampled rows: the first (the batched engine)
// as the scheduler asked (its picks made by @step's sampler), the second (one Session per slot)
// always with logits, so a pick is checked against the host's SampleRow on the reference row.
class Tee : public BatchBackend {
 public:
  Tee(BatchBackend& a, BatchBackend& b) : a_(a), b_(b) {}
  int slots() const override { return a_.slots(); }
  int64_t ctx_per_slot() const override { return a_.ctx_per_slot(); }
  int64_t n_vocab() const override { return a_.n_vocab(); }
  int64_t device_sampler_penalties() const override { return a_.device_sampler_penalties(); }
  absl::Status ResetSlot(int slot) override {
    absl::Status s = b_.ResetSlot(slot);
    if (!s.ok()) return s;
    return a_.ResetSlot(slot);
  }
  absl::StatusOr<std::vector<EntryOutput>> Execute(const StepBatch& batch) override {
    StepBatch with_logits = batch;
    for (StepEntry& e : with_logits.entries) e.device_pick = false;
    auto rb = b_.Execute(with_logits);
    if (!rb.ok()) return rb.status();
    // Every other step the engine returns logits too, so both of its paths are compared.
    auto ra = a_.Execute(++calls_ % 2 == 0 ? with_logits : batch);
    if (!ra.ok()) return ra.status();
    EXPECT_EQ(ra->size(), rb->size());
    for (size_t i = 0; i < std::min(ra->size(), rb->size()); ++i) {
      if ((*ra)[i].token >= 0) {  // the engine's pick
        const auto& ref = (*rb)[i].logits;
        const auto& rs = batch.entries[i].sampling;
        EXPECT_EQ((*ra)[i].token, kernels::cpu::SampleRow(ref.data(), static_cast<int64_t>(ref.size()), rs.params,
                                                          rs.penalty_ids.data(), rs.penalty_counts.data(),
                                                          static_cast<int64_t>(rs.penalty_ids.size())))
            << "entry " << i;
        ++picks_compared;
        continue;
      }
      const auto& x = (*ra)[i].logits;
      const auto& y = (*rb)[i].logits;
      EXPECT_EQ(x.size(), y.size()) << "entry " << i;
      if (x.size() != y.size()) continue;
      double mx = 0, worst = 0;
      for (size_t j = 0; j < x.size(); ++j) {
        mx = std::max(mx, std::fabs(static_cast<double>(y[j])));
        worst = std::max(worst, std::fabs(static_cast<double>(x[j]) - y[j]));
      }
      max_rel = std::max(max_rel, worst / std::max(mx, 1e-30));
      ++rows_compared;
    }
    return ra;
  }
  double max_rel = 0;
  int64_t rows_compared = 0, picks_compared = 0;

 private:
  int64_t calls_ = 0;
  BatchBackend& a_;
  BatchBackend& b_;
};

struct Collected {
  std::map<RequestId, std::vector<int32_t>> tokens;
  TokenSink sink() {
    return [this](const TokenEvent& e) {
      if (e.token >= 0) tokens[e.id].push_back(e.token);
    };
  }
};

Request Greedy(const std::vector<int32_t>& prompt, int64_t n) {
  Request r;
  r.prompt = prompt;
  r.max_tokens = n;
  return r;
}

// A mix for the sampler: prompt i samples with the whole chain (its own seed) when i is even,
// with penalties alone when i % 4 == 1, and asks for logprobs (picked on the host) when i % 4 == 3.
Request Mixed(const std::vector<int32_t>& prompt, int64_t n, size_t i) {
  Request r = Greedy(prompt, n);
  r.seed = 1000 + i;
  if (i % 2 == 0) {
    r.sampling.temperature = 0.9f;
    r.sampling.top_k = 40;
    r.sampling.top_p = 0.9f;
    r.sampling.min_p = 0.02f;
    r.sampling.repeat_penalty = 1.1f;
  } else if (i % 4 == 1) {
    r.sampling.repeat_penalty = 1.3f;
    r.sampling.presence_penalty = 0.5f;
  } else {
    r.sampling.temperature = 1.2f;
    r.logprobs = 0;
  }
  return r;
}

SchedulerOptions SchedOpts(int64_t step_tokens) {
  SchedulerOptions o;
  o.step_tokens = step_tokens;
  return o;
}

// Greedy tokens of every prompt through `backend`: `at_once` requests submitted together (the
// rest staggered two steps apart when `staggered`).
std::vector<std::vector<int32_t>> RunAll(BatchBackend& backend, const std::vector<std::vector<int32_t>>& prompts,
                                         int64_t n, bool staggered, int64_t step_tokens = 72, bool mixed = false) {
  auto sched = Scheduler::Create(backend, SchedOpts(step_tokens));
  EXPECT_TRUE(sched.ok()) << sched.status();
  if (!sched.ok()) return {};
  Collected c;
  std::vector<RequestId> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto id = (*sched)->Submit(mixed ? Mixed(prompts[i], n, i) : Greedy(prompts[i], n), c.sink());
    EXPECT_TRUE(id.ok()) << id.status();
    ids.push_back(id.ok() ? *id : -1);
    if (staggered)
      for (int k = 0; k < 2; ++k) EXPECT_TRUE((*sched)->Step().ok());
  }
  EXPECT_TRUE((*sched)->RunToCompletion().ok());
  std::vector<std::vector<int32_t>> out;
  for (RequestId id : ids) out.push_back(c.tokens[id]);
  return out;
}

void CheckAgainstSessionSlots(const std::string& model, double rel_bound) {
  const auto prompts = Prompts();
  auto batched = BatchedSlots::Open(model, BatchOpts(8));
  ASSERT_TRUE(batched.ok()) << batched.status();
  auto slots = SessionSlots::Open(model, 8, OneSeqOpts());
  ASSERT_TRUE(slots.ok()) << slots.status();
  // 8 at once and staggered, greedy and then a mix of sampled requests (the engine's sampler picks
  // them, the reference's host SampleRow on its logits).
  for (bool mixed : {false, true})
    for (bool staggered : {false, true}) {
      Tee tee(**batched, **slots);
      const auto got = RunAll(tee, prompts, 16, staggered, 72, mixed);
      EXPECT_GT(tee.rows_compared, 50);
      EXPECT_GT(tee.picks_compared, mixed ? 20 : 50);
      std::printf("  %s%s: %ld logits rows (max relative difference %.3e), %ld device picks\n",
                  staggered ? "staggered" : "8 at once", mixed ? ", sampled mix" : "", long(tee.rows_compared),
                  tee.max_rel, long(tee.picks_compared));
      EXPECT_LE(tee.max_rel, rel_bound) << "logits of @step vs one Session per slot";
      auto want = RunAll(**slots, prompts, 16, staggered, 72, mixed);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].size(), 16u);
        EXPECT_EQ(got[i], want[i]) << "prompt " << i << (staggered ? " (staggered)" : " (8 at once)")
                                   << (mixed ? " sampled mix" : "");
      }
    }
  // One at a time = the same tokens as among 8 (batch invariance within the batched engine), greedy
  // and sampled.
  for (bool mixed : {false, true}) {
    std::vector<std::vector<int32_t>> alone;
    for (size_t i = 0; i < prompts.size(); ++i) {
      // Prompt i alone, with the request it is among the others (Mixed picks by its index).
      auto sched = Scheduler::Create(**batched, SchedOpts(72));
      ASSERT_TRUE(sched.ok());
      Collected c;
      auto id = (*sched)->Submit(mixed ? Mixed(prompts[i], 16, i) : Greedy(prompts[i], 16), c.sink());
      ASSERT_TRUE(id.ok()) << id.status();
      ASSERT_TRUE((*sched)->RunToCompletion().ok());
      alone.push_back(c.tokens[*id]);
    }
    EXPECT_EQ(alone, RunAll(**batched, prompts, 16, false, 72, mixed)) << (mixed ? "sampled mix" : "greedy");
  }
}

TEST(BatchedSlotsTest, DenseMatchesOneSessionPerSlot) {
  if (!FileExists(Dense())) GTEST_SKIP() << "fixture not found: " << Dense();
  CheckAgainstSessionSlots(Dense(), 0.0);  // row-wise CPU kernels: bit-identical
}

TEST(BatchedSlotsTest, MoeMatchesOneSessionPerSlot) {
  if (!FileExists(Moe())) GTEST_SKIP() << "fixture not found: " << Moe();
  CheckAgainstSessionSlots(Moe(), 0.0);
}

// Gemma 4 (sliding windows over paged pools, KV-shared layers reading another layer's pool, MoE
// and per-layer inputs): each fixture's batched engine gives one session per slot's tokens.
TEST(BatchedSlotsTest, Gemma4MatchesOneSessionPerSlot) {
  for (const char* name : {"gemma4-tiny-f32", "gemma4moe-tiny-q8_0", "gemma4e-tiny-q8_0"}) {
    const std::string path = memra::testing::SharedPath(std::string("fixtures/models/") + name + ".gguf");
    if (!FileExists(path)) GTEST_SKIP() << "fixture not found: " << path;
    SCOPED_TRACE(name);
    CheckAgainstSessionSlots(path, 0.0);
  }
}

// 32 requests at once on 32 slots (each prompt four times, with a different last byte) give the
// tokens each gives alone on the same engine: one step mixes up to 32 decode rows with prompt
// chunks of others, and the CPU's row-wise kernels keep every row's numbers.
TEST(BatchedSlotsTest, ThirtyTwoAtOnceMatchAlone) {
  if (!FileExists(Dense())) GTEST_SKIP() << "fixture not found: " << Dense();
  std::vector<std::vector<int32_t>> prompts;
  for (int v = 0; v < 4; ++v)
    for (auto p : Prompts()) {
      p.push_back(3 + 'a' + v);
      prompts.push_back(std::move(p));
    }
  auto engine = BatchedSlots::Open(Dense(), BatchOpts(32));
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) alone.push_back(RunAll(**engine, {p}, 12, false, /*step_tokens=*/128)[0]);
  EXPECT_EQ(RunAll(**engine, prompts, 12, false, /*step_tokens=*/128), alone);
  EXPECT_EQ(RunAll(**engine, prompts, 12, true, /*step_tokens=*/512), alone);
}

StepEntry Entry(int slot, int64_t first_pos, EntryKind kind, std::vector<int32_t> tokens) {
  StepEntry e;
  e.slot = slot;
  e.first_pos = first_pos;
  e.kind = kind;
  e.tokens = std::move(tokens);
  return e;
}

// Blocks come from the pool as sequences grow and return at reset; refusals name the problem and
// change nothing; a reused slot starts fresh (its logits equal a fresh slot's).
TEST(BatchedSlotsTest, BlockPoolAndRefusals) {
  if (!FileExists(Dense())) GTEST_SKIP() << "fixture not found: " << Dense();
  BatchedSlotsOptions o = BatchOpts(2);
  o.kv_blocks = 5;  // 320 positions shared by two slots of 512
  auto b = BatchedSlots::Open(Dense(), o);
  ASSERT_TRUE(b.ok()) << b.status();
  BatchedSlots& bs = **b;
  EXPECT_EQ(bs.kv_blocks(), 5);
  std::vector<int32_t> p130(130, 40), p100(100, 41);
  StepBatch s1;
  s1.entries.push_back(Entry(0, 0, EntryKind::kLastPromptChunk, p130));  // 3 blocks
  auto first = bs.Execute(s1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(bs.free_kv_blocks(), 2);
  // Slot 1 needs 2 blocks for 100 tokens: fits; 200 would not.
  StepBatch big;
  big.entries.push_back(Entry(1, 0, EntryKind::kLastPromptChunk, std::vector<int32_t>(200, 42)));
  auto full = bs.Execute(big);
  ASSERT_FALSE(full.ok());
  EXPECT_TRUE(absl::StrContains(full.status().message(), "KV cache full")) << full.status();
  // Wrong position, bad id, past the context: refused.
  StepBatch wrong;
  wrong.entries.push_back(Entry(0, 7, EntryKind::kDecode, {5}));
  EXPECT_TRUE(absl::StrContains(bs.Execute(wrong).status().message(), "slot holds 130")) << bs.Execute(wrong).status();
  StepBatch bad_id;
  bad_id.entries.push_back(Entry(0, 130, EntryKind::kDecode, {1 << 30}));
  EXPECT_TRUE(absl::StrContains(bs.Execute(bad_id).status().message(), "outside the vocabulary"));
  StepBatch past;
  past.entries.push_back(Entry(0, 130, EntryKind::kPromptChunk, std::vector<int32_t>(400, 5)));
  EXPECT_TRUE(absl::StrContains(bs.Execute(past).status().message(), "exceed the slot's context"));
  // Reset returns the blocks; the slot starts again from position 0 with the same result.
  ASSERT_TRUE(bs.ResetSlot(0).ok());
  EXPECT_EQ(bs.free_kv_blocks(), 5);
  StepBatch again;
  again.entries.push_back(Entry(0, 0, EntryKind::kLastPromptChunk, p130));
  again.entries.push_back(Entry(1, 0, EntryKind::kLastPromptChunk, p100));
  auto second = bs.Execute(again);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)[0].logits, (*first)[0].logits) << "a reused slot must start fresh";
  EXPECT_EQ((*first)[0].logits.size(), static_cast<size_t>(bs.n_vocab()));
  EXPECT_EQ(bs.free_kv_blocks(), 0);
  EXPECT_FALSE(bs.ResetSlot(2).ok());
}

// Reservations (sequences.md §11): a slot is promised its sequence's blocks at admission; other
// slots cannot take them, a reservation the pool cannot cover now waits, one it never could is an
// error, and a reset returns the promise.
TEST(BatchedSlotsTest, ReservationsHoldBlocksForTheirSlot) {
  if (!FileExists(Dense())) GTEST_SKIP() << "fixture not found: " << Dense();
  BatchedSlotsOptions o = BatchOpts(3);
  o.kv_blocks = 5;  // 320 positions for three slots of 512
  auto b = BatchedSlots::Open(Dense(), o);
  ASSERT_TRUE(b.ok()) << b.status();
  BatchedSlots& bs = **b;
  EXPECT_EQ(bs.max_sequence_positions(), 320);
  auto r0 = bs.Reserve(0, 200);  // 4 blocks
  ASSERT_TRUE(r0.ok()) << r0.status();
  EXPECT_TRUE(*r0);
  EXPECT_EQ(bs.unreserved_kv_blocks(), 1);
  auto r1 = bs.Reserve(1, 100);  // 2 blocks: only 1 is not promised
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_FALSE(*r1);
  auto never = bs.Reserve(2, 400);
  ASSERT_FALSE(never.ok());
  EXPECT_TRUE(absl::StrContains(never.status().message(), "holds at most 320")) << never.status();
  // Slot 2 without a reservation cannot take slot 0's promised blocks: 2 blocks, 1 unpromised.
  StepBatch grab;
  grab.entries.push_back(Entry(2, 0, EntryKind::kLastPromptChunk, std::vector<int32_t>(100, 40)));
  auto refused = bs.Execute(grab);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "not reserved by other slots")) << refused.status();
  // Slot 0 grows into its reservation.
  StepBatch mine;
  mine.entries.push_back(Entry(0, 0, EntryKind::kLastPromptChunk, std::vector<int32_t>(200, 41)));
  ASSERT_TRUE(bs.Execute(mine).ok());
  EXPECT_EQ(bs.free_kv_blocks(), 1);
  EXPECT_EQ(bs.unreserved_kv_blocks(), 1);
  ASSERT_TRUE(bs.ResetSlot(0).ok());
  auto r1_again = bs.Reserve(1, 100);
  ASSERT_TRUE(r1_again.ok());
  EXPECT_TRUE(*r1_again);
  EXPECT_EQ(bs.unreserved_kv_blocks(), 3);
}

// The scheduler admits by KV room: with a pool for about two sequences and four slots, requests
// wait in the queue until blocks come back, and every one gives the tokens it gives alone; a
// request longer than the cache can hold is refused at Submit with the numbers.
TEST(BatchedSlotsTest, SchedulerAdmitsByKvRoom) {
  if (!FileExists(Dense())) GTEST_SKIP() << "fixture not found: " << Dense();
  const auto prompts = Prompts();
  auto roomy = BatchedSlots::Open(Dense(), BatchOpts(4));
  ASSERT_TRUE(roomy.ok()) << roomy.status();
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) alone.push_back(RunAll(**roomy, {p}, 16, false)[0]);
  BatchedSlotsOptions o = BatchOpts(4);
  o.kv_blocks = 7;  // 448 positions: prompts of up to 181 tokens + 16 need 1..4 blocks each
  auto tight = BatchedSlots::Open(Dense(), o);
  ASSERT_TRUE(tight.ok()) << tight.status();
  EXPECT_EQ(RunAll(**tight, prompts, 16, false), alone);
  EXPECT_EQ(RunAll(**tight, prompts, 16, true), alone);
  auto sched = Scheduler::Create(**tight, SchedOpts(72));
  ASSERT_TRUE(sched.ok());
  // The pool, not the slots, holds requests back: the two longest prompts (4 + 3 blocks with
  // their 16 tokens) take all 7 blocks, so a third waits while two slots are free.
  for (int i : {4, 2, 0}) ASSERT_TRUE((*sched)->Submit(Greedy(prompts[i], 16), nullptr).ok());
  ASSERT_TRUE((*sched)->Step().ok());
  EXPECT_EQ((*sched)->stats().running, 2);
  EXPECT_EQ((*sched)->stats().queued, 1);
  EXPECT_EQ((*sched)->stats().free_slots, 2);
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  EXPECT_EQ((*sched)->stats().queued, 0);
  auto too_long = (*sched)->Submit(Greedy(std::vector<int32_t>(450, 40), 4), nullptr);
  ASSERT_FALSE(too_long.ok());
  EXPECT_TRUE(absl::StrContains(too_long.status().message(), "as the KV cache can hold")) << too_long.status();
}

TEST(BatchedSlotsTest, RefusesBadOptions) {
  if (!FileExists(Dense())) GTEST_SKIP() << "fixture not found: " << Dense();
  for (int s : {0, -1, 257}) {
    auto b = BatchedSlots::Open(Dense(), BatchOpts(s));
    ASSERT_FALSE(b.ok());
    EXPECT_TRUE(absl::StrContains(b.status().message(), "slots must be in [1, 256]")) << b.status();
  }
}

// The exact decode class (kernels/cuda/DecodeClass.h) on the CPU: the same tokens as the bucket
// class (the CPU's rows are invariant in both), with the steps cut as step_rules() says (decode and
// prompt steps apart, at most 8 decode entries); a batch that breaks the rules is refused.
TEST(BatchedSlotsTest, ExactClassCutsStepsApartWithTheSameTokens) {
  if (!FileExists(Dense())) GTEST_SKIP() << "fixture not found: " << Dense();
  BatchedSlotsOptions o = BatchOpts(12);
  o.decode_class = kernels::cuda::DecodeClass::kExact;
  auto exact = BatchedSlots::Open(Dense(), o);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_TRUE((*exact)->step_rules().separate_decode);
  EXPECT_EQ((*exact)->step_rules().max_decode_rows, kernels::cuda::kExactDecodeRows);
  auto bucket = BatchedSlots::Open(Dense(), BatchOpts(12));
  ASSERT_TRUE(bucket.ok()) << bucket.status();
  EXPECT_FALSE((*bucket)->step_rules().separate_decode);
  std::vector<std::vector<int32_t>> prompts = Prompts();
  for (const auto& p : Prompts()) prompts.push_back(std::vector<int32_t>(p.begin(), p.begin() + p.size() / 2 + 1));
  prompts.resize(12);
  EXPECT_EQ(RunAll(**exact, prompts, 12, /*staggered=*/true, 128), RunAll(**bucket, prompts, 12, true, 128));
  EXPECT_EQ(RunAll(**exact, prompts, 12, /*staggered=*/false, 128), RunAll(**bucket, prompts, 12, false, 128));

  // A decode entry beside a prompt chunk, and 9 decode entries, are refused before anything runs.
  BatchedSlots& bs = **exact;
  StepBatch first;
  for (int slot = 0; slot < 10; ++slot) first.entries.push_back(Entry(slot, 0, EntryKind::kLastPromptChunk, {5, 6}));
  ASSERT_TRUE(bs.Execute(first).ok());
  StepBatch mixed;
  mixed.entries.push_back(Entry(0, 2, EntryKind::kDecode, {7}));
  mixed.entries.push_back(Entry(10, 0, EntryKind::kLastPromptChunk, {5}));
  auto m = bs.Execute(mixed);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::StrContains(m.status().message(), "also holds prompt chunks")) << m.status();
  StepBatch nine;
  for (int slot = 0; slot < 9; ++slot) nine.entries.push_back(Entry(slot, 2, EntryKind::kDecode, {7}));
  auto n = bs.Execute(nine);
  ASSERT_FALSE(n.ok());
  EXPECT_TRUE(absl::StrContains(n.status().message(), "9 decode entries exceeds 8")) << n.status();
  StepBatch eight;
  for (int slot = 0; slot < 8; ++slot) eight.entries.push_back(Entry(slot, 2, EntryKind::kDecode, {7}));
  EXPECT_TRUE(bs.Execute(eight).ok());
}

}  // namespace
}  // namespace memra::runtime
