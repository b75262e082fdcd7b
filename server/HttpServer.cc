#include "server/HttpServer.h"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "llvm/Support/raw_ostream.h"

namespace memra::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpServer::Impl {
  HttpServerOptions options;
  // Set once by Ready(); until then every route but /health answers 503 "loading".
  ApiContext api;
  ServeEngine* engine_ = nullptr;
  std::atomic<bool> ready{false};
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::condition_variable idle;
  int connections = 0;
  // Request bodies of kLargeBody bytes or more being parsed: a parse holds the body several times
  // over (JSON trees, the rendered prompt, its tokens) before the prompt is checked against the
  // context, ~600 MB for an 8 MB chat of 240k messages, so at most kMaxLargeParses run at once
  // (24 at once took 12 GB).
  int large_parses = 0;
  std::condition_variable large_done;
  int refusing = 0;            // threads answering connections over the limit with 503 (at most kMaxRefusing)
  std::set<int> open_sockets;  // connections' descriptors, shut down by Stop()
  std::chrono::steady_clock::time_point last_scrape = std::chrono::steady_clock::now();
  int64_t last_scrape_tokens = 0;  // /metrics' tok/s: the count at the previous scrape
  std::atomic<int64_t> next_id{1};
  // Deadlines of blocking socket calls: Asio's synchronous reads and writes wait in poll() without
  // a timeout (a socket timeout only turns into another wait), so a watchdog thread shuts down the
  // side of a connection whose deadline passed; the blocked call then returns.
  std::mutex wd_mu;
  std::condition_variable wd_cv;
  std::map<int, std::pair<std::chrono::steady_clock::time_point, int>> deadlines;  // fd -> (when, how)
  std::set<int> expired;
  bool wd_stop = false;  // after the last connection ended
  std::thread watchdog;
  const int64_t started =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();

  explicit Impl(HttpServerOptions o) : options(std::move(o)) {}
  ServeEngine& engine() { return *engine_; }

  void Session(tcp::socket socket);
  void Watch();
  // Bounds the next blocking call on fd by idle_timeout_s (how: SHUT_RD for a read, SHUT_RDWR for a
  // write); Disarm says whether the deadline passed (the call was cut short).
  void Arm(int fd, int how);
  bool Disarm(int fd);
  // A stream frame within the deadline (an HTTP chunk, or for HTTP/1.0 the bytes as they are);
  // false when the client is gone or stalled.
  bool WriteChunk(tcp::socket& socket, const std::string& frame, bool chunked);
  // A whole response (an error: logged when it is the server's) within the deadline; false when
  // the client is gone or stalled (a client that never reads its reply holds no thread for longer).
  bool Send(tcp::socket& socket, unsigned version, bool keep_alive, int status, std::string body,
            const char* type = "application/json");
  bool SendError(tcp::socket& socket, unsigned version, bool keep_alive, const absl::Status& st);
  // Handles one request; false: close the connection afterwards.
  bool Handle(tcp::socket& socket, const http::request<http::string_body>& req);
  bool Completion(tcp::socket& socket, const http::request<http::string_body>& req, bool chat);
  std::string Metrics();
};

namespace {

// How often a request's connection is looked at while its request has no event to send.
constexpr std::chrono::milliseconds kClientCheck{200};
// Bodies at least this large are parsed at most kMaxLargeParses at a time (Impl::large_parses).
constexpr int64_t kLargeBody = 1 << 20;
constexpr int kMaxLargeParses = 2;

int64_t Now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Writes a whole response, unbounded in time (Impl::Send bounds it); false when the client is gone.
bool WriteResponse(tcp::socket& socket, unsigned version, bool keep_alive, int status, std::string body,
                   const char* type) {
  http::response<http::string_body> res{static_cast<http::status>(status), version};
  res.set(http::field::server, "memra");
  res.set(http::field::content_type, type);
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  beast::error_code ec;
  http::write(socket, res, ec);
  return !ec;
}

// A server-side failure: clients get a generic message (ErrorJson), the log the whole status.
void LogFailure(const absl::Status& st) {
  const int http = HttpStatusOf(st);
  if (http < 500 || http == 503) return;
  static std::mutex log_mu;
  std::lock_guard<std::mutex> l(log_mu);
  llvm::errs() << "memra serve: a request failed (HTTP " << http << "): " << st.ToString() << "\n";
}

// Whether `authorization` is "Bearer <key>", in time that depends only on the key's length (not on
// how many leading bytes a guess gets right).
bool BearerMatches(absl::string_view authorization, const std::string& key) {
  const std::string expected = absl::StrCat("Bearer ", key);
  unsigned char diff = authorization.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char got = i < authorization.size() ? static_cast<unsigned char>(authorization[i]) : 0;
    diff |= static_cast<unsigned char>(got ^ static_cast<unsigned char>(expected[i]));
  }
  // Keep the compiler from ending the loop at the first difference.
  return *static_cast<volatile unsigned char*>(&diff) == 0;
}

// The client closed its side (or reset the connection) while its request runs. A pipelined next
// request is not a close.
bool PeerClosed(tcp::socket& socket) {
  pollfd p{socket.native_handle(), POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  char c;
  return ::recv(socket.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace

void HttpServer::Impl::Watch() {
  std::unique_lock<std::mutex> l(wd_mu);
  while (!wd_stop) {
    wd_cv.wait_for(l, std::chrono::milliseconds(100));
    const auto now = std::chrono::steady_clock::now();
    for (auto it = deadlines.begin(); it != deadlines.end();) {
      if (it->second.first > now) {
        ++it;
        continue;
      }
      ::shutdown(it->first, it->second.second);
      expired.insert(it->first);
      it = deadlines.erase(it);
    }
  }
}

void HttpServer::Impl::Arm(int fd, int how) {
  std::lock_guard<std::mutex> l(wd_mu);
  expired.erase(fd);
  deadlines[fd] = {std::chrono::steady_clock::now() + std::chrono::seconds(options.idle_timeout_s), how};
}

bool HttpServer::Impl::Disarm(int fd) {
  std::lock_guard<std::mutex> l(wd_mu);
  deadlines.erase(fd);
  return expired.erase(fd) > 0;
}

bool HttpServer::Impl::Send(tcp::socket& socket, unsigned version, bool keep_alive, int status, std::string body,
                            const char* type) {
  Arm(socket.native_handle(), SHUT_RDWR);
  const bool written = WriteResponse(socket, version, keep_alive, status, std::move(body), type);
  return !Disarm(socket.native_handle()) && written;
}

bool HttpServer::Impl::SendError(tcp::socket& socket, unsigned version, bool keep_alive, const absl::Status& st) {
  LogFailure(st);
  return Send(socket, version, keep_alive, HttpStatusOf(st), ErrorJson(st));
}

bool HttpServer::Impl::WriteChunk(tcp::socket& socket, const std::string& frame, bool chunked) {
  beast::error_code ec;
  Arm(socket.native_handle(), SHUT_RDWR);
  if (chunked)
    asio::write(socket, http::make_chunk(asio::buffer(frame)), ec);
  else
    asio::write(socket, asio::buffer(frame), ec);
  return !Disarm(socket.native_handle()) && !ec;
}

void HttpServer::Impl::Session(tcp::socket socket) {
  const int fd = socket.native_handle();
  beast::flat_buffer buffer;
  while (!stopping) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(static_cast<uint64_t>(options.max_body));
    parser.header_limit(64 * 1024);
    // The whole request (headers and body) within idle_timeout_s: a client that trickles bytes or
    // stalls mid-request gets 408, an idle keep-alive connection is closed.
    beast::error_code ec;
    Arm(fd, SHUT_RD);
    http::read(socket, buffer, parser, ec);
    if (Disarm(fd)) {
      if (buffer.size() > 0 || parser.got_some())
        Send(socket, 11, false, 408,
             ErrorJson(absl::DeadlineExceededError(
                           absl::StrCat("the request did not arrive within ", options.idle_timeout_s, " s")),
                       408));
      break;
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset) break;
    if (ec == http::error::body_limit) {
      const absl::Status st =
          absl::InvalidArgumentError(absl::StrCat("the request body is over ", options.max_body, " bytes"));
      Send(socket, 11, false, 413, ErrorJson(st, 413));
      break;
    }
    if (ec) {
      SendError(socket, 11, false, absl::InvalidArgumentError(absl::StrCat("malformed HTTP request: ", ec.message())));
      break;
    }
    if (!Handle(socket, parser.get())) break;
  }
  beast::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
}

bool HttpServer::Impl::Handle(tcp::socket& socket, const http::request<http::string_body>& req) {
  const unsigned v = req.version();
  const bool keep = req.keep_alive();
  std::string path(req.target());
  if (const size_t q = path.find('?'); q != std::string::npos) path.resize(q);
  // With a key, every route but /health needs it (/metrics too: its counters are the server's
  // traffic, and a scrape resets its rate window), as llama-server does.
  if (!options.api_key.empty() && path != "/health") {
    const auto auth = req[http::field::authorization];
    if (!BearerMatches(absl::string_view(auth.data(), auth.size()), options.api_key))
      return SendError(socket, v, keep,
                       absl::UnauthenticatedError("a valid API key is required (Authorization: Bearer KEY)")) &&
             keep;
  }
  const bool get = req.method() == http::verb::get, post = req.method() == http::verb::post;
  if (!ready.load(std::memory_order_acquire)) {
    // llama-server's answer while its model loads: 503, so load balancers and clients wait.
    if (get && path == "/health") return Send(socket, v, keep, 503, R"({"status":"loading"})") && keep;
    return SendError(socket, v, keep, absl::UnavailableError("the model is still loading; retry shortly")) && keep;
  }
  if (get && path == "/health") return Send(socket, v, keep, 200, R"({"status":"ok"})") && keep;
  if (get && path == "/v1/models") return Send(socket, v, keep, 200, ModelsJson(api, started)) && keep;
  if (get && path == "/metrics") return Send(socket, v, keep, 200, Metrics(), "text/plain; version=0.0.4") && keep;
  if (post && path == "/v1/completions") return Completion(socket, req, false);
  if (post && path == "/v1/chat/completions") return Completion(socket, req, true);
  return SendError(socket, v, keep,
                   absl::NotFoundError(absl::StrCat("no route for ", std::string(req.method_string()), " ", path))) &&
         keep;
}

bool HttpServer::Impl::Completion(tcp::socket& socket, const http::request<http::string_body>& req, bool chat) {
  const unsigned v = req.version();
  const bool keep = req.keep_alive();
  const bool large = static_cast<int64_t>(req.body().size()) >= kLargeBody;
  if (large) {
    std::unique_lock<std::mutex> l(mu);
    large_done.wait(l, [&] { return large_parses < kMaxLargeParses || stopping; });
    if (stopping) return SendError(socket, v, false, absl::UnavailableError("the server is stopping")) && false;
    ++large_parses;
  }
  absl::StatusOr<ApiJob> job = chat ? ParseChatRequest(req.body(), api) : ParseCompletionRequest(req.body(), api);
  if (large) {
    std::lock_guard<std::mutex> l(mu);
    --large_parses;
    large_done.notify_one();
  }
  if (!job.ok()) return SendError(socket, v, keep, job.status()) && keep;
  auto stream = engine().Submit(job->request);
  if (!stream.ok()) return SendError(socket, v, keep, stream.status()) && keep;
  const std::string id = absl::StrCat(chat ? "chatcmpl-" : "cmpl-", next_id++);
  ReplyBuilder reply(*job, id, Now());
  runtime::TokenEvent e;
  if (!job->stream) {
    // A client that goes away while it waits cancels its request too (checked at every token).
    // (Stop() shuts the connections' read sides itself, which PeerClosed cannot tell from a client
    // that left: while stopping the request runs on, and the engine's shutdown ends it.)
    // Between events too (a request queued or in a long prefill has none for a while), so an
    // abandoned request leaves the queue instead of being served to no one.
    bool gone = false;
    while (!reply.done()) {
      const RequestStream::Wait w = (*stream)->NextWithin(e, kClientCheck);
      if (w == RequestStream::Wait::kEnd) break;
      if (w == RequestStream::Wait::kEvent) reply.Add(e);
      if (!gone && !(w == RequestStream::Wait::kEvent && e.last) && !stopping && PeerClosed(socket)) {
        gone = true;
        engine().Cancel(**stream);
      }
    }
    if (gone) return false;
    if (!reply.error().ok()) return SendError(socket, v, keep, reply.error()) && keep;
    return Send(socket, v, keep, 200, reply.Json()) && keep;
  }
  // Server-sent events, one HTTP chunk per token; HTTP/1.0 has no chunks: the frames as they are,
  // the end of the stream the connection's close.
  const bool chunked = v >= 11;
  http::response<http::empty_body> res{http::status::ok, v};
  res.set(http::field::server, "memra");
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  res.keep_alive(keep && chunked);
  res.chunked(chunked);
  http::response_serializer<http::empty_body> sr{res};
  beast::error_code ec;
  Arm(socket.native_handle(), SHUT_RDWR);
  http::write_header(socket, sr, ec);
  bool alive = !Disarm(socket.native_handle()) && !ec;
  while (alive && !reply.done()) {
    const RequestStream::Wait w = (*stream)->NextWithin(e, kClientCheck);
    if (w == RequestStream::Wait::kEnd) break;
    if (w == RequestStream::Wait::kTimeout) {
      alive = stopping || !PeerClosed(socket);  // no event for a while: is the client still there?
      continue;
    }
    if (e.last && e.reason == runtime::FinishReason::kError) LogFailure(e.error);
    const std::string frame = reply.Chunk(e);
    if (frame.empty()) continue;
    alive = WriteChunk(socket, frame, chunked);
  }
  if (!alive) {
    // The client went away: free its slot now and drop the rest of its events.
    engine().Cancel(**stream);
    while ((*stream)->Next(e)) {
    }
    return false;
  }
  if (!chunked) return false;  // closing the connection ends the stream
  Arm(socket.native_handle(), SHUT_RDWR);
  asio::write(socket, http::make_chunk_last(), ec);
  return !Disarm(socket.native_handle()) && !ec && keep;
}

std::string HttpServer::Impl::Metrics() {
  const ServeStats s = engine().stats();
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, int64_t value) {
    absl::StrAppendFormat(&out, "# HELP memra_%s %s\n# TYPE memra_%s %s\nmemra_%s %d\n", name, help, name, type, name,
                          value);
  };
  metric("requests_total", "counter", "Requests accepted by the engine.", s.requests);
  metric("requests_finished_total", "counter", "Requests that ended (any reason).", s.finished);
  metric("requests_errors_total", "counter", "Requests that ended with an error.", s.errors);
  metric("requests_cancelled_total", "counter", "Requests cancelled (client gone, or past --request-time-limit).",
         s.cancelled);
  metric("requests_timed_out_total", "counter", "Requests ended by --request-time-limit.", s.timed_out);
  metric("requests_refused_total", "counter", "Requests refused with 503 (queue full).", s.refused);
  metric("prompt_tokens_total", "counter", "Prompt tokens of accepted requests.", s.prompt_tokens);
  metric("generated_tokens_total", "counter", "Tokens generated.", s.generated_tokens);
  metric("steps_total", "counter", "Scheduler steps run.", s.steps);
  metric("requests_queued", "gauge", "Requests waiting for a slot.", s.queued);
  metric("requests_running", "gauge", "Requests holding a slot.", s.running);
  metric("slots", "gauge", "Sequence slots of the engine.", s.slots);
  metric("slots_lost", "gauge", "Sequence slots whose reset failed, never reused (the log names the error).",
         s.scheduler.lost_slots);
  metric("kv_blocks", "gauge", "Paged KV blocks in the pool.", s.memory.kv_blocks);
  metric("kv_blocks_used", "gauge", "Paged KV blocks in use: held by sequences or by prefix-cache snapshots.",
         s.memory.kv_blocks_used);
  metric("kv_cache_bytes", "gauge", "Bytes of the KV pool.", static_cast<int64_t>(s.memory.kv_bytes));
  metric("kv_cache_used_bytes", "gauge", "Bytes of the KV pool in use (sequences and prefix-cache snapshots).",
         s.memory.kv_blocks > 0 ? static_cast<int64_t>(s.memory.kv_bytes / s.memory.kv_blocks * s.memory.kv_blocks_used)
                                : 0);
  metric("recurrent_state_bytes", "gauge", "Bytes of the conv rings and delta-net states (every slot).",
         static_cast<int64_t>(s.memory.recurrent_bytes));
  const runtime::SchedulerStats& p = s.scheduler;
  metric("prefix_cache_rows", "gauge", "Prefix-cache snapshot rows (--cache-ram).", p.prefix_rows);
  metric("prefix_cache_rows_used", "gauge", "Prefix-cache snapshot rows holding a snapshot.", p.prefix_rows_used);
  metric("prefix_cache_bytes", "gauge", "Bytes of the snapshot rows' recurrent-state store.",
         static_cast<int64_t>(s.memory.snapshot_bytes));
  metric("prefix_cache_kv_blocks", "gauge", "KV blocks held only by prefix-cache snapshots.",
         s.memory.snapshot_kv_blocks);
  metric("prefix_cache_lookups_total", "counter", "Admitted requests that looked for a cached prefix.",
         p.prefix_lookups);
  metric("prefix_cache_hits_total", "counter", "Admitted requests resumed from a cached prefix.", p.prefix_hits);
  metric("prefix_cache_tokens_reused_total", "counter", "Prompt tokens not prefilled thanks to the prefix cache.",
         p.prefix_tokens_reused);
  metric("prefix_cache_snapshots_total", "counter", "Prefix-cache snapshots saved.", p.prefix_snapshots);
  metric("prefix_cache_evictions_total", "counter", "Prefix-cache snapshots dropped for room.", p.prefix_evictions);
  metric("prefix_cache_errors_total", "counter", "Prefix-cache saves or restores that failed (then skipped).",
         p.prefix_errors);
  absl::StrAppendFormat(&out,
                        "# HELP memra_prefix_cache_hit_ratio Prompt tokens reused over prompt tokens admitted.\n"
                        "# TYPE memra_prefix_cache_hit_ratio gauge\nmemra_prefix_cache_hit_ratio %.6f\n"
                        "# HELP memra_prefix_cache_saved_seconds_total Prefill time the reused tokens would have "
                        "taken (tokens x the measured time per prompt row).\n"
                        "# TYPE memra_prefix_cache_saved_seconds_total counter\n"
                        "memra_prefix_cache_saved_seconds_total %.6f\n",
                        p.prompt_tokens > 0 ? static_cast<double>(p.prefix_tokens_reused) / p.prompt_tokens : 0.0,
                        p.prefix_seconds_saved);
  // Output tokens per second over the last interval between two scrapes.
  {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> l(mu);
    const double dt = std::chrono::duration<double>(now - last_scrape).count();
    const double rate = dt > 0 && last_scrape_tokens >= 0 ? (s.generated_tokens - last_scrape_tokens) / dt : 0.0;
    last_scrape = now;
    last_scrape_tokens = s.generated_tokens;
    absl::StrAppendFormat(&out,
                          "# HELP memra_generated_tokens_per_second Output tokens per second since the last "
                          "scrape.\n# TYPE memra_generated_tokens_per_second gauge\n"
                          "memra_generated_tokens_per_second %.3f\n",
                          rate);
  }
  return out;
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  Stop();
  // Connection threads hold Impl: wait for them.
  {
    std::unique_lock<std::mutex> l(impl_->mu);
    impl_->idle.wait(l, [&] { return impl_->connections == 0 && impl_->refusing == 0; });
  }
  {
    std::lock_guard<std::mutex> l(impl_->wd_mu);
    impl_->wd_stop = true;
  }
  impl_->wd_cv.notify_all();
  if (impl_->watchdog.joinable()) impl_->watchdog.join();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Listen(const HttpServerOptions& options, ApiContext api,
                                                               ServeEngine& engine) {
  auto server = Listen(options);
  if (server.ok()) (*server)->Ready(std::move(api), engine);
  return server;
}

void HttpServer::Ready(ApiContext api, ServeEngine& engine) {
  impl_->api = std::move(api);
  impl_->engine_ = &engine;
  impl_->ready.store(true, std::memory_order_release);
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Listen(const HttpServerOptions& options) {
  if (options.port < 0 || options.port > 65535)
    return absl::InvalidArgumentError(absl::StrCat("--port must be in [0, 65535] (got ", options.port, ")"));
  if (options.idle_timeout_s < 1)
    return absl::InvalidArgumentError(absl::StrCat("--timeout must be >= 1 s (got ", options.idle_timeout_s, ")"));
  auto impl = std::make_unique<Impl>(options);
  beast::error_code ec;
  const auto address = asio::ip::make_address(options.host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--host ", options.host, ": not an IP address"));
  const tcp::endpoint ep{address, static_cast<unsigned short>(options.port)};
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.host, ":", options.port, ": ", ec.message()));
  Impl* p = impl.get();
  impl->watchdog = std::thread([p] { p->Watch(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

namespace {

constexpr int kMaxRefusing = 32;

// Reads what a client has sent within `ms` milliseconds, without blocking past it.
void DrainFor(int fd, int ms) {
  char buf[16384];
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    const int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, left) <= 0) return;
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) return;
  }
}

// A connection over the limit gets 503 on a thread of its own (so the accepting thread never waits
// on it). Its request is read first (briefly): closing a socket with unread input resets it, and
// the client would see a broken pipe instead of the answer. The reply is a few hundred bytes, which
// the socket's send buffer takes without waiting for the client.
void RefuseBusy(tcp::socket& socket, int limit) {
  const int fd = socket.native_handle();
  DrainFor(fd, 100);
  const absl::Status st = absl::ResourceExhaustedError(absl::StrCat("too many connections (", limit, ")"));
  WriteResponse(socket, 11, false, HttpStatusOf(st), ErrorJson(st), "application/json");
  beast::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  DrainFor(fd, 50);
}

}  // namespace

int HttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

int HttpServer::connections() const {
  std::lock_guard<std::mutex> l(impl_->mu);
  return impl_->connections;
}

void HttpServer::Run() {
  Impl& s = *impl_;
  while (!s.stopping) {
    tcp::socket socket{s.io};
    beast::error_code ec;
    s.acceptor.accept(socket, ec);
    if (ec) {
      if (s.stopping) break;
      continue;
    }
    bool full = false;
    {
      std::lock_guard<std::mutex> l(s.mu);
      full = s.connections >= s.options.max_connections;
      if (!full) {
        ++s.connections;
        s.open_sockets.insert(socket.native_handle());
      }
    }
    if (full) {
      // At most kMaxRefusing answers at once; past them a connection is closed unanswered (a flood
      // of connections costs threads only up to there).
      bool answer = false;
      {
        std::lock_guard<std::mutex> l(s.mu);
        answer = s.refusing < kMaxRefusing;
        s.refusing += answer;
      }
      if (!answer) continue;  // the socket closes as it leaves scope
      std::thread([&s, sock = std::move(socket)]() mutable {
        RefuseBusy(sock, s.options.max_connections);
        std::lock_guard<std::mutex> l(s.mu);
        if (--s.refusing == 0 && s.connections == 0) s.idle.notify_all();
      }).detach();
      continue;
    }
    std::thread([&s, sock = std::move(socket)]() mutable {
      const int fd = sock.native_handle();
      s.Session(std::move(sock));
      std::lock_guard<std::mutex> l(s.mu);
      s.open_sockets.erase(fd);
      if (--s.connections == 0 && s.refusing == 0) s.idle.notify_all();
    }).detach();
  }
}

void HttpServer::Stop() {
  if (impl_->stopping.exchange(true)) return;
  beast::error_code ec;
  // Closing the listener ends the blocking accept in Run().
  impl_->acceptor.cancel(ec);
  ::shutdown(impl_->acceptor.native_handle(), SHUT_RDWR);
  impl_->acceptor.close(ec);
  // Idle keep-alive connections wait in a read: end it (a request in flight still gets its reply
  // written, or fails to if its client is the one shut down).
  std::lock_guard<std::mutex> l(impl_->mu);
  for (int fd : impl_->open_sockets) ::shutdown(fd, SHUT_RD);
  impl_->large_done.notify_all();  // requests waiting to parse a large body give up
}

}  // namespace memra::server
