// libFuzzer target for the .mir parser (the IR text is user input too). Any input must parse or
// fail with a message; what parses must print, re-parse and print identically; what verifies
// must survive canonicalize,cse,dce and still verify.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  auto m = memra::ir::ParseModule(text);
  if (!m.ok()) {
    if (m.status().message().empty()) std::abort();
    return 0;
  }
  std::string printed = memra::ir::ToText(**m);
  auto again = memra::ir::ParseModule(printed);
  if (!again.ok()) {
    std::fprintf(stderr, "printed IR does not parse: %s\n%s\n", std::string(again.status().message()).c_str(),
                 printed.c_str());
    std::abort();
  }
  if (memra::ir::ToText(**again) != printed) {
    std::fprintf(stderr, "print -> parse -> print differs:\n%s\n", printed.c_str());
    std::abort();
  }
  if (!memra::ir::VerifyModule(**m).ok()) return 0;
  memra::passes::PassManagerOptions opts;
  opts.pipeline = "canonicalize,cse,dce";
  opts.verify_each = true;
  auto pm = memra::passes::PassManager::Create(opts);
  if (!pm.ok()) std::abort();
  std::string sink;
  llvm::raw_string_ostream log(sink);
  (*pm)->set_log(&log);
  absl::Status s = (*pm)->Run(**m);
  if (!s.ok()) {
    std::fprintf(stderr, "passes failed on valid IR: %s\n%s\n", std::string(s.message()).c_str(), printed.c_str());
    std::abort();
  }
  return 0;
}
