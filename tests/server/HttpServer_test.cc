// server/HttpServer.h before the model is loaded: it already listens, /health answers 503
// {"status": "loading"} and every other route 503 with an OpenAI error object, and it stops
// cleanly without ever having been Ready(). (The routes after Ready() are tested end to end by
// tests/cli/serve_openai.sh against memra serve.)
#include "server/HttpServer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace memra::server
