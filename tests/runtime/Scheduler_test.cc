// The Scheduler (runtime/Scheduler.h) over SessionSlots (one CPU Session per slot) on the tiny
// f32 fixture, memra run's pipeline: every request's tokens equal Session::Generate's for the
// same prompt and parameters, alone, among 8 and 32, with staggered arrivals and queued past the
// slot count (greedy and seeded sampling); cancellation frees the slot at once and leaves nothing
// for the next request; stop ids, stop strings, max_tokens, logprobs, the tokenizer's text, the
// refusals and a failing step; the token budget per step and decode rows in every step. A recording backend between the
// scheduler and the slots sees every StepBatch.
#include "runtime/Scheduler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "runtime/Session.h"
#include "runtime/SessionSlots.h"
#include "runtime/StopStrings.h"
#include "tests/TestUtil.h"

namespace memra::runtime {
namespace {

using memra::testing::FileExists;
using memra::testing::TestDataPath;

constexpr int64_t kCtx = 512;

std::string Model() { return TestDataPath("models/qwen35-tiny-f32.gguf"); }

SessionOptions Opts() {
  SessionOptions so;
  so.threads = 1;
  so.backend = Backend::kCpu;
  so.n_ctx = kCtx;
  so.compile = [](ir::Module& m) -> absl::Status {
    passes::PassManagerOptions o;
    o.pipeline = passes::WithBucketLadder(passes::kDefaultPipeline, "16");
    auto pm = passes::PassManager::Create(o);
    if (!pm.ok()) return pm.status();
    return (*pm)->Run(m);
  };
  return so;
}

// The fixture's byte tokens: byte b is id 3 + b (ids 0..2 are BOS/EOS/UNK, no text).
std::string Piece(int32_t id) { return id >= 3 ? std::string(1, static_cast<char>(id - 3)) : std::string(); }

std::vector<int32_t> Prompt(const std::string& text) {
  std::vector<int32_t> ids = {1};
  for (unsigned char c : text) ids.push_back(3 + c);
  return ids;
}

// Prompts of 12..~230 tokens: several span more than one 64-token chunk.
std::vector<std::vector<int32_t>> Prompts() {
  const std::string fox = "The quick brown fox jumps over the lazy dog. ";
  std::vector<std::vector<int32_t>> p;
  p.push_back(Prompt(fox + "12"));
  p.push_back(Prompt("Hello, world"));
  p.push_back(Prompt(fox + fox + fox + "and then?"));
  p.push_back(Prompt("0123456789abcdefghijklmnopqrstuvwxyz"));
  p.push_back(Prompt(fox + fox + fox + fox + fox));
  p.push_back(Prompt("Once upon a time"));
  p.push_back(Prompt(fox + "The end."));
  p.push_back(Prompt(fox + fox + "Why?"));
  return p;
}

kernels::cpu::SamplingParams Sampled() {
  kernels::cpu::SamplingParams s;
  s.temperature = 0.8f;
  s.top_k = 40;
  s.top_p = 0.95f;
  s.min_p = 0.05f;
  s.repeat_penalty = 1.1f;
  s.presence_penalty = 0.1f;
  s.frequency_penalty = 0.1f;
  return s;
}

// Session::Generate's tokens: the one-sequence driver the scheduler must agree with.
std::vector<int32_t> Reference(Session& s, const std::vector<int32_t>& prompt, int64_t n,
                               const kernels::cpu::SamplingParams& sampling = {}, uint64_t seed = 0) {
  EXPECT_TRUE(s.Reset().ok());
  GenerationParams gp;
  gp.n_predict = n;
  gp.sampling = sampling;
  gp.seed = seed;
  gp.stop_at_eog = false;
  auto st = s.Generate(prompt, gp);
  EXPECT_TRUE(st.ok()) << st.status();
  return st.ok() ? st->tokens : std::vector<int32_t>{};
}

// Forwards to the slots and keeps every batch.
class Recording : public BatchBackend {
 public:
  explicit Recording(BatchBackend& inner) : inner_(inner) {}
  int slots() const override { return inner_.slots(); }
  int64_t ctx_per_slot() const override { return inner_.ctx_per_slot(); }
  int64_t n_vocab() const override { return inner_.n_vocab(); }
  absl::Status ResetSlot(int slot) override {
    resets.push_back(slot);
    if (failing_slots.count(slot)) return absl::InternalError("an injected reset failure");
    return inner_.ResetSlot(slot);
  }
  absl::StatusOr<std::vector<EntryOutput>> Execute(const StepBatch& batch) override {
    batches.push_back(batch);
    return inner_.Execute(batch);
  }
  StepRules step_rules() const override { return rules; }
  std::vector<StepBatch> batches;
  std::vector<int> resets;
  StepRules rules;              // what the scheduler is told (the slots have none of their own)
  std::set<int> failing_slots;  // their resets fail

 private:
  BatchBackend& inner_;
};

struct Output {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenEvent> events;
  bool done = false;
  FinishReason reason = FinishReason::kNone;
};

// Collects every request's events by id.
struct Sink {
  std::map<RequestId, Output> out;
  TokenSink sink() {
    return [this](const TokenEvent& e) {
      Output& o = out[e.id];
      EXPECT_FALSE(o.done) << "event after the last one for request " << e.id;
      if (e.token >= 0) o.tokens.push_back(e.token);
      o.text += e.text;
      o.events.push_back(e);
      if (e.last) {
        o.done = true;
        o.reason = e.reason;
      }
    };
  }
};

Request Greedy(const std::vector<int32_t>& prompt, int64_t n) {
  Request r;
  r.prompt = prompt;
  r.max_tokens = n;
  return r;
}

SchedulerOptions SchedOpts(int64_t step_tokens) {
  SchedulerOptions o;
  o.step_tokens = step_tokens;
  o.detokenizer = PieceDetokenizer(Piece);
  return o;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FileExists(Model())) GTEST_SKIP() << "fixture not found: " << Model();
    auto s = Session::Open(Model(), Opts());
    ASSERT_TRUE(s.ok()) << s.status();
    ref_ = std::move(*s);
  }
  std::unique_ptr<SessionSlots> Slots(int n) {
    auto b = SessionSlots::Open(Model(), n, Opts());
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? std::move(*b) : nullptr;
  }
  std::unique_ptr<Session> ref_;
};

constexpr int64_t kGen = 20;

// A greedy request's tokens: Session::Generate's, alone, among 8 at once, and with staggered
// arrivals, under a 72-token budget (prompts of up to 230 tokens go in several 64-token chunks
// that share steps with other requests' decode rows).
TEST_F(SchedulerTest, GreedyIsBatchInvariant) {
  const auto prompts = Prompts();
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : prompts) want.push_back(Reference(*ref_, p, kGen));
  auto slots = Slots(8);
  ASSERT_NE(slots, nullptr);

  {  // alone: one request at a time on a 1-slot view of the same backend kind
    auto one = Slots(1);
    ASSERT_NE(one, nullptr);
    auto sched = Scheduler::Create(*one, SchedOpts(72));
    ASSERT_TRUE(sched.ok()) << sched.status();
    for (size_t i = 0; i < prompts.size(); ++i) {
      Sink sink;
      auto id = (*sched)->Submit(Greedy(prompts[i], kGen), sink.sink());
      ASSERT_TRUE(id.ok()) << id.status();
      ASSERT_TRUE((*sched)->RunToCompletion().ok());
      EXPECT_EQ(sink.out[*id].tokens, want[i]) << "alone, prompt " << i;
      EXPECT_EQ(sink.out[*id].reason, FinishReason::kLength);
    }
  }
  {  // 8 at once
    Recording rec(*slots);
    auto sched = Scheduler::Create(rec, SchedOpts(72));
    ASSERT_TRUE(sched.ok()) << sched.status();
    Sink sink;
    std::vector<RequestId> ids;
    for (const auto& p : prompts) ids.push_back(*(*sched)->Submit(Greedy(p, kGen), sink.sink()));
    ASSERT_TRUE((*sched)->RunToCompletion().ok());
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(sink.out[ids[i]].tokens, want[i]) << "among 8, prompt " << i;
    // The mix really happened: steps with several decode rows and steps mixing decode rows with
    // prompt chunks.
    int most_decodes = 0;
    bool mixed = false;
    for (const auto& b : rec.batches) {
      int d = 0, p = 0;
      for (const auto& e : b.entries) (e.kind == EntryKind::kDecode ? d : p)++;
      most_decodes = std::max(most_decodes, d);
      mixed = mixed || (d > 0 && p > 0);
    }
    EXPECT_GE(most_decodes, 4);
    EXPECT_TRUE(mixed);
  }
  {  // staggered: 3 now, 3 after two steps, 2 after three more
    auto sched = Scheduler::Create(*slots, SchedOpts(72));
    ASSERT_TRUE(sched.ok()) << sched.status();
    Sink sink;
    std::vector<RequestId> ids;
    auto submit = [&](size_t from, size_t to) {
      for (size_t i = from; i < to; ++i) ids.push_back(*(*sched)->Submit(Greedy(prompts[i], kGen), sink.sink()));
    };
    submit(0, 3);
    for (int i = 0; i < 2; ++i) ASSERT_TRUE((*sched)->Step().ok());
    submit(3, 6);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*sched)->Step().ok());
    submit(6, 8);
    ASSERT_TRUE((*sched)->RunToCompletion().ok());
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(sink.out[ids[i]].tokens, want[i]) << "staggered, prompt " << i;
  }
}

// A backend's StepRules (the exact decode class's): decode steps and prompt steps apart, at most 3
// decode entries a step, every decoder in turn; the tokens are still Session::Generate's.
TEST_F(SchedulerTest, StepRulesSeparateDecodeFromPrompts) {
  const auto prompts = Prompts();
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : prompts) want.push_back(Reference(*ref_, p, kGen));
  auto slots = Slots(8);
  ASSERT_NE(slots, nullptr);
  Recording rec(*slots);
  rec.rules = {true, 3};
  auto sched = Scheduler::Create(rec, SchedOpts(72));
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;
  std::vector<RequestId> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back(*(*sched)->Submit(Greedy(prompts[i], kGen), sink.sink()));
    if (i % 3 == 2) {
      ASSERT_TRUE((*sched)->Step().ok());
    }
  }
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(sink.out[ids[i]].tokens, want[i]) << "prompt " << i;
  int decode_steps = 0, prompt_steps = 0, full = 0;
  bool alternated = false;
  for (size_t k = 0; k < rec.batches.size(); ++k) {
    int d = 0, p = 0;
    for (const auto& e : rec.batches[k].entries) (e.kind == EntryKind::kDecode ? d : p)++;
    EXPECT_FALSE(d > 0 && p > 0) << "step " << k << " mixes " << d << " decode entries with " << p << " prompt chunks";
    EXPECT_LE(d, 3) << "step " << k;
    decode_steps += d > 0;
    prompt_steps += p > 0;
    full += d == 3;
    if (k > 0 && d > 0) {
      int prev = 0;
      for (const auto& e : rec.batches[k - 1].entries) prev += e.kind != EntryKind::kDecode;
      alternated = alternated || prev > 0;
    }
  }
  EXPECT_GT(decode_steps, 2 * kGen);  // 8 decoders, 3 a step
  EXPECT_GT(prompt_steps, 3);
  EXPECT_GT(full, kGen);
  EXPECT_TRUE(alternated) << "a decode step should follow a prompt step while both wait";
}

// Past the step's decode rows the decoders take turns by how long each has waited, also while
// requests finish and new ones join (24 requests of 2-12 tokens through 8 slots, 3 decode rows a
// step): once skipped, a decoder has only the others still ahead of it, so it waits at most
// (8 - 1) / 3 = 2 decode steps in a row. (A turn kept by position skipped one request up to 7
// times in a row.)
TEST_F(SchedulerTest, DecodersPastTheStepRowsTakeFairTurns) {
  const auto prompts = Prompts();
  auto slots = Slots(8);
  ASSERT_NE(slots, nullptr);
  Recording rec(*slots);
  rec.rules = {true, 3};
  auto sched = Scheduler::Create(rec, SchedOpts(72));
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;
  std::vector<RequestId> ids;
  for (int i = 0; i < 24; ++i)
    ids.push_back(*(*sched)->Submit(Greedy(prompts[i % prompts.size()], 2 + (i * 5) % 11), sink.sink()));
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  for (int i = 0; i < 24; ++i) EXPECT_EQ(sink.out[ids[i]].tokens.size(), 2u + (i * 5) % 11) << "request " << i;
  // Per request: the decode steps (counted among decode steps only) from its last prompt chunk to
  // its last decode entry, and the longest run of them that left it out.
  std::map<int64_t, int> decoding_since, last_taken, longest_wait;
  int decode_step = 0;
  for (const auto& batch : rec.batches) {
    bool decodes = false;
    for (const auto& e : batch.entries) decodes |= e.kind == EntryKind::kDecode;
    if (decodes) ++decode_step;
    for (const auto& e : batch.entries) {
      if (e.kind == EntryKind::kLastPromptChunk) decoding_since[e.request] = decode_step;
      if (e.kind != EntryKind::kDecode) continue;
      const int before = last_taken.count(e.request) ? last_taken[e.request] : decoding_since[e.request];
      longest_wait[e.request] = std::max(longest_wait[e.request], decode_step - before - 1);
      last_taken[e.request] = decode_step;
    }
  }
  int worst = 0;
  for (const auto& [id, w] : longest_wait) worst = std::max(worst, w);
  EXPECT_LE(worst, 2) << "a decoder waited " << worst << " decode steps in a row";
  EXPECT_EQ(longest_wait.size(), 24u);
}

// Seeded sampling (top-k, top-p, min-p, temperature, all three penalties): the tokens of
// Session::Generate with the same seed, alone and among 7 other requests (greedy and sampled
// with other seeds), so each request's RNG and history are its own.
TEST_F(SchedulerTest, SeededSamplingIsBatchInvariant) {
  const auto prompts = Prompts();
  std::vector<std::vector<int32_t>> want;
  for (size_t i = 0; i < prompts.size(); ++i)
    want.push_back(i % 2 == 0 ? Reference(*ref_, prompts[i], kGen, Sampled(), 1000 + i)
                              : Reference(*ref_, prompts[i], kGen));
  // Different seeds give different tokens (else the check below would prove little).
  EXPECT_NE(Reference(*ref_, prompts[0], kGen, Sampled(), 1000), Reference(*ref_, prompts[0], kGen, Sampled(), 7));
  auto slots = Slots(8);
  ASSERT_NE(slots, nullptr);
  auto sched = Scheduler::Create(*slots, SchedOpts(96));
  ASSERT_TRUE(sched.ok()) << sched.status();
  auto request = [&](size_t i) {
    Request r = Greedy(prompts[i], kGen);
    if (i % 2 == 0) {
      r.sampling = Sampled();
      r.seed = 1000 + i;
    }
    return r;
  };
  {  // alone
    Sink sink;
    auto id = (*sched)->Submit(request(0), sink.sink());
    ASSERT_TRUE((*sched)->RunToCompletion().ok());
    EXPECT_EQ(sink.out[*id].tokens, want[0]);
  }
  Sink sink;
  std::vector<RequestId> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back(*(*sched)->Submit(request(i), sink.sink()));
    ASSERT_TRUE((*sched)->Step().ok());  // each arrives one step after the previous
  }
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(sink.out[ids[i]].tokens, want[i]) << "prompt " << i;
}

// 8 requests on 3 slots: all complete with their solo tokens, none dropped, admitted in
// submission order, at most 3 running at once, every slot reset when its request ends.
TEST_F(SchedulerTest, QueuesPastTheSlotCountFifo) {
  const auto prompts = Prompts();
  auto slots = Slots(3);
  ASSERT_NE(slots, nullptr);
  Recording rec(*slots);
  auto sched = Scheduler::Create(rec, SchedOpts(512));
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;
  std::vector<RequestId> ids;
  for (const auto& p : prompts) ids.push_back(*(*sched)->Submit(Greedy(p, 8), sink.sink()));
  EXPECT_EQ((*sched)->stats().queued, 8);
  ASSERT_TRUE((*sched)->Step().ok());
  EXPECT_EQ((*sched)->stats().queued, 5);
  EXPECT_EQ((*sched)->stats().running, 3);
  EXPECT_EQ((*sched)->stats().free_slots, 0);
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  EXPECT_TRUE((*sched)->idle());
  EXPECT_EQ((*sched)->stats().free_slots, 3);

  std::vector<RequestId> admitted;  // order of each request's first row
  for (const auto& b : rec.batches) {
    std::set<RequestId> in_step;
    for (const auto& e : b.entries) {
      in_step.insert(e.request);
      if (std::find(admitted.begin(), admitted.end(), e.request) == admitted.end()) admitted.push_back(e.request);
    }
    EXPECT_LE(in_step.size(), 3u);
  }
  EXPECT_EQ(admitted, ids);
  for (size_t i = 0; i < ids.size(); ++i) {
    const Output& o = sink.out[ids[i]];
    EXPECT_TRUE(o.done) << "request " << ids[i];
    EXPECT_EQ(o.reason, FinishReason::kLength);
    EXPECT_EQ(o.tokens, Reference(*ref_, prompts[i], 8)) << "prompt " << i;
    EXPECT_EQ(o.events.back().usage.prompt_tokens, static_cast<int64_t>(prompts[i].size()));
    EXPECT_EQ(o.events.back().usage.completion_tokens, 8);
  }
  EXPECT_EQ(rec.resets.size(), 8u);
}

// logit_bias is added to the logits before the pick: -100 on the greedy token moves the pick, +100
// on a token forces it at every step; ids outside the vocabulary are refused at Submit.
TEST_F(SchedulerTest, LogitBiasMovesThePick) {
  const auto prompts = Prompts();
  const std::vector<int32_t> plain = Reference(*ref_, prompts[0], 4);
  auto slots = Slots(2);
  ASSERT_NE(slots, nullptr);
  auto sched = Scheduler::Create(*slots, SchedOpts(512));
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;
  Request ban = Greedy(prompts[0], 1);
  ban.logit_bias = {{plain[0], -100.0f}};
  Request force = Greedy(prompts[0], 4);
  force.logit_bias = {{7, 100.0f}};
  const RequestId a = *(*sched)->Submit(ban, sink.sink());
  const RequestId b = *(*sched)->Submit(force, sink.sink());
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  ASSERT_EQ(sink.out[a].tokens.size(), 1u);
  EXPECT_NE(sink.out[a].tokens[0], plain[0]);
  EXPECT_EQ(sink.out[b].tokens, (std::vector<int32_t>{7, 7, 7, 7}));
  Request bad = Greedy(prompts[0], 1);
  bad.logit_bias = {{1 << 30, 1.0f}};
  EXPECT_EQ((*sched)->Submit(bad, sink.sink()).status().code(), absl::StatusCode::kInvalidArgument);
}

// A slot whose reset fails is never reused: the requests behind it run on the other slot and give
// their solo tokens, Step returns the failure once (a server logs each step's error), and stats
// count the lost slot. When the last slot is lost too, the queued requests end with an error
// naming the first failure (nothing could ever run them: a server loop would spin on them), and
// Submit refuses new ones.
TEST_F(SchedulerTest, LostSlotsAreNeverReusedAndEndTheQueueWhenAllAreLost) {
  const auto prompts = Prompts();
  auto slots = Slots(2);
  ASSERT_NE(slots, nullptr);
  Recording rec(*slots);
  rec.failing_slots = {0};
  auto sched = Scheduler::Create(rec, SchedOpts(512));
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(*(*sched)->Submit(Greedy(prompts[i], 4), sink.sink()));
  int errors = 0;
  std::string first;
  while (!(*sched)->idle()) {
    absl::Status st = (*sched)->Step();
    if (!st.ok()) {
      ++errors;
      first = std::string(st.message());
    }
  }
  EXPECT_EQ(errors, 1);
  EXPECT_NE(first.find("resetting slot 0"), std::string::npos) << first;
  EXPECT_EQ((*sched)->stats().lost_slots, 1);
  EXPECT_EQ((*sched)->stats().free_slots, 1);
  for (int i = 0; i < 4; ++i) {
    const Output& o = sink.out[ids[i]];
    EXPECT_TRUE(o.done) << "request " << ids[i];
    EXPECT_EQ(o.reason, FinishReason::kLength) << "request " << ids[i];
    EXPECT_EQ(o.tokens, Reference(*ref_, prompts[i], 4)) << "prompt " << i;
  }
  // Slot 0 ran the first request only: every later batch row is on slot 1's requests.
  for (const auto& b : rec.batches)
    for (const auto& e : b.entries)
      if (e.request != ids[0]) {
        EXPECT_EQ(e.slot, 1) << "request " << e.request;
      }

  // Slot 1 fails next: its request still ends with its tokens, the two queued behind it end with
  // an Unavailable error naming the first failure, and nothing more is accepted.
  rec.failing_slots = {0, 1};
  Sink more;
  std::vector<RequestId> late;
  for (int i = 0; i < 3; ++i) late.push_back(*(*sched)->Submit(Greedy(prompts[i], 3), more.sink()));
  int steps = 0;
  while (!(*sched)->idle() && steps < 100) {
    (void)(*sched)->Step();
    ++steps;
  }
  EXPECT_TRUE((*sched)->idle());
  EXPECT_EQ((*sched)->stats().lost_slots, 2);
  EXPECT_EQ(more.out[late[0]].reason, FinishReason::kLength);
  EXPECT_EQ(more.out[late[0]].tokens, Reference(*ref_, prompts[0], 3));
  for (int i = 1; i < 3; ++i) {
    const Output& o = more.out[late[i]];
    EXPECT_TRUE(o.done);
    EXPECT_EQ(o.reason, FinishReason::kError);
    EXPECT_EQ(o.events.back().error.code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(o.events.back().error.message().find("every KV slot (2) was lost"), std::string::npos)
        << o.events.back().error;
    EXPECT_NE(o.events.back().error.message().find("resetting slot 0"), std::string::npos) << o.events.back().error;
  }
  auto refused = (*sched)->Submit(Greedy(prompts[0], 3), more.sink());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
}

// Cancel mid-generation frees the one slot at once (reset before anything else runs there) and
// the queued request that takes it gives its solo tokens; so does a request cancelled from its
// own sink (the deferred path) and a queued one that never ran.
TEST_F(SchedulerTest, CancelFreesTheSlot) {
  const auto prompts = Prompts();
  auto slots = Slots(1);
  ASSERT_NE(slots, nullptr);
  Recording rec(*slots);
  auto sched = Scheduler::Create(rec, SchedOpts(512));
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;
  const RequestId a = *(*sched)->Submit(Greedy(prompts[2], 40), sink.sink());
  const RequestId b = *(*sched)->Submit(Greedy(prompts[1], kGen), sink.sink());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE((*sched)->Step().ok());
  EXPECT_EQ(sink.out[a].tokens.size(), 6u);
  ASSERT_TRUE((*sched)->Cancel(a).ok());
  EXPECT_TRUE(sink.out[a].done);
  EXPECT_EQ(sink.out[a].reason, FinishReason::kCancelled);
  EXPECT_EQ(sink.out[a].events.back().token, -1);
  EXPECT_EQ(rec.resets, std::vector<int>{0});  // reset at once, before the next step
  EXPECT_EQ((*sched)->stats().free_slots, 1);
  EXPECT_EQ((*sched)->Cancel(a).code(), absl::StatusCode::kNotFound);

  // c cancels itself from its sink after 3 tokens; d is queued and cancelled before it runs.
  RequestId c = 0;
  Sink csink;
  TokenSink cancel_after_3 = [&](const TokenEvent& e) {
    csink.sink()(e);
    if (!e.last && csink.out[e.id].tokens.size() == 3) {
      EXPECT_TRUE((*sched)->Cancel(e.id).ok());
    }
  };
  c = *(*sched)->Submit(Greedy(prompts[0], kGen), cancel_after_3);
  const RequestId d = *(*sched)->Submit(Greedy(prompts[3], kGen), sink.sink());
  const RequestId after = *(*sched)->Submit(Greedy(prompts[5], kGen), sink.sink());
  ASSERT_TRUE((*sched)->Cancel(d).ok());
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  EXPECT_EQ(sink.out[b].tokens, Reference(*ref_, prompts[1], kGen));
  EXPECT_EQ(csink.out[c].tokens.size(), 3u);
  EXPECT_EQ(csink.out[c].reason, FinishReason::kCancelled);
  EXPECT_TRUE(sink.out[d].done);
  EXPECT_TRUE(sink.out[d].tokens.empty());
  EXPECT_EQ(sink.out[d].reason, FinishReason::kCancelled);
  EXPECT_EQ(sink.out[after].tokens, Reference(*ref_, prompts[5], kGen));
  for (const auto& batch : rec.batches)
    for (const auto& en : batch.entries) EXPECT_NE(en.request, d) << "a cancelled queued request ran";
}

// Stop token ids, stop strings (text cut before the match, held back across pieces), max_tokens.
TEST_F(SchedulerTest, StopsAndLength) {
  const auto prompt = Prompts()[0];
  const std::vector<int32_t> ref = Reference(*ref_, prompt, kGen);
  ASSERT_EQ(ref.size(), static_cast<size_t>(kGen));
  std::string ref_text;
  for (int32_t t : ref) ref_text += Piece(t);
  auto slots = Slots(2);
  ASSERT_NE(slots, nullptr);
  auto sched = Scheduler::Create(*slots, SchedOpts(512));
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;

  // Stop id: the 6th token's first occurrence ends the request there, its text not shown.
  Request r = Greedy(prompt, kGen);
  const size_t j = std::find(ref.begin(), ref.end(), ref[5]) - ref.begin();
  r.stop_ids = {ref[5]};
  const RequestId by_id = *(*sched)->Submit(r, sink.sink());

  // Stop string: two pieces starting at the 8th token's text; matched across token boundaries.
  size_t off = 0;
  for (int i = 0; i < 7; ++i) off += Piece(ref[i]).size();
  const std::string stop = ref_text.substr(off, 2);
  ASSERT_EQ(stop.size(), 2u);
  const size_t at = ref_text.find(stop);
  size_t n_tokens = 0, len = 0;  // tokens until the text first contains the stop string
  while (len < at + stop.size()) len += Piece(ref[n_tokens++]).size();
  Request s = Greedy(prompt, kGen);
  s.stop_strings = {"never appears in this output \x01", stop};
  const RequestId by_string = *(*sched)->Submit(s, sink.sink());
  ASSERT_TRUE((*sched)->RunToCompletion().ok());

  const Output& oi = sink.out[by_id];
  EXPECT_EQ(oi.reason, FinishReason::kStop);
  EXPECT_EQ(oi.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + j + 1));
  std::string before_id;
  for (size_t i = 0; i < j; ++i) before_id += Piece(ref[i]);
  EXPECT_EQ(oi.text, before_id);
  EXPECT_EQ(oi.events.back().text, "");

  const Output& os = sink.out[by_string];
  EXPECT_EQ(os.reason, FinishReason::kStop);
  EXPECT_EQ(os.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + n_tokens));
  EXPECT_EQ(os.text, ref_text.substr(0, at));

  // max_tokens: exactly that many, reason length, the whole text.
  Request m = Greedy(prompt, 7);
  const RequestId by_len = *(*sched)->Submit(m, sink.sink());
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  EXPECT_EQ(sink.out[by_len].reason, FinishReason::kLength);
  EXPECT_EQ(sink.out[by_len].tokens, std::vector<int32_t>(ref.begin(), ref.begin() + 7));
  std::string text7;
  for (int i = 0; i < 7; ++i) text7 += Piece(ref[i]);
  EXPECT_EQ(sink.out[by_len].text, text7);
  EXPECT_EQ(sink.out[by_len].events.size(), 7u);
}

// Logprobs: log_softmax of the raw logits (the first token's checked against Session::Prefill's
// logits); the chosen greedy token is the top one.
TEST_F(SchedulerTest, Logprobs) {
  const auto prompt = Prompts()[1];
  ASSERT_TRUE(ref_->Reset().ok());
  auto logits = ref_->Prefill(prompt);
  ASSERT_TRUE(logits.ok()) << logits.status();
  double mx = -INFINITY, sum = 0;
  for (float x : *logits) mx = std::max<double>(mx, x);
  for (float x : *logits) sum += std::exp(x - mx);
  const int32_t first = kernels::cpu::Argmax(logits->data(), ref_->n_vocab());
  const double want_first = (*logits)[first] - (mx + std::log(sum));

  auto slots = Slots(1);
  ASSERT_NE(slots, nullptr);
  auto sched = Scheduler::Create(*slots, SchedOpts(512));
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;
  Request r = Greedy(prompt, 5);
  r.logprobs = 3;
  const RequestId id = *(*sched)->Submit(r, sink.sink());
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  const Output& o = sink.out[id];
  ASSERT_EQ(o.events.size(), 5u);
  EXPECT_EQ(o.tokens[0], first);
  EXPECT_NEAR(o.events[0].logprob, want_first, 1e-5);
  for (const auto& e : o.events) {
    ASSERT_EQ(e.top.size(), 3u);
    EXPECT_EQ(e.top[0].token, e.token);
    EXPECT_EQ(e.top[0].logprob, e.logprob);
    EXPECT_LE(e.logprob, 0.0f);
    EXPECT_GE(e.top[0].logprob, e.top[1].logprob);
    EXPECT_GE(e.top[1].logprob, e.top[2].logprob);
  }
}

// Refusals at Submit, with the numbers; a prompt of ctx - 1 tokens is accepted and clamped to one
// generated token.
TEST_F(SchedulerTest, RefusesWhatCannotRun) {
  auto slots = Slots(1);
  ASSERT_NE(slots, nullptr);
  auto sched = Scheduler::Create(*slots, SchedOpts(512));
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;
  std::vector<int32_t> long_prompt(kCtx, 50);
  auto too_long = (*sched)->Submit(Greedy(long_prompt, 4), sink.sink());
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(absl::StrContains(too_long.status().message(), "the prompt has 512 tokens")) << too_long.status();
  EXPECT_TRUE(absl::StrContains(too_long.status().message(), "per-slot context is 512 tokens")) << too_long.status();

  EXPECT_EQ((*sched)->Submit(Greedy({}, 4), sink.sink()).status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_id = (*sched)->Submit(Greedy({1, 5, 9999}, 4), sink.sink());
  EXPECT_TRUE(absl::StrContains(bad_id.status().message(), "token id 9999 at prompt position 2")) << bad_id.status();
  EXPECT_EQ((*sched)->Submit(Greedy({1, 5}, 0), sink.sink()).status().code(), absl::StatusCode::kInvalidArgument);
  Request bad_sampling = Greedy({1, 5}, 4);
  bad_sampling.sampling.repeat_penalty = 0;
  EXPECT_EQ((*sched)->Submit(bad_sampling, sink.sink()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(sink.out.empty());
  EXPECT_TRUE((*sched)->idle());

  {  // stop strings need a detokenizer
    auto plain = Scheduler::Create(*slots, {});
    ASSERT_TRUE(plain.ok());
    Request s = Greedy({1, 5}, 4);
    s.stop_strings = {"x"};
    EXPECT_EQ((*plain)->Submit(s, nullptr).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  // The budget must hold a full house of decode rows and one aligned chunk.
  EXPECT_FALSE(Scheduler::Create(*slots, SchedOpts(32)).ok());

  long_prompt.resize(kCtx - 1);
  const RequestId fits = *(*sched)->Submit(Greedy(long_prompt, 100), sink.sink());
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  EXPECT_EQ(sink.out[fits].tokens.size(), 1u);
  EXPECT_EQ(sink.out[fits].reason, FinishReason::kLength);
}

// The smallest budget (MinStepTokens: slots - 1 decode rows + one aligned chunk) keeps a long
// prompt moving while the other slots decode (with a smaller one it waited until a decode ended),
// and a prompt that fits whole in what the chunks before it leave goes in the same step even when
// a prompt between them gets nothing (it used to stop the chunk loop).
TEST_F(SchedulerTest, PromptsProgressBesideAFullHouseOfDecodes) {
  auto slots = Slots(5);
  ASSERT_NE(slots, nullptr);
  EXPECT_FALSE(Scheduler::Create(*slots, SchedOpts(MinStepTokens(5, 64) - 1)).ok());
  Recording rec(*slots);
  auto sched = Scheduler::Create(rec, SchedOpts(MinStepTokens(5, 64)));  // 68
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;
  std::vector<int32_t> shortp = {1, 87, 107, 104}, longp(150), onep = {1};
  for (size_t i = 0; i < longp.size(); ++i) longp[i] = static_cast<int32_t>(3 + (i * 7) % 256);
  std::vector<RequestId> decoders;
  for (int i = 0; i < 2; ++i) decoders.push_back(*(*sched)->Submit(Greedy(shortp, 40), sink.sink()));
  ASSERT_TRUE((*sched)->Step().ok());  // the two short prompts; from now on they decode every step
  // Step 1: 66 rows beside the 2 decodes: a takes 64, b (150 left) gets nothing, c's one token fits.
  const RequestId a = *(*sched)->Submit(Greedy(longp, 2), sink.sink());
  const RequestId b = *(*sched)->Submit(Greedy(longp, 2), sink.sink());
  const RequestId c = *(*sched)->Submit(Greedy(onep, 2), sink.sink());
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  for (RequestId id : {decoders[0], decoders[1], a, b, c}) EXPECT_TRUE(sink.out[id].done) << id;
  auto first_prompt_step = [&](RequestId id) {
    for (size_t k = 0; k < rec.batches.size(); ++k)
      for (const auto& e : rec.batches[k].entries)
        if (e.request == id && e.kind != EntryKind::kDecode) return k;
    return rec.batches.size();
  };
  EXPECT_EQ(first_prompt_step(a), 1u) << "the long prompt waited beside the decodes";
  EXPECT_EQ(first_prompt_step(c), 1u) << "the one-token prompt waited behind one that got nothing";
  EXPECT_GT(first_prompt_step(b), 1u);
  EXPECT_EQ(sink.out[decoders[0]].tokens.size(), 40u);
  EXPECT_EQ(sink.out[b].tokens, sink.out[a].tokens);  // same prompt, same greedy tokens
}

// The token budget: no step has more rows than step_tokens; prompt chunks that do not end their
// prompt are multiples of 64 starting on the grid; every running request decodes in every step
// from its first token to its last (decode rows never starve behind prompts).
TEST_F(SchedulerTest, TokenBudgetAndNoDecodeStarvation) {
  const auto prompts = Prompts();
  auto slots = Slots(8);
  ASSERT_NE(slots, nullptr);
  Recording rec(*slots);
  constexpr int64_t kBudget = 72;  // 8 decode rows leave 64: exactly one aligned chunk
  auto sched = Scheduler::Create(rec, SchedOpts(kBudget));
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;
  std::vector<RequestId> ids;
  for (int round = 0; round < 2; ++round)
    for (const auto& p : prompts) ids.push_back(*(*sched)->Submit(Greedy(p, 12), sink.sink()));
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  for (RequestId id : ids) EXPECT_EQ(sink.out[id].tokens.size(), 12u) << "request " << id;

  std::map<RequestId, std::vector<size_t>> decode_steps;
  std::map<RequestId, size_t> last_chunk_step;
  int64_t most_rows = 0;
  int cut_chunks = 0;  // prompt chunks the budget cut short of their prompt's end
  for (size_t k = 0; k < rec.batches.size(); ++k) {
    const StepBatch& b = rec.batches[k];
    EXPECT_LE(b.rows(), kBudget) << "step " << k;
    most_rows = std::max(most_rows, b.rows());
    bool seen_prompt = false;
    for (const auto& e : b.entries) {
      if (e.kind == EntryKind::kDecode) {
        EXPECT_FALSE(seen_prompt) << "decode entries come first";
        decode_steps[e.request].push_back(k);
      } else {
        seen_prompt = true;
        EXPECT_EQ(e.first_pos % 64, 0) << "step " << k;
        if (e.kind == EntryKind::kPromptChunk) {
          EXPECT_EQ(e.tokens.size() % 64, 0u) << "step " << k;
          ++cut_chunks;
        }
        if (e.kind == EntryKind::kLastPromptChunk) last_chunk_step[e.request] = k;
      }
    }
  }
  // The budget bound: long prompts went in several chunks beside decode rows, steps near full.
  EXPECT_GE(cut_chunks, 10);
  EXPECT_GT(most_rows, 64);
  for (RequestId id : ids) {
    // 12 tokens: the first from the last prompt chunk, 11 from decode rows in the 11 steps after.
    const auto& steps = decode_steps[id];
    ASSERT_EQ(steps.size(), 11u) << "request " << id;
    for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], last_chunk_step[id] + 1 + i) << "request " << id;
  }
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(sink.out[ids[i]].tokens, Reference(*ref_, prompts[i % prompts.size()], 12)) << "request " << ids[i];
}

// 32 requests at once on 32 slots (issue 15's 1 vs 8 vs 32): each gives its solo tokens.
TEST_F(SchedulerTest, ThirtyTwoConcurrentGreedy) {
  const auto base = Prompts();
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 32; ++i) {
    prompts.push_back(base[i % base.size()]);
    prompts.back().push_back(3 + 'a' + i);  // 32 distinct prompts
  }
  auto slots = Slots(32);
  ASSERT_NE(slots, nullptr);
  auto sched = Scheduler::Create(*slots, SchedOpts(160));
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;
  std::vector<RequestId> ids;
  for (const auto& p : prompts) ids.push_back(*(*sched)->Submit(Greedy(p, 10), sink.sink()));
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(sink.out[ids[i]].tokens, Reference(*ref_, prompts[i], 10)) << "prompt " << i;
}

// The model's tokenizer as the detokenizer: the streamed text is Session::Generate's (its
// per-token text and the flushed tail), and a stop string cuts it.
TEST_F(SchedulerTest, TokenizerText) {
  ASSERT_NE(ref_->tokenizer(), nullptr) << ref_->tokenizer_status();
  const auto prompt = Prompts()[3];
  ASSERT_TRUE(ref_->Reset().ok());
  GenerationParams gp;
  gp.n_predict = kGen;
  gp.stop_at_eog = false;
  std::string want;
  auto st = ref_->Generate(prompt, gp, [&](int32_t, absl::string_view text) {
    want += std::string(text);
    return true;
  });
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_FALSE(want.empty());
  auto slots = Slots(1);
  ASSERT_NE(slots, nullptr);
  SchedulerOptions o = SchedOpts(512);
  o.detokenizer = TokenizerDetokenizer(*ref_->tokenizer());
  auto sched = Scheduler::Create(*slots, o);
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;
  const RequestId id = *(*sched)->Submit(Greedy(prompt, kGen), sink.sink());
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  EXPECT_EQ(sink.out[id].tokens, st->tokens);
  EXPECT_EQ(sink.out[id].text, want);
}

// A failing step ends the requests of its batch with reason error and the step's message; the
// queued request after them runs normally on the reset slots.
TEST_F(SchedulerTest, StepErrorEndsItsRequests) {
  class FailOnce : public Recording {
   public:
    using Recording::Recording;
    absl::StatusOr<std::vector<EntryOutput>> Execute(const StepBatch& batch) override {
      if (++calls == 3) return absl::UnavailableError("injected");
      return Recording::Execute(batch);
    }
    int calls = 0;
  };
  const auto prompts = Prompts();
  auto slots = Slots(2);
  ASSERT_NE(slots, nullptr);
  FailOnce fail(*slots);
  auto sched = Scheduler::Create(fail, SchedOpts(512));
  ASSERT_TRUE(sched.ok()) << sched.status();
  Sink sink;
  const RequestId a = *(*sched)->Submit(Greedy(prompts[0], kGen), sink.sink());
  const RequestId b = *(*sched)->Submit(Greedy(prompts[1], kGen), sink.sink());
  const RequestId c = *(*sched)->Submit(Greedy(prompts[5], kGen), sink.sink());
  ASSERT_TRUE((*sched)->Step().ok());
  ASSERT_TRUE((*sched)->Step().ok());
  const absl::Status err = (*sched)->Step();
  EXPECT_EQ(err.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(err.message(), "step 3: injected");
  for (RequestId id : {a, b}) {
    EXPECT_EQ(sink.out[id].reason, FinishReason::kError) << "request " << id;
    EXPECT_EQ(sink.out[id].tokens.size(), 2u);
    EXPECT_EQ(sink.out[id].events.back().error, err);
  }
  EXPECT_EQ((*sched)->stats().free_slots, 2);
  ASSERT_TRUE((*sched)->RunToCompletion().ok());
  EXPECT_EQ(sink.out[c].tokens, Reference(*ref_, prompts[5], kGen));
}

TEST(StopStringFilter, HoldsBackPossiblePrefixes) {
  StopStringFilter f({"abc", "xyz"});
  auto r = f.Push("12a");
  EXPECT_EQ(r.emit, "12");
  EXPECT_FALSE(r.stopped);
  r = f.Push("b");
  EXPECT_EQ(r.emit, "");
  r = f.Push("d");
  EXPECT_EQ(r.emit, "abd");
  r = f.Push("x");
  EXPECT_EQ(r.emit, "");
  EXPECT_EQ(f.Flush(), "x");
  r = f.Push("qqab");
  EXPECT_EQ(r.emit, "qq");
  r = f.Push("cde");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "");
  StopStringFilter g({"lo w"});
  r = g.Push("hello world");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "hel");
}

}  // namespace
}  // namespace memra::runtime
