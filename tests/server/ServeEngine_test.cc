// server/ServeEngine.h on a deterministic backend (tests/server/CountingBackend.h): outputs, the
// queue limit, and the wall-time limit per request (--request-time-limit).
#include "server/ServeEngine.h"

#include <chrono>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/server/CountingBackend.h"

namespace memra::server {
namespace {

using std::chrono::milliseconds;

struct Collected {
  std::vector<int32_t> tokens;
  runtime::FinishReason reason = runtime::FinishReason::kNone;
  absl::Status error;
};

Collected Drain(RequestStream& s) {
  Collected c;
  runtime::TokenEvent e;
  while (s.Next(e)) {
    if (e.token >= 0) c.tokens.push_back(e.token);
    if (e.last) c.reason = e.reason, c.error = e.error;
  }
  return c;
}

runtime::Request Greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  runtime::Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.max_tokens = max_tokens;
  return r;
}

TEST(ServeEngine, GreedyRequestsCountUp) {
  CountingBackend backend(2, 64, 32);
  auto engine = ServeEngine::Start(backend);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto a = (*engine)->Submit(Greedy({3, 4}, 5));
  auto b = (*engine)->Submit(Greedy({30}, 4));
  ASSERT_TRUE(a.ok() && b.ok());
  const Collected ca = Drain(**a), cb = Drain(**b);
  EXPECT_EQ(ca.tokens, (std::vector<int32_t>{5, 6, 7, 8, 9}));
  EXPECT_EQ(cb.tokens, (std::vector<int32_t>{31, 0, 1, 2}));
  EXPECT_EQ(ca.reason, runtime::FinishReason::kLength);
  EXPECT_EQ((*engine)->stats().timed_out, 0);
}

TEST(ServeEngine, RequestPastItsTimeLimitEndsWithWhatItHas) {
  // 2 ms a step and a request for 100,000 tokens: only the 0.2 s limit can end it.
  CountingBackend backend(2, 1 << 20, 32, milliseconds(2));
  ServeEngineOptions o;
  o.max_request_seconds = 0.2;
  auto engine = ServeEngine::Start(backend, o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const auto start = std::chrono::steady_clock::now();
  auto slow = (*engine)->Submit(Greedy({1}, 100000));
  ASSERT_TRUE(slow.ok()) << slow.status();
  const Collected c = Drain(**slow);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Ended with an error naming the limit (the tokens before it were streamed), so a client is not
  // told its reply is a finished one.
  EXPECT_EQ(c.reason, runtime::FinishReason::kError);
  EXPECT_TRUE(absl::IsDeadlineExceeded(c.error)) << c.error;
  EXPECT_NE(c.error.message().find("time limit of 0.2 s"), std::string::npos) << c.error;
  EXPECT_GT(c.tokens.size(), 0u);
  EXPECT_LT(c.tokens.size(), 100000u);
  for (size_t i = 0; i < c.tokens.size(); ++i) EXPECT_EQ(c.tokens[i], static_cast<int32_t>((2 + i) % 32));
  EXPECT_GE(seconds, 0.2);
  EXPECT_LT(seconds, 5.0);
  // The engine keeps serving: a short request after it finishes normally.
  auto quick = (*engine)->Submit(Greedy({7}, 3));
  ASSERT_TRUE(quick.ok());
  const Collected q = Drain(**quick);
  EXPECT_EQ(q.tokens, (std::vector<int32_t>{8, 9, 10}));
  EXPECT_EQ(q.reason, runtime::FinishReason::kLength);
  const ServeStats s = (*engine)->stats();
  EXPECT_EQ(s.timed_out, 1);
  EXPECT_EQ(s.cancelled, 0);
  EXPECT_EQ(s.errors, 0);  // a time limit is not a server failure
  EXPECT_EQ(s.finished, 2);
}

TEST(ServeEngine, QueuedRequestsCountTowardTheirLimitToo) {
  // One slot held by a long request: the one queued behind it times out before it ever runs.
  CountingBackend backend(1, 1 << 20, 32, milliseconds(2));
  ServeEngineOptions o;
  o.max_request_seconds = 0.2;
  auto engine = ServeEngine::Start(backend, o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto first = (*engine)->Submit(Greedy({1}, 100000));
  auto queued = (*engine)->Submit(Greedy({1}, 100000));
  ASSERT_TRUE(first.ok() && queued.ok());
  const Collected a = Drain(**first), b = Drain(**queued);
  EXPECT_EQ(a.reason, runtime::FinishReason::kError);
  EXPECT_EQ(b.reason, runtime::FinishReason::kError);
  EXPECT_TRUE(absl::IsDeadlineExceeded(b.error)) << b.error;
  EXPECT_EQ((*engine)->stats().timed_out, 2);
}

TEST(ServeEngine, RefusesANegativeTimeLimitAndAFullQueue) {
  CountingBackend backend(1, 1 << 20, 32, milliseconds(1));
  ServeEngineOptions bad;
  bad.max_request_seconds = -1;
  auto refused = ServeEngine::Start(backend, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("max_request_seconds"), std::string::npos);

  ServeEngineOptions o;
  o.max_queue = 1;
  auto engine = ServeEngine::Start(backend, o);
  ASSERT_TRUE(engine.ok());
  auto running = (*engine)->Submit(Greedy({1}, 100000));
  ASSERT_TRUE(running.ok());
  auto over = (*engine)->Submit(Greedy({1}, 1));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  (*engine)->Cancel(**running);
  EXPECT_EQ(Drain(**running).reason, runtime::FinishReason::kCancelled);
}

}  // namespace
}  // namespace memra::server
