// The scheduler behind the HTTP threads: one engine thread owns runtime::Scheduler (not thread-safe)
// and steps it while any request runs. HTTP threads hand it commands through an inbox it drains
// between steps (a Submit waits for its answer, at most one step; a Cancel does not wait) and read
// their request's token events from a RequestStream. Not HTTP-aware.
//
//   auto engine = ServeEngine::Start(backend, {.max_queue = 256});
//   auto stream = engine->Submit(std::move(request));       // ResourceExhausted: queue full
//   runtime::TokenEvent e;
//   while ((*stream)->Next(e)) { ... if (e.last) break; }
//   engine->Cancel(**stream);                               // a client that went away
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "absl/status/statusor.h"
#include "runtime/BatchBackend.h"
#include "runtime/Scheduler.h"

namespace memra::server {

// One request's events, in order; written by the engine thread, read by one HTTP thread.
class RequestStream {
 public:
  // Blocks until an event arrives; false after the last one was read.
  bool Next(runtime::TokenEvent& e);
  // Next, waiting at most `wait`: kTimeout lets a reader look at its client between events (a
  // request queued or in a long prefill has none for a while).
  enum class Wait { kEvent, kEnd, kTimeout };
  Wait NextWithin(runtime::TokenEvent& e, std::chrono::milliseconds wait);
  runtime::RequestId id() const { return id_; }

 private:
  friend class ServeEngine;
  void Push(const runtime::TokenEvent& e);
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<runtime::TokenEvent> events_;
  bool finished_ = false;  // the last event was pushed
  runtime::RequestId id_ = 0;
};

struct ServeEngineOptions {
  runtime::SchedulerOptions scheduler;
  // Requests queued or running at most; more are refused (HTTP 503) instead of waiting unbounded.
  int max_queue = 256;
  // Wall time a request may take from its submission (queued or running), in seconds; past it the
  // request ends with reason error, a DeadlineExceeded naming the limit (its tokens so far were
  // streamed). 0: no limit.
  double max_request_seconds = 0;
};

struct ServeStats {
  int64_t requests = 0, finished = 0, errors = 0, cancelled = 0, refused = 0;
  int64_t timed_out = 0;  // ended by max_request_seconds (not counted as errors)
  int64_t prompt_tokens = 0, generated_tokens = 0, steps = 0;
  int queued = 0, running = 0, slots = 0;
  runtime::BackendMemory memory;      // after the last step
  runtime::SchedulerStats scheduler;  // after the last step (the prefix cache's counters)
};

class ServeEngine {
 public:
  static absl::StatusOr<std::unique_ptr<ServeEngine>> Start(runtime::BatchBackend& backend,
                                                            ServeEngineOptions options = {});
  ~ServeEngine();  // Shutdown()
  // Refuses new requests, cancels what is queued or runs (every stream gets its last event) and
  // stops the engine thread. Idempotent.
  void Shutdown();

  absl::StatusOr<std::shared_ptr<RequestStream>> Submit(runtime::Request request);
  // Ends the request now (its slot is freed); a no-op once it finished.
  void Cancel(const RequestStream& stream);
  ServeStats stats();

 private:
  struct Command {
    bool cancel = false;
    runtime::Request request;               // submit
    std::shared_ptr<RequestStream> stream;  // submit: where its events go
    std::promise<absl::Status> accepted;    // submit: the scheduler's answer
    runtime::RequestId id = 0;              // cancel
  };
  ServeEngine(runtime::BatchBackend& backend, ServeEngineOptions options);
  void Loop();
  void Run(Command& c);  // on the engine thread
  void EndOverdue();     // on the engine thread: cancels requests past max_request_seconds

  runtime::BatchBackend& backend_;
  ServeEngineOptions options_;
  std::unique_ptr<runtime::Scheduler> scheduler_;  // the engine thread's alone
  std::set<runtime::RequestId> live_;              // submitted, not finished (engine thread)
  // Each live request's deadline (engine thread; only with max_request_seconds).
  std::map<runtime::RequestId, std::chrono::steady_clock::time_point> deadlines_;
  std::mutex mu_;  // guards inbox_, stop_, busy_, stats_
  std::condition_variable work_;
  std::deque<std::unique_ptr<Command>> inbox_;
  bool stop_ = false, stopped_ = false;
  bool busy_ = false;  // the scheduler has requests (set by the engine thread)
  int in_flight_ = 0;  // submitted and not finished, counted at Submit for the queue limit
  ServeStats stats_;
  std::thread thread_;
};

}  // namespace memra::server
