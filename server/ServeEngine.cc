#include "server/ServeEngine.h"

#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "llvm/Support/raw_ostream.h"

namespace memra::server {

bool RequestStream::Next(runtime::TokenEvent& e) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return !events_.empty() || finished_; });
  if (events_.empty()) return false;
  e = std::move(events_.front());
  events_.pop_front();
  return true;
}

RequestStream::Wait RequestStream::NextWithin(runtime::TokenEvent& e, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> l(mu_);
  if (!cv_.wait_for(l, wait, [&] { return !events_.empty() || finished_; })) return Wait::kTimeout;
  if (events_.empty()) return Wait::kEnd;
  e = std::move(events_.front());
  events_.pop_front();
  return Wait::kEvent;
}

void RequestStream::Push(const runtime::TokenEvent& e) {
  {
    std::lock_guard<std::mutex> l(mu_);
    events_.push_back(e);
    if (e.last) finished_ = true;
  }
  cv_.notify_one();
}

ServeEngine::ServeEngine(runtime::BatchBackend& backend, ServeEngineOptions options)
    : backend_(backend), options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<ServeEngine>> ServeEngine::Start(runtime::BatchBackend& backend,
                                                                ServeEngineOptions options) {
  if (!(options.max_request_seconds >= 0))
    return absl::InvalidArgumentError(
        absl::StrCat("max_request_seconds must be >= 0 (got ", options.max_request_seconds, ")"));
  if (options.max_queue < 1)
    return absl::InvalidArgumentError(absl::StrCat("max_queue must be >= 1 (got ", options.max_queue, ")"));
  std::unique_ptr<ServeEngine> e(new ServeEngine(backend, std::move(options)));
  auto sched = runtime::Scheduler::Create(backend, e->options_.scheduler);
  if (!sched.ok()) return sched.status();
  e->scheduler_ = std::move(*sched);
  e->stats_.slots = backend.slots();
  e->thread_ = std::thread([p = e.get()] { p->Loop(); });
  return e;
}

ServeEngine::~ServeEngine() { Shutdown(); }

void ServeEngine::Shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ServeEngine::Run(Command& c) {
  if (c.cancel) {
    (void)scheduler_->Cancel(c.id);  // NotFound once it finished
    return;
  }
  auto stream = c.stream;
  const int64_t prompt = static_cast<int64_t>(c.request.prompt.size());
  auto id = scheduler_->Submit(std::move(c.request), [this, stream](const runtime::TokenEvent& e) {
    if (e.last) {
      live_.erase(e.id);
      deadlines_.erase(e.id);
      std::lock_guard<std::mutex> l(mu_);
      --in_flight_;
      ++stats_.finished;
      stats_.generated_tokens += e.usage.completion_tokens;
      // A time limit (counted in timed_out) is not a server failure; the shutdown's ending is a
      // cancel.
      const bool limit = absl::IsDeadlineExceeded(e.error), stopping = absl::IsUnavailable(e.error);
      if (e.reason == runtime::FinishReason::kError && !limit && !stopping) ++stats_.errors;
      if (e.reason == runtime::FinishReason::kCancelled || stopping) ++stats_.cancelled;
    }
    stream->Push(e);
  });
  if (!id.ok()) {
    std::lock_guard<std::mutex> l(mu_);
    --in_flight_;
    c.accepted.set_value(id.status());
    return;
  }
  stream->id_ = *id;
  live_.insert(*id);
  if (options_.max_request_seconds > 0)
    deadlines_[*id] =
        std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                               std::chrono::duration<double>(options_.max_request_seconds));
  {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.requests;
    stats_.prompt_tokens += prompt;
  }
  c.accepted.set_value(absl::OkStatus());
}

void ServeEngine::EndOverdue() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<runtime::RequestId> overdue;
  for (const auto& [id, deadline] : deadlines_)
    if (deadline <= now) overdue.push_back(id);
  for (runtime::RequestId id : overdue) {
    deadlines_.erase(id);
    // Counted before the cancel, whose last event a reader may act on at once.
    {
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.timed_out;
    }
    // Ended with an error that says why (its client then gets an error, not a reply that looks
    // like a max_tokens stop).
    const absl::Status why = absl::DeadlineExceededError(absl::StrCat(
        "the request ran past the server's time limit of ", options_.max_request_seconds, " s (--request-time-limit)"));
    if (absl::IsNotFound(scheduler_->Cancel(id, why))) {  // it had just finished
      std::lock_guard<std::mutex> l(mu_);
      --stats_.timed_out;
    }
  }
}

void ServeEngine::Loop() {
  while (true) {
    std::deque<std::unique_ptr<Command>> commands;
    bool stop = false;
    {
      std::unique_lock<std::mutex> l(mu_);
      work_.wait(l, [&] { return stop_ || !inbox_.empty() || busy_; });
      commands.swap(inbox_);
      stop = stop_;
    }
    for (auto& c : commands) {
      if (stop && !c->cancel) {
        std::lock_guard<std::mutex> l(mu_);
        --in_flight_;
        c->accepted.set_value(absl::UnavailableError("the server is shutting down"));
        continue;
      }
      Run(*c);
    }
    if (stop) {
      // Whatever still runs ends with an error saying the server stops (its last event), so no
      // reader waits forever and none takes the cut reply for a finished one.
      const std::set<runtime::RequestId> live = live_;
      for (runtime::RequestId id : live)
        (void)scheduler_->Cancel(id, absl::UnavailableError("the server is stopping: the request was cancelled"));
      std::lock_guard<std::mutex> l(mu_);
      stopped_ = true;
      return;
    }
    EndOverdue();
    if (!scheduler_->idle()) {
      // A failed step already ended its requests with the error; the engine keeps serving.
      if (absl::Status st = scheduler_->Step(); !st.ok()) llvm::errs() << "memra serve: " << st.ToString() << "\n";
    }
    const runtime::SchedulerStats ss = scheduler_->stats();
    const runtime::BackendMemory memory = backend_.memory();
    std::lock_guard<std::mutex> l(mu_);
    stats_.memory = memory;
    busy_ = !scheduler_->idle();
    stats_.steps = ss.steps;
    stats_.scheduler = ss;
    stats_.queued = ss.queued;
    stats_.running = ss.running;
  }
}

absl::StatusOr<std::shared_ptr<RequestStream>> ServeEngine::Submit(runtime::Request request) {
  auto c = std::make_unique<Command>();
  c->request = std::move(request);
  c->stream = std::make_shared<RequestStream>();
  std::shared_ptr<RequestStream> stream = c->stream;
  std::future<absl::Status> accepted = c->accepted.get_future();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return absl::UnavailableError("the server is shutting down");
    if (in_flight_ >= options_.max_queue) {
      ++stats_.refused;
      return absl::ResourceExhaustedError(absl::StrCat("the server holds ", in_flight_, " requests (--max-queue ",
                                                       options_.max_queue, "); retry later"));
    }
    ++in_flight_;
    inbox_.push_back(std::move(c));
  }
  work_.notify_one();
  absl::Status st = accepted.get();
  if (!st.ok()) return st;
  return stream;
}

void ServeEngine::Cancel(const RequestStream& stream) {
  auto c = std::make_unique<Command>();
  c->cancel = true;
  c->id = stream.id();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_) return;
    inbox_.push_back(std::move(c));
  }
  work_.notify_one();
}

ServeStats ServeEngine::stats() {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

}  // namespace memra::server
