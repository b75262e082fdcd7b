// libFuzzer target for the server's HTTP side (server/HttpServer: Boost.Beast's parser, the
// routes, authentication, streaming), end to end over a TCP connection on 127.0.0.1: the input's
// bytes are what a client sends before it closes its side. The server is memra serve's, ready,
// with the Qwen3 vocabulary and chat template over the counting backend
// (tests/server/CountingBackend.h), an API key, a 64 KiB body limit and short limits on time.
// Nothing may crash, hang or read out of bounds, and whatever comes back must be a sequence of
// well-formed HTTP/1.1 responses, each of them:
//  * a status memra answers with (200, 400, 401, 404, 408, 413, 503; never a 500);
//  * an error (4xx, 503) with an OpenAI error object that carries a message;
//  * a 200 with a JSON body, an SSE stream whose every frame is JSON or [DONE], or /metrics' text.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "frontends/gguf/GgufFile.h"
#include "frontends/tokenizer/ChatTemplate.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/HttpServer.h"
#include "server/ServeEngine.h"
#include "tests/fuzz/ReplyChecks.h"
#include "tests/server/CountingBackend.h"

#ifndef MEMRA_TEST_DATA_DIR
#define MEMRA_TEST_DATA_DIR "tests/data"
#endif

namespace {

using memra::fuzz::FramesAreJson;
using memra::fuzz::IsJson;
using namespace memra;
namespace http = boost::beast::http;

void Check(bool cond, const char* what, const std::string& detail = "") {
  if (!cond) {
    std::fprintf(stderr, "HttpServer_fuzz: %s\n%s\n", what, detail.c_str());
    std::abort();
  }
}

bool IsErrorObject(const std::string& s) {
  const nlohmann::json j = nlohmann::json::parse(s, nullptr, false);
  return j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
         j["error"]["message"].is_string() && !j["error"]["message"].get<std::string>().empty();
}

struct Served {
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<tokenizer::ChatTemplate> chat;
  std::unique_ptr<server::CountingBackend> backend;
  std::unique_ptr<server::ServeEngine> engine;
  std::unique_ptr<server::HttpServer> http;
  int port = 0;
};
Served* g = nullptr;
constexpr int64_t kCtx = 64;

// Sends `request`, closes the sending side, and reads until the server closes (30 s at most: a
// request ends within the engine's 5 s time limit, the rest is room for a starved machine).
std::string Exchange(const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  Check(fd >= 0, "socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(g->port));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  // libFuzzer's timer signal (-timeout) interrupts system calls: EINTR is retried everywhere below.
  // An interrupted connect goes on in the background: wait until the socket is writable and read
  // its outcome (sessions 18-19: "cannot connect ... Interrupted system call" was the harness's).
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Check(errno == EINTR, "cannot connect to the server", std::strerror(errno));
    pollfd p{fd, POLLOUT, 0};
    while (::poll(&p, 1, 30000) < 0 && errno == EINTR) {
    }
    int err = 0;
    socklen_t len = sizeof(err);
    Check(::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0, "cannot connect to the server",
          std::strerror(err));
  }
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server answered and closed before reading it all
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    Check(left.count() > 0, "the server did not finish answering within 30 s", out.substr(0, 2000));
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[16384];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

void CheckResponses(const std::string& bytes) {
  boost::beast::error_code ec;
  size_t at = 0;
  while (at < bytes.size()) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    parser.eager(true);
    while (!parser.is_done()) {
      if (at == bytes.size()) {
        // Every byte was read: only a body that ends with the connection may end here (an
        // HTTP/1.0 client's stream has no length and no chunks; the server's close ends it).
        Check(parser.is_header_done() && parser.need_eof(), "a response cut short", bytes.substr(0, 2000));
        parser.put_eof(ec);
        Check(!ec, "a response cut short", ec.message() + "\n" + bytes.substr(0, 2000));
        break;
      }
      const size_t used = parser.put(boost::asio::buffer(bytes.data() + at, bytes.size() - at), ec);
      at += used;
      if (ec == http::error::need_more) {
        // All that is left was offered: the parser wants bytes that never came.
        Check(used > 0, "a response cut short", bytes.substr(0, 2000));
        ec = {};
        continue;
      }
      Check(!ec, "a response that is not well-formed HTTP", ec.message() + "\n" + bytes.substr(0, 2000));
    }
    const auto& res = parser.get();
    const int status = res.result_int();
    const std::string type(res[http::field::content_type]);
    Check(status == 200 || status == 400 || status == 401 || status == 404 || status == 408 || status == 413 ||
              status == 503,
          "an unexpected status", bytes.substr(0, 2000));
    if (status != 200) {
      Check(IsErrorObject(res.body()), "an error without an OpenAI error object", res.body().substr(0, 2000));
    } else if (type == "text/event-stream") {
      Check(FramesAreJson(res.body()), "an SSE frame that is not JSON", res.body().substr(0, 2000));
    } else if (type == "application/json") {
      Check(IsJson(res.body()), "a 200 body that is not JSON", res.body().substr(0, 2000));
    } else {
      Check(type.rfind("text/plain", 0) == 0, "a 200 of an unknown content type", type);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g = new Served;
  auto file = gguf::GgufFile::Open(MEMRA_TEST_DATA_DIR "/tokenizer/qwen3-vocab.gguf");
  Check(file.ok(), "cannot open the Qwen3 vocabulary");
  auto tok = tokenizer::Tokenizer::FromGguf(**file);
  Check(tok.ok(), "cannot build the tokenizer");
  g->tok = std::move(*tok);
  auto chat = tokenizer::ChatTemplate::FromTokenizer(*g->tok);
  Check(chat.ok(), "the vocabulary has no usable chat template");
  g->chat = std::move(*chat);
  // Background logits of -100: one weighted candidate a sampled token (CountingBackend.h).
  g->backend =
      std::make_unique<server::CountingBackend>(2, kCtx, g->tok->n_vocab(), std::chrono::microseconds(0), -100.0f);
  server::ServeEngineOptions eo;
  eo.max_queue = 8;
  eo.max_request_seconds = 5;
  auto engine = server::ServeEngine::Start(*g->backend, eo);
  Check(engine.ok(), "cannot start the engine");
  g->engine = std::move(*engine);
  server::HttpServerOptions ho;
  ho.port = 0;
  ho.api_key = "fuzz-key";
  ho.max_body = 64 << 10;
  ho.idle_timeout_s = 2;
  auto server =
      server::HttpServer::Listen(ho, server::ApiContext{g->tok.get(), g->chat.get(), "fuzz", kCtx}, *g->engine);
  Check(server.ok(), "cannot listen on 127.0.0.1");
  g->http = std::move(*server);
  g->port = g->http->port();
  std::thread([] { g->http->Run(); }).detach();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256 * 1024) return 0;
  CheckResponses(Exchange(std::string(reinterpret_cast<const char*>(data), size)));
  // The connection's thread ends after the server closed the socket: wait for it, so that the
  // leak check after each input does not see its buffers mid-destruction.
  for (int i = 0; i < 10000 && g->http->connections() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  Check(g->http->connections() == 0, "a connection's thread still runs 1 s after the server closed it");
  return 0;
}
