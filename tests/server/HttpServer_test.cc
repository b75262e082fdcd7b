// server/HttpServer.h before the model is loaded: it already listens, /health answers 503
// {"status": "loading"} and every other route 503 with an OpenAI error object, and it stops
// cleanly without ever having been Ready(). After Ready(), on the counting backend
// (tests/server/CountingBackend.h): the API key check, and a server-side failure's message kept
// from the client. (The routes are tested end to end by tests/cli/serve_openai.sh.)
#include "server/HttpServer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

#include "frontends/gguf/GgufFile.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "gtest/gtest.h"
#include "server/ServeEngine.h"
#include "tests/server/CountingBackend.h"

namespace memra::server {
namespace {

// One HTTP/1.1 exchange on a fresh connection; the whole response as text ("" when refused).
std::string Exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

TEST(HttpServer, AnswersLoadingUntilReady) {
  HttpServerOptions o;
  o.port = 0;
  auto server = HttpServer::Listen(o);
  ASSERT_TRUE(server.ok()) << server.status();
  std::thread run([&] { (*server)->Run(); });
  const int port = (*server)->port();

  const std::string health = Exchange(port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(health.find("HTTP/1.1 503"), std::string::npos) << health;
  EXPECT_NE(health.find(R"({"status":"loading"})"), std::string::npos) << health;

  const std::string body = R"({"prompt": "hi"})";
  const std::string completion =
      Exchange(port,
               "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: "
               "application/json\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_NE(completion.find("HTTP/1.1 503"), std::string::npos) << completion;
  EXPECT_NE(completion.find("still loading"), std::string::npos) << completion;
  EXPECT_NE(completion.find("\"error\""), std::string::npos) << completion;

  const std::string metrics = Exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(metrics.find("HTTP/1.1 503"), std::string::npos) << metrics;

  (*server)->Stop();
  run.join();
  server->reset();
}

// A served model: the Qwen3 vocabulary and chat template (tests/data/tokenizer) over the counting
// backend, so a greedy completion's ids are known.
struct Served {
  Served() {
    auto file = gguf::GgufFile::Open(MEMRA_TEST_DATA_DIR "/tokenizer/qwen3-vocab.gguf");
    EXPECT_TRUE(file.ok()) << file.status();
    auto t = tokenizer::Tokenizer::FromGguf(**file);
    EXPECT_TRUE(t.ok()) << t.status();
    tok = std::move(*t);
    backend = std::make_unique<CountingBackend>(2, 64, tok->n_vocab());
    auto e = ServeEngine::Start(*backend);
    EXPECT_TRUE(e.ok()) << e.status();
    engine = std::move(*e);
  }
  ~Served() {
    if (http == nullptr) return;
    http->Stop();
    run.join();
  }
  ApiContext api() const { return ApiContext{tok.get(), nullptr, "counting", 64}; }
  // Listens on a free port of 127.0.0.1 with `o` (its port is ignored), ready; returns the port.
  int Serve(HttpServerOptions o = {}) {
    o.port = 0;
    auto server = HttpServer::Listen(o, api(), *engine);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return 0;
    http = std::move(*server);
    run = std::thread([this] { http->Run(); });
    return http->port();
  }
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<CountingBackend> backend;
  std::unique_ptr<ServeEngine> engine;
  std::unique_ptr<HttpServer> http;
  std::thread run;
};

std::string Post(int port, const std::string& path, const std::string& body, const std::string& extra_headers = "") {
  return Exchange(port, "POST " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + extra_headers +
                            "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                            "\r\n\r\n" + body);
}

TEST(HttpServer, ApiKeyGuardsEveryRouteButHealth) {
  Served m;
  HttpServerOptions o;
  o.api_key = "s3cret-key";
  const int port = m.Serve(o);
  ASSERT_GT(port, 0);
  const std::string body = R"({"prompt": [100, 200], "max_tokens": 3, "temperature": 0})";
  // No key, a wrong key of the same length, a prefix of the key, the key with more after it.
  for (const std::string& auth :
       {std::string(), std::string("Authorization: Bearer s3cret-kez\r\n"),
        std::string("Authorization: Bearer s3cret\r\n"), std::string("Authorization: Bearer s3cret-key2\r\n"),
        std::string("Authorization: s3cret-key\r\n")}) {
    const std::string r = Post(port, "/v1/completions", body, auth);
    EXPECT_NE(r.find("HTTP/1.1 401"), std::string::npos) << auth << r;
    EXPECT_NE(r.find("authentication_error"), std::string::npos) << r;
  }
  const std::string ok = Post(port, "/v1/completions", body, "Authorization: Bearer s3cret-key\r\n");
  EXPECT_NE(ok.find("HTTP/1.1 200"), std::string::npos) << ok;
  EXPECT_NE(ok.find("\"completion_tokens\":3"), std::string::npos) << ok;
  // /health needs no key (load balancers probe it); /metrics does (it was open to anyone).
  EXPECT_NE(Exchange(port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").find("HTTP/1.1 200"),
            std::string::npos);
  EXPECT_NE(Exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").find("HTTP/1.1 401"),
            std::string::npos);
  EXPECT_NE(
      Exchange(port,
               "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-key\r\nConnection: close\r\n\r\n")
          .find("HTTP/1.1 200"),
      std::string::npos);
}

// Found by tests/fuzz/HttpServer_fuzz: a request target that is not UTF-8 went into the 404's
// message, and serializing it threw on the connection's thread (the process ended).
TEST(HttpServer, ARouteThatIsNotUtf8GetsA404) {
  Served m;
  const int port = m.Serve();
  ASSERT_GT(port, 0);
  const std::string r = Post(port, "/v1/com\xd2pletions", R"({"prompt": "hi"})");
  EXPECT_NE(r.find("HTTP/1.1 404"), std::string::npos) << r;
  EXPECT_NE(r.find("no route for POST /v1/com\xef\xbf\xbdpletions"), std::string::npos) << r;
  // The server still answers.
  EXPECT_NE(Post(port, "/v1/completions", R"({"prompt": [1], "max_tokens": 1})").find("HTTP/1.1 200"),
            std::string::npos);
}

TEST(HttpServer, AServerFailureTellsTheClientNoDetails) {
  Served m;
  m.backend->FailSteps(absl::InternalError("cuLaunchKernel failed for /home/someone/.cache/memra/ab12.cubin"));
  const int port = m.Serve();
  ASSERT_GT(port, 0);
  for (const char* body :
       {R"({"prompt": [100, 200], "max_tokens": 3})", R"({"prompt": [100, 200], "max_tokens": 3, "stream": true})"}) {
    const std::string r = Post(port, "/v1/completions", body);
    EXPECT_EQ(r.find("/home/someone"), std::string::npos) << r;
    EXPECT_EQ(r.find("cubin"), std::string::npos) << r;
    EXPECT_NE(r.find("the server failed on this request"), std::string::npos) << r;
  }
  // Healed, the same server answers again.
  m.backend->FailSteps(absl::OkStatus());
  const std::string r = Post(port, "/v1/completions", R"({"prompt": [100, 200], "max_tokens": 2})");
  EXPECT_NE(r.find("HTTP/1.1 200"), std::string::npos) << r;
}

}  // namespace
}  // namespace memra::server
