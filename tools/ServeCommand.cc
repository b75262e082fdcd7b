// `memra serve MODEL.gguf`: the OpenAI-compatible HTTP server (server/HttpServer.h) over the
// continuous-batching scheduler on the batched engine (runtime/BatchedSlots.h), CPU or CUDA.
// Flag names follow llama-server's. Runs until SIGINT or SIGTERM.
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "frontends/tokenizer/ChatTemplate.h"
#include "frontends/tokenizer/Tokenizer.h"
#include "llvm/Support/raw_ostream.h"
#include "runtime/BatchedSlots.h"
#include "runtime/Executor.h"
#include "server/HttpServer.h"
#include "server/ServeEngine.h"
#include "tools/Command.h"
#include "tools/Options.h"

namespace cl = llvm::cl;

namespace {

cl::SubCommand kServe("serve", "OpenAI-compatible HTTP server (chat and text completions, streaming)");
memra::tools::ModelArgument ServeModelArg(kServe, "<model.gguf>");
cl::opt<std::string> ServeHost("host", cl::desc("Address to listen on (default: 127.0.0.1)"), cl::init("127.0.0.1"),
                               cl::sub(kServe));
memra::tools::IntOption<int> ServePort("port", {0, 65535}, "Port to listen on, 0 = any free one (printed)",
                                       cl::init(8080), cl::sub(kServe));
memra::tools::ChoiceOption ServeDecodeClass("decode-class", {"bucket", "exact"}, memra::tools::kDecodeClassHelp,
                                            cl::init("bucket"), cl::sub(kServe));
memra::tools::IntOption<int> ServeParallel("parallel", {1, 256}, "Requests decoded at once (sequence slots)",
                                           cl::init(4), cl::sub(kServe));
cl::alias ServeParallelShort("np", cl::desc("Alias for --parallel"), cl::NotHidden, cl::aliasopt(ServeParallel));
memra::tools::IntOption<int64_t> ServeCtx("ctx-size", {0, memra::tools::kMaxContext},
                                          "Context per request (prompt + generated), 0 = the model's, capped at 4096",
                                          cl::init(0), cl::sub(kServe));
cl::alias ServeCtxShort("c", cl::desc("Alias for --ctx-size"), cl::NotHidden, cl::aliasopt(ServeCtx));
memra::tools::CacheTypeOptions ServeCacheTypes(kServe);
memra::tools::MemoryBudgetOptions ServeMemory(kServe);
cl::opt<std::string> ServeApiKey("api-key",
                                 cl::desc("Require 'Authorization: Bearer KEY' on every route but /health "
                                          "(default: none)"),
                                 cl::init(""), cl::sub(kServe));
cl::opt<std::string> ServeApiKeyFile("api-key-file",
                                     cl::desc("Read the API key from this file's first line, so it is not in the "
                                              "process's command line (default: none)"),
                                     cl::init(""), cl::sub(kServe));
cl::opt<std::string> ServeAlias("alias", cl::desc("Model id in /v1/models and replies (default: the file's name)"),
                                cl::init(""), cl::sub(kServe));
memra::tools::IntOption<int> ServeMaxQueue("max-queue", {1, 1 << 20},
                                           "Requests queued or running at most; more get HTTP 503", cl::init(256),
                                           cl::sub(kServe));
memra::tools::IntOption<int> ServeRequestTimeLimit(
    "request-time-limit", {0, 7 * 86400},
    "Seconds a request may take from its arrival (queued or generating); past it, it ends with an HTTP 503 "
    "naming the limit (a stream: its tokens so far, then an error event). 0 = no limit",
    cl::init(600), cl::sub(kServe));
memra::tools::IntOption<int64_t> ServeBatch("batch-size", {1, memra::tools::kMaxContext},
                                            "Rows per scheduler step (decode rows first, prompt chunks in the rest)",
                                            cl::init(512), cl::sub(kServe));
cl::alias ServeBatchShort("b", cl::desc("Alias for --batch-size"), cl::NotHidden, cl::aliasopt(ServeBatch));
memra::tools::IntOption<int> ServeTp("tp", {1, 64},
                                     "Tensor-parallel ranks the model is split over (as memra run --tp; on --backend "
                                     "cpu the ranks are threads of this process)",
                                     cl::init(1), cl::sub(kServe));
memra::tools::ChoiceOption ServeBackend("backend", {"cpu", "cuda"},
                                        "Executor; auto = cuda when a CUDA GPU is present, cpu otherwise", cl::init(""),
                                        cl::sub(kServe));
memra::tools::IntOption<int> ServeThreads("threads", {0, memra::tools::HardwareThreads()},
                                          "CPU threads for the cpu backend, 0 = all hardware threads", cl::init(0),
                                          cl::sub(kServe));
cl::alias ServeThreadsShort("t", cl::desc("Alias for --threads"), cl::NotHidden, cl::aliasopt(ServeThreads));
memra::tools::IntOption<int> ServeTimeout("timeout", {1, 86400},
                                          "Seconds a client has to send a whole request (408 after) or to take one "
                                          "streamed chunk; an idle keep-alive connection closes after it",
                                          cl::init(60), cl::sub(kServe));
memra::tools::IntOption<int> ServeThreadsHttp("threads-http", {1, 4096},
                                              "Connections served at once (a thread each); more get HTTP 503",
                                              cl::init(512), cl::sub(kServe));
cl::alias ServeTimeoutShort("to", cl::desc("Alias for --timeout"), cl::NotHidden, cl::aliasopt(ServeTimeout));
memra::tools::IntOption<int64_t> ServeCacheRam(
    "cache-ram", {0, int64_t{1} << 30},
    "MiB for the prefix cache's state snapshots (a later request or chat turn sharing a prefix resumes from one "
    "instead of prefilling it; at most 4 snapshots per slot), 0 = no prefix reuse",
    cl::init(8192), cl::sub(kServe));
cl::alias ServeCacheRamShort("cram", cl::desc("Alias for --cache-ram"), cl::NotHidden, cl::aliasopt(ServeCacheRam));
cl::opt<std::string> ServeCache("kernel-cache",
                                cl::desc("Kernel cubin cache folder, - = none (default: ~/.cache/memra)"), cl::init(""),
                                cl::value_desc("dir"), cl::sub(kServe));

int Fail(const absl::Status& s) {
  llvm::errs() << "memra serve: " << s.ToString() << "\n";
  return 1;
}

// The first line of `path`, without its line end: the API key (--api-key-file).
absl::StatusOr<std::string> ReadApiKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--api-key-file ", path, ": cannot open: ", std::strerror(errno)));
  std::string key;
  std::getline(in, key);
  if (!key.empty() && key.back() == '\r') key.pop_back();
  if (key.empty())
    return absl::InvalidArgumentError(absl::StrCat("--api-key-file ", path, ": the first line is empty"));
  return key;
}

// 127.0.0.0/8 and ::1: reachable from this machine only.
bool IsLoopback(const std::string& host) { return host == "::1" || host == "localhost" || host.rfind("127.", 0) == 0; }

std::string ModelId(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".gguf") == 0) base.resize(base.size() - 5);
  return base;
}

int RunServe() {
  using namespace memra;
  // Signals go to the thread that waits for them, blocked in every thread started from here on:
  // first of all, since choosing the backend may initialize the CUDA driver, whose own threads
  // would otherwise take a SIGTERM with its default action (the process killed, not stopped in
  // order: the GPU soak's exit status -15).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::string model_path, model_error;
  if (!ServeModelArg.Resolve(model_path, model_error)) return Fail(absl::InvalidArgumentError(model_error));
  auto backend_kind = tools::BackendFromFlag(ServeBackend);
  if (!backend_kind.ok()) return Fail(backend_kind.status());

  // Listen first: a port in use fails at once, and /health answers 503 "loading" while the model
  // loads (load balancers wait instead of seeing a refused connection).
  server::HttpServerOptions ho;
  ho.host = ServeHost;
  ho.port = ServePort;
  ho.api_key = ServeApiKey;
  if (!ServeApiKeyFile.empty()) {
    if (!ServeApiKey.empty())
      return Fail(absl::InvalidArgumentError("--api-key and --api-key-file: give the key one way"));
    auto key = ReadApiKeyFile(ServeApiKeyFile);
    if (!key.ok()) return Fail(key.status());
    ho.api_key = *key;
  }
  if (ho.api_key.empty() && !IsLoopback(ho.host))
    llvm::errs() << "memra serve: warning: listening on " << ho.host
                 << " without --api-key: anyone who can reach it can use the model\n";
  ho.idle_timeout_s = ServeTimeout;
  ho.max_connections = ServeThreadsHttp;
  auto http = server::HttpServer::Listen(ho);
  if (!http.ok()) return Fail(http.status());
  std::thread accept([&] { (*http)->Run(); });
  auto stop_listening = [&] {
    (*http)->Stop();
    accept.join();
  };
  // SIGINT / SIGTERM: during the load the process ends at once (nothing is served yet); after it,
  // the main thread stops everything in order.
  std::mutex sig_mu;
  std::condition_variable sig_cv;
  int got_signal = 0;
  bool loaded = false;
  std::thread([&, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::unique_lock<std::mutex> l(sig_mu);
    if (!loaded) {
      llvm::errs() << "memra serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << " while loading, exiting\n";
      llvm::errs().flush();
      std::_Exit(128 + sig);
    }
    got_signal = sig;
    sig_cv.notify_all();
  }).detach();
  llvm::errs() << absl::StrFormat("memra serve: listening on http://%s:%d, loading %s\n", std::string(ServeHost),
                                  (*http)->port(), model_path);

  runtime::BatchedSlotsOptions bo;
  bo.slots = ServeParallel;
  bo.tp = ServeTp;
  bo.n_ctx = ServeCtx;
  bo.cache_types = ServeCacheTypes.Types();
  bo.backend = *backend_kind;
  bo.exec.cpu.threads = ServeThreads;
  bo.exec.cuda.kernel_cache_dir = ServeCache;
  ServeMemory.Apply(bo.exec);
  bo.snapshot_bytes = int64_t{ServeCacheRam} << 20;
  {
    auto decode_class = memra::kernels::cuda::ParseDecodeClass(ServeDecodeClass);
    if (!decode_class.ok()) return Fail(decode_class.status());
    bo.decode_class = *decode_class;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto engine_backend = runtime::BatchedSlots::Open(model_path, bo);
  if (!engine_backend.ok()) {
    stop_listening();
    return Fail(engine_backend.status());
  }
  runtime::BatchedSlots& slots = **engine_backend;
  if (slots.tokenizer() == nullptr) {
    stop_listening();
    return Fail(absl::FailedPreconditionError(
        absl::StrCat(model_path, ": the GGUF has no usable tokenizer (the server takes and returns text)")));
  }
  const tokenizer::Tokenizer& tok = *slots.tokenizer();
  std::unique_ptr<tokenizer::ChatTemplate> chat;
  if (auto c = tokenizer::ChatTemplate::FromTokenizer(tok); c.ok()) {
    chat = std::move(*c);
  } else {
    llvm::errs() << "memra serve: no chat template (" << std::string(c.status().message())
                 << "): /v1/chat/completions answers 400, /v1/completions works\n";
  }

  server::ServeEngineOptions eo;
  eo.max_queue = ServeMaxQueue;
  eo.max_request_seconds = ServeRequestTimeLimit;
  eo.scheduler.step_tokens = std::max<int64_t>(std::min<int64_t>(ServeBatch, slots.max_step_rows()),
                                               runtime::MinStepTokens(slots.slots(), eo.scheduler.prefill_align));
  eo.scheduler.detokenizer = runtime::TokenizerDetokenizer(tok);
  auto engine = server::ServeEngine::Start(slots, eo);
  if (!engine.ok()) {
    stop_listening();
    return Fail(engine.status());
  }

  server::ApiContext api;
  api.tokenizer = &tok;
  api.chat_template = chat.get();
  api.model = ServeAlias.empty() ? ModelId(model_path) : std::string(ServeAlias);
  api.ctx_per_slot = slots.max_sequence_positions();
  const std::string model_id = api.model;
  (*http)->Ready(std::move(api), **engine);
  {
    std::lock_guard<std::mutex> l(sig_mu);
    loaded = true;
  }
  llvm::errs() << absl::StrFormat(
      "memra serve: %s as \"%s\": %d slots of context %d, prefix cache %d snapshots (%.0f MiB), %s, loaded in "
      "%.2f s\n"
      "memra serve: ready on http://%s:%d (POST /v1/chat/completions, /v1/completions; GET /v1/models, "
      "/health, /metrics)%s\n",
      model_path, model_id, slots.slots(), slots.ctx_per_slot(), slots.snapshot_rows(),
      slots.memory().snapshot_bytes / 1048576.0, slots.executor().Describe(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), std::string(ServeHost),
      (*http)->port(), ServeApiKey.empty() ? "" : ", API key required");
  int sig = 0;
  {
    std::unique_lock<std::mutex> l(sig_mu);
    sig_cv.wait(l, [&] { return got_signal != 0; });
    sig = got_signal;
  }
  llvm::errs() << "memra serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", stopping\n";
  stop_listening();       // also ends the connections' reads
  (*engine)->Shutdown();  // cancels what still runs, so every connection finishes
  http->reset();          // waits for the connection threads
  engine->reset();
  return 0;
}

}  // namespace

MEMRA_REGISTER_COMMAND(kServe, RunServe);
