// `memra serve`'s HTTP side (Boost.Beast, synchronous, a thread per connection, keep-alive):
// routes the OpenAI endpoints to server/OpenAiApi.h and the engine (server/ServeEngine.h).
//
//   GET  /health               {"status": "ok"}; 503 {"status": "loading"} before Ready()
//   GET  /v1/models            the one model
//   POST /v1/completions       prompt (text or ids)
//   POST /v1/chat/completions  messages through the chat template
//   GET  /metrics              Prometheus text
//
// Errors are OpenAI error objects: 400 (malformed JSON or HTTP, bad fields, a prompt over the
// context), 401 (--api-key set, no or another bearer token: every route but /health), 404, 413 (a body over max_body),
// 503 (the engine's queue is full, or too many connections); a failure on the server's side (500)
// tells the client only that it failed (its message could name files or devices), the server's
// log says why. The API key is compared in time that does not depend on the guess. A streaming client that goes away
// cancels its request (its slot is freed at once), streamed or not; a request that has not fully
// arrived within idle_timeout_s gets 408 and its connection is closed (an idle keep-alive
// connection just closes), so slow clients cannot hold threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/OpenAiApi.h"
#include "server/ServeEngine.h"

namespace memra::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (port() says which)
  std::string api_key;  // empty: no authentication
  int64_t max_body = 8 << 20;
  int max_connections = 512;  // --threads-http
  int idle_timeout_s = 60;
};

class HttpServer {
 public:
  // Binds and listens (an error names the address, e.g. a port in use), answering 503 while the
  // model loads (/health: {"status": "loading"}) until Ready().
  static absl::StatusOr<std::unique_ptr<HttpServer>> Listen(const HttpServerOptions& options);
  // Listen, then Ready at once.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Listen(const HttpServerOptions& options, ApiContext api,
                                                            ServeEngine& engine);
  // The model is loaded: serve it. `engine` must outlive the server. Call once.
  void Ready(ApiContext api, ServeEngine& engine);
  ~HttpServer();
  int port() const;
  // Connections being served now (their threads still running).
  int connections() const;
  // Accepts until Stop(); returns when the listener is closed.
  void Run();
  // Closes the listener (Run returns); connections in flight finish their current request: its
  // reply, or, when the engine's shutdown cancels it first, a 503 saying the server is stopping
  // (a stream ends with its last event).
  void Stop();

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra::server
