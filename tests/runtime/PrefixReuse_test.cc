// Prefix reuse (docs/design/prefix-reuse.md, issue 16 item 2): the PrefixCache index on its own
// (longest verified prefix, known branch points from snapshots and remembered prompts, LRU),
// then the Scheduler over BatchedSlots on the CPU with snapshot rows against the same engine
// without any. The CPU's kernels are row-wise and its delta-rule scan sequential, so a request
// resumed from a snapshot must give the very same tokens and logprobs (compared bit for bit) as a
// run from scratch: a second chat turn, requests that share a system prompt (the branch point
// learnt on the second, hit on the third), two sequences running at once on one snapshot's shared
// KV blocks, eviction under a one-row budget, and snapshots giving way to a full KV pool. A
// recording backend counts the prompt rows each request really ran.
#include "runtime/PrefixCache.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/BatchedSlots.h"
#include "runtime/Scheduler.h"
#include "tests/TestUtil.h"
#include "tests/TinyPrompts.h"

namespace memra::runtime {
namespace {

using memra::testing::ByteTokenPrompt;
using memra::testing::FileExists;
using memra::testing::TestDataPath;

std::vector<int32_t> Seq(int32_t first, int n) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = first + i;
  return v;
}

TEST(PrefixCache, LongestVerifiedPrefixKnownBranchesAndLru) {
  PrefixCache c(3, 4);
  const std::vector<int32_t> a = Seq(100, 12);  // 100..111
  EXPECT_EQ(c.Lookup(a, 12).row, -1);
  EXPECT_EQ(c.KnownPrefix(a, 12), 0);
  c.Set(0, a, 4);
  c.Set(1, a, 8);
  EXPECT_EQ(c.used(), 2);
  // The longest snapshot at or before the limit.
  EXPECT_EQ(c.Lookup(a, 12).row, 1);
  EXPECT_EQ(c.Lookup(a, 12).position, 8);
  EXPECT_EQ(c.Lookup(a, 7).position, 4);
  EXPECT_EQ(c.Lookup(a, 3).row, -1);
  EXPECT_EQ(c.Find(a, 8), 1);
  EXPECT_EQ(c.Find(a, 12), -1);
  // A prompt that shares 6 tokens: the snapshot at 4 matches, the one at 8 does not; the branch
  // point known from the cached tokens is 4.
  std::vector<int32_t> b = a;
  b[6] = 7;
  EXPECT_EQ(c.Lookup(b, 12).position, 4);
  EXPECT_EQ(c.KnownPrefix(b, 12), 4);
  // Only the row at 8 passes 8: a prompt equal up to 8 knows 8 without a snapshot there.
  c.Erase(0);
  EXPECT_EQ(c.Lookup(b, 12).row, -1);
  std::vector<int32_t> d = a;
  d[9] = 0;
  EXPECT_EQ(c.KnownPrefix(d, 12), 8);
  EXPECT_EQ(c.KnownPrefix(d, 7), 4);
  // LRU: the least recently set or touched row goes first.
  EXPECT_EQ(c.FreeRow(), 0);
  c.Set(0, Seq(5, 4), 4);
  c.Set(2, Seq(9, 4), 4);
  EXPECT_EQ(c.FreeRow(), -1);
  EXPECT_EQ(c.LeastRecentlyUsed(), 1);
  c.Touch(1);
  EXPECT_EQ(c.LeastRecentlyUsed(), 0);
  // Set replaces a row's contents and its index entries.
  const uint64_t before = c.serial(1);
  c.Set(1, Seq(500, 4), 4);
  EXPECT_NE(c.serial(1), before);
  EXPECT_EQ(c.Lookup(a, 12).row, -1);
  EXPECT_EQ(c.KnownPrefix(a, 12), 0);
  EXPECT_EQ(c.Lookup(Seq(500, 9), 8).row, 1);
}

// Remembered prompts (no state) make branch points known, and are forgotten oldest first.
TEST(PrefixCache, RememberedPromptsAreKnownUntilForgotten) {
  PrefixCache c(1, 4);
  const std::vector<int32_t> a = Seq(100, 10);
  std::vector<int32_t> b = a;
  b[9] = 0;
  EXPECT_EQ(c.KnownPrefix(b, 8), 0);
  c.Remember(a);
  EXPECT_EQ(c.KnownPrefix(b, 8), 8);
  EXPECT_EQ(c.Lookup(b, 8).row, -1);  // known, but no state to resume from
  for (int i = 0; i < PrefixCache::kRememberedPrompts - 1; ++i) c.Remember(Seq(1000 + i, 4));
  EXPECT_EQ(c.KnownPrefix(b, 8), 8);
  c.Remember(Seq(7, 4));  // one more: a is the oldest and goes
  EXPECT_EQ(c.KnownPrefix(b, 8), 0);
}

TEST(PrefixCache, HashHitsAreCheckedOnTheTokens) {
  // Same hash chain cannot be forged cheaply, so check the verification path directly: a row whose
  // tokens differ from the query at one position is never returned, whatever the index says.
  PrefixCache c(1, 2);
  c.Set(0, Seq(1, 4), 4);
  std::vector<int32_t> q = Seq(1, 5);
  EXPECT_EQ(c.Lookup(q, 4).row, 0);
  q[1] = 99;
  EXPECT_EQ(c.Lookup(q, 4).row, -1);
  EXPECT_EQ(c.Find(q, 4), -1);
}

constexpr int64_t kCtx = 512;
std::string Model() { return TestDataPath("models/qwen35-tiny-f32.gguf"); }

// Forwards everything to the engine and records the rows each request ran.
class Recorder : public BatchBackend {
 public:
  explicit Recorder(BatchedSlots& b) : b_(b) {}
  int slots() const override { return b_.slots(); }
  int64_t ctx_per_slot() const override { return b_.ctx_per_slot(); }
  int64_t n_vocab() const override { return b_.n_vocab(); }
  absl::Status ResetSlot(int slot) override { return b_.ResetSlot(slot); }
  absl::StatusOr<bool> Reserve(int slot, int64_t positions) override { return b_.Reserve(slot, positions); }
  int64_t max_sequence_positions() const override { return b_.max_sequence_positions(); }
  int64_t device_sampler_penalties() const override { return b_.device_sampler_penalties(); }
  int snapshot_rows() const override { return b_.snapshot_rows(); }
  int64_t snapshot_grid() const override { return b_.snapshot_grid(); }
  absl::Status SaveSnapshot(int slot, int row) override { return b_.SaveSnapshot(slot, row); }
  absl::StatusOr<int64_t> RestoreSnapshot(int row, int slot) override { return b_.RestoreSnapshot(row, slot); }
  absl::Status DropSnapshot(int row) override { return b_.DropSnapshot(row); }
  absl::StatusOr<std::vector<EntryOutput>> Execute(const StepBatch& batch) override {
    for (const StepEntry& e : batch.entries) {
      if (e.kind != EntryKind::kDecode) prompt_rows[e.request] += static_cast<int64_t>(e.tokens.size());
      if (e.kind == EntryKind::kPromptChunk) chunk_ends[e.request].push_back(e.first_pos + e.tokens.size());
    }
    return b_.Execute(batch);
  }
  std::map<int64_t, int64_t> prompt_rows;
  std::map<int64_t, std::vector<int64_t>> chunk_ends;

 private:
  BatchedSlots& b_;
};

struct Output {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  bool done = false;
};

class PrefixReuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FileExists(Model())) GTEST_SKIP() << "fixture not found: " << Model();
  }
  // The engine with `rows` snapshot rows (0: no reuse) and `kv_blocks` blocks (0: every slot full).
  std::unique_ptr<BatchedSlots> Engine(int slots, int rows, int64_t kv_blocks = 0) {
    BatchedSlotsOptions o;
    o.slots = slots;
    o.n_ctx = kCtx;
    o.kv_blocks = kv_blocks;
    o.exec.cpu.threads = 1;
    o.snapshot_bytes = rows == 0 ? 0 : int64_t{rows} * RowBytes();
    auto b = BatchedSlots::Open(Model(), o);
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) return nullptr;
    EXPECT_EQ((*b)->snapshot_rows(), rows);
    return std::move(*b);
  }
  // The same engine twice: without snapshots (the reference) and with `rows` of them (its
  // scheduler behind a Recorder).
  struct Engines {
    std::unique_ptr<BatchedSlots> plain, cached;
    std::unique_ptr<Recorder> rec;
    std::unique_ptr<Scheduler> s0, s1;
    bool ok() const { return s0 && s1; }
  };
  Engines Both(int slots, int rows, int64_t kv_blocks = 0) {
    Engines e;
    e.plain = Engine(slots, 0, kv_blocks);
    e.cached = Engine(slots, rows, kv_blocks);
    if (!e.plain || !e.cached) return e;
    e.rec = std::make_unique<Recorder>(*e.cached);
    auto s0 = Scheduler::Create(*e.plain, Opts());
    auto s1 = Scheduler::Create(*e.rec, Opts());
    EXPECT_TRUE(s0.ok() && s1.ok());
    if (s0.ok() && s1.ok()) {
      e.s0 = std::move(*s0);
      e.s1 = std::move(*s1);
    }
    return e;
  }
  // One slot's recurrent state (conv rings + delta states) of the tiny model.
  int64_t RowBytes() {
    if (row_bytes_ == 0) {
      BatchedSlotsOptions o;
      o.slots = 1;
      o.n_ctx = kCtx;
      o.exec.cpu.threads = 1;
      auto b = BatchedSlots::Open(Model(), o);
      EXPECT_TRUE(b.ok()) << b.status();
      if (b.ok()) row_bytes_ = static_cast<int64_t>((*b)->memory().recurrent_bytes);
    }
    return row_bytes_;
  }
  static Request Make(const std::vector<int32_t>& prompt, int64_t n) {
    Request r;
    r.prompt = prompt;
    r.max_tokens = n;
    r.logprobs = 0;  // host picks with the logprob: compared bit for bit
    return r;
  }
  static TokenSink Into(Output& o) {
    return [&o](const TokenEvent& e) {
      if (e.token >= 0) {
        o.tokens.push_back(e.token);
        o.logprobs.push_back(e.logprob);
      }
      if (e.last) o.done = true;
    };
  }
  // Runs `requests` one after another (each to completion) and returns their outputs.
  static std::vector<Output> RunInTurn(Scheduler& s, const std::vector<Request>& requests) {
    std::vector<Output> out(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      auto id = s.Submit(requests[i], Into(out[i]));
      EXPECT_TRUE(id.ok()) << id.status();
      absl::Status st = s.RunToCompletion();
      EXPECT_TRUE(st.ok()) << st;
      EXPECT_TRUE(out[i].done);
    }
    return out;
  }
  static SchedulerOptions Opts() {
    SchedulerOptions o;
    o.step_tokens = 128;
    return o;
  }
  static void ExpectSame(const std::vector<Output>& got, const std::vector<Output>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
      EXPECT_EQ(got[i].logprobs, want[i].logprobs) << "request " << i << " (logprobs, bit for bit)";
    }
  }
  int64_t row_bytes_ = 0;
};

const std::string kFox = "The quick brown fox jumps over the lazy dog. ";

// Turn 2 = turn 1's prompt + its reply + a new message: it resumes from the snapshot turn 1 left
// on the grid while decoding, prefills only what follows it, and gives the same tokens.
TEST_F(PrefixReuseTest, SecondTurnResumesAndMatches) {
  Engines e = Both(1, 4);
  ASSERT_TRUE(e.ok());

  const std::vector<int32_t> turn1 = ByteTokenPrompt(kFox + kFox + kFox + "Tell me more.");  // 149 tokens
  ASSERT_EQ(turn1.size(), 149u);
  std::vector<Output> a0 = RunInTurn(*e.s0, {Make(turn1, 60)});
  std::vector<Output> a1 = RunInTurn(*e.s1, {Make(turn1, 60)});
  ExpectSame(a1, a0);
  // Turn 1 shares nothing cached: one chunk per step budget, no stop for a snapshot.
  EXPECT_EQ(e.rec->chunk_ends[1], std::vector<int64_t>({128}));
  EXPECT_EQ(e.s1->stats().prefix_hits, 0);
  EXPECT_EQ(e.s1->stats().prefix_snapshots, 1);  // while decoding, at 192

  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), a0[0].tokens.begin(), a0[0].tokens.end());
  for (int32_t id : ByteTokenPrompt("And then?")) turn2.push_back(id);  // 149 + 60 + 10 = 219
  std::vector<Output> b0 = RunInTurn(*e.s0, {Make(turn2, 24)});
  std::vector<Output> b1 = RunInTurn(*e.s1, {Make(turn2, 24)});
  ExpectSame(b1, b0);
  // Turn 1 ran positions 0..207 (its last token is not run): its newest snapshot is at 192.
  const SchedulerStats st = e.s1->stats();
  EXPECT_EQ(st.prefix_lookups, 2);
  EXPECT_EQ(st.prefix_hits, 1);
  EXPECT_EQ(st.prefix_tokens_reused, 192);
  EXPECT_EQ(e.rec->prompt_rows[2], 219 - 192);
  EXPECT_EQ(st.prefix_errors, 0);

  // cache_prompt = false: no lookup, the whole prompt runs, the same tokens.
  Request off = Make(turn2, 24);
  off.cache_prompt = false;
  std::vector<Output> c1 = RunInTurn(*e.s1, {off});
  ExpectSame(c1, b0);
  EXPECT_EQ(e.rec->prompt_rows[3], 219);
  EXPECT_EQ(e.s1->stats().prefix_lookups, 2);
}

// A chat turn (Request::conversation) stops its prefill at its last grid point for a snapshot
// even with nothing cached, so a next turn whose reply tokens differ from the generated ones (a
// template dropping the reasoning) still resumes at the previous prompt's end.
TEST_F(PrefixReuseTest, ChatTurnSnapshotsItsPromptEnd) {
  Engines e = Both(1, 4);
  ASSERT_TRUE(e.ok());
  Request turn1 = Make(ByteTokenPrompt(kFox + kFox + "Go on."), 4);  // 97 tokens
  turn1.conversation = true;
  ExpectSame(RunInTurn(*e.s1, {turn1}), RunInTurn(*e.s0, {turn1}));
  EXPECT_EQ(e.rec->chunk_ends[1], std::vector<int64_t>({64}));
  std::vector<int32_t> next = turn1.prompt;
  for (int32_t id : ByteTokenPrompt("(a reply rendered differently) And then?")) next.push_back(id);
  Request turn2 = Make(next, 8);
  turn2.conversation = true;
  ExpectSame(RunInTurn(*e.s1, {turn2}), RunInTurn(*e.s0, {turn2}));
  EXPECT_EQ(e.s1->stats().prefix_tokens_reused, 64);
  EXPECT_EQ(e.rec->prompt_rows[2], static_cast<int64_t>(next.size()) - 64);
}

// Three requests share a 156-token system prompt: the first shares nothing cached and runs in one
// piece (its prompt remembered), the second learns the branch point (128) from it and stops there
// for a snapshot, the third resumes from it. Every output equals the engine's without snapshots.
TEST_F(PrefixReuseTest, SharedSystemPromptBranchPoint) {
  Engines e = Both(1, 4);
  ASSERT_TRUE(e.ok());
  const std::string system = kFox + kFox + kFox + "You answer briefly. ";  // 1 + 155 tokens
  std::vector<Request> reqs;
  for (const char* q : {"What is a fox, and why is it so quick, tell me?", "Who is lazy here?", "Count the dogs."})
    reqs.push_back(Make(ByteTokenPrompt(system + q), 8));
  ExpectSame(RunInTurn(*e.s1, reqs), RunInTurn(*e.s0, reqs));
  const SchedulerStats st = e.s1->stats();
  EXPECT_EQ(st.prefix_hits, 1);
  EXPECT_EQ(st.prefix_tokens_reused, 128);
  EXPECT_EQ(e.rec->chunk_ends[2].front(), 128);  // the second request stopped at the branch point
  EXPECT_EQ(e.rec->prompt_rows[3], static_cast<int64_t>(reqs[2].prompt.size()) - 128);
}

// Two requests resumed from one snapshot run side by side: they share its KV blocks (read only)
// and append into their own; both equal their runs from scratch, and so does a third afterwards.
TEST_F(PrefixReuseTest, ConcurrentResumesShareBlocks) {
  Engines e = Both(2, 4);
  ASSERT_TRUE(e.ok());
  const std::vector<int32_t> base = ByteTokenPrompt(kFox + kFox + kFox + kFox);  // 181 tokens
  auto with = [&](const std::string& tail, int64_t n) {
    std::vector<int32_t> p = base;
    for (unsigned char c : tail) p.push_back(3 + c);
    return Make(p, n);
  };
  // Seed the cache: the first leaves a snapshot while decoding (192), the second learns the
  // branch point 128 from the first and leaves snapshots at 128 and 192.
  const std::vector<Request> seed = {with(" Hi.", 16), with(" Hello there.", 16)};
  ExpectSame(RunInTurn(*e.s1, seed), RunInTurn(*e.s0, seed));
  EXPECT_GT(e.cached->memory().snapshot_kv_blocks, 0);
  std::vector<Request> both;
  for (const char* tail : {" One more sentence, please.", " Something else entirely!"}) {
    std::vector<int32_t> p = base;
    for (unsigned char c : std::string(tail)) p.push_back(3 + c);
    both.push_back(Make(p, 30));
  }
  auto run_both = [&](Scheduler& s) {
    std::vector<Output> out(2);
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(s.Submit(both[i], Into(out[i])).ok());
    EXPECT_TRUE(s.RunToCompletion().ok());
    return out;
  };
  ExpectSame(run_both(*e.s1), run_both(*e.s0));
  EXPECT_EQ(e.s1->stats().prefix_hits, 2);
  EXPECT_EQ(e.s1->stats().prefix_tokens_reused, 2 * 128);
  // The shared blocks survived both: the same prompt resumes again (now from its own snapshot at
  // its last grid point) with the same result.
  ExpectSame(RunInTurn(*e.s1, {both[0]}), RunInTurn(*e.s0, {both[0]}));
  EXPECT_EQ(e.s1->stats().prefix_hits, 3);
  EXPECT_EQ(e.s1->stats().prefix_tokens_reused, 2 * 128 + 192);
}

// One snapshot row for three alternating conversations: each save evicts the last one; outputs
// never change.
TEST_F(PrefixReuseTest, EvictionUnderAOneRowBudget) {
  Engines e = Both(1, 1);
  ASSERT_TRUE(e.ok());
  std::vector<Request> reqs;
  const std::vector<std::string> topics = {kFox + kFox + "Alpha. ", "0123456789 " + kFox + kFox,
                                           "Once upon a time, " + kFox + kFox};
  for (const std::string& t : topics) reqs.push_back(Make(ByteTokenPrompt(t), 6));
  // The second round learns each topic's branch point (64) and snapshots it, each save evicting the
  // last; a third request on the last topic saved finds it.
  for (auto t = topics.rbegin(); t != topics.rend(); ++t) reqs.push_back(Make(ByteTokenPrompt(*t + "Again."), 6));
  reqs.push_back(Make(ByteTokenPrompt(topics[0] + "Third."), 6));
  ExpectSame(RunInTurn(*e.s1, reqs), RunInTurn(*e.s0, reqs));
  const SchedulerStats st = e.s1->stats();
  EXPECT_GT(st.prefix_evictions, 0);
  EXPECT_GE(st.prefix_hits, 1);
  EXPECT_EQ(st.prefix_rows, 1);
  EXPECT_LE(st.prefix_rows_used, 1);
  EXPECT_EQ(st.prefix_errors, 0);
}

// A KV pool just big enough for one full sequence: the blocks snapshots hold give way (LRU) when
// a request needs them, and requests still complete with the same tokens.
TEST_F(PrefixReuseTest, SnapshotsGiveWayToAFullKvPool) {
  Engines e = Both(1, 4, 8);
  ASSERT_TRUE(e.ok());
  std::vector<Request> reqs = {Make(ByteTokenPrompt(kFox + kFox + kFox), 100),  // a snapshot at 192
                               Make(ByteTokenPrompt("Different: " + kFox + kFox + kFox + kFox + kFox), 200)};
  ExpectSame(RunInTurn(*e.s1, reqs), RunInTurn(*e.s0, reqs));
  EXPECT_GT(e.s1->stats().prefix_evictions, 0);
  EXPECT_EQ(e.cached->free_kv_blocks() + e.cached->memory().snapshot_kv_blocks, 8);
}

}  // namespace
}  // namespace memra::runtime
