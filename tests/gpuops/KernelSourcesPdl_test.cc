// Every kernel the CUDA executor launches carries the programmatic-dependent-launch attribute on
// sm_90+, which is only correct when the kernel orders itself: each __global__ function of the
// embedded sources must call memra_grid_dependency() (kernels/cuda/Common.cuh), and before any
// `return`, so no block can leave without waiting. This scans the sources the binary embeds.
#include <cctype>
#include <string>

#include "codegen/KernelSources.h"
#include "gtest/gtest.h"

namespace memra::codegen {
namespace {

// The body of the function whose signature starts at `at`: from its first '{' to the matching '}'.
std::string FunctionBody(const std::string& text, size_t at) {
  const size_t open = text.find('{', at);
  if (open == std::string::npos) return "";
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) return text.substr(open, i - open + 1);
  }
  return "";
}

// `text` with its // and /* */ comments blanked out, so words in comments ("return") are not code.
std::string WithoutComments(const std::string& text) {
  std::string out = text;
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] == '"') {  // skip string literals (an include path may hold "//")
      for (++i; i < out.size() && out[i] != '"' && out[i] != '\n'; ++i) {
      }
      continue;
    }
    if (out[i] == '/' && out[i + 1] == '/') {
      for (; i < out.size() && out[i] != '\n'; ++i) out[i] = ' ';
    } else if (out[i] == '/' && out[i + 1] == '*') {
      const size_t end = out.find("*/", i + 2);
      const size_t stop = end == std::string::npos ? out.size() : end + 2;
      for (; i < stop; ++i)
        if (out[i] != '\n') out[i] = ' ';
      --i;
    }
  }
  return out;
}

// The body of a __device__ function named `name` in `text` (empty when there is none).
std::string DeviceFunctionBody(const std::string& text, const std::string& name) {
  for (size_t at = text.find(name + "("); at != std::string::npos; at = text.find(name + "(", at + 1)) {
    const size_t line = text.rfind('\n', at);
    const std::string head = text.substr(line == std::string::npos ? 0 : line + 1, at - line);
    if (head.find("__device__") != std::string::npos) return FunctionBody(text, at);
  }
  return "";
}

TEST(KernelSourcesPdlTest, EveryKernelWaitsForItsPredecessorsBeforeReturning) {
  int kernels = 0;
  for (const EmbeddedSource& src : EmbeddedKernelSources()) {
    const std::string text = WithoutComments(src.text);
    // Entry points are `extern "C" __global__` (their names are what the units launch).
    const std::string entry = "extern \"C\" __global__";
    for (size_t at = text.find(entry); at != std::string::npos; at = text.find(entry, at + 1)) {
      // The name is the word before the parameter list, past any __launch_bounds__(...).
      size_t paren = text.find('(', text.find("void", at));
      if (text.compare(paren - 17, 17, "__launch_bounds__") == 0) paren = text.find('(', text.find(')', paren));
      const size_t name_start = text.rfind(' ', paren) + 1;
      const std::string name = text.substr(name_start, paren - name_start);
      std::string body = FunctionBody(text, at);
      // A one-call entry point (gemv_q -> gemv_q_body<...>(p)) may wait inside the body it calls.
      if (body.find("memra_grid_dependency") == std::string::npos) {
        const size_t call = body.find("_body");
        if (call != std::string::npos) {
          size_t b = call;
          while (b > 0 && (std::isalnum(static_cast<unsigned char>(body[b - 1])) || body[b - 1] == '_')) --b;
          body = DeviceFunctionBody(text, body.substr(b, call + 5 - b));
        }
      }
      ++kernels;
      const size_t wait = body.find("memra_grid_dependency();");
      ASSERT_NE(wait, std::string::npos) << src.name << ": kernel " << name << " never calls memra_grid_dependency()";
      const size_t ret = body.find("return");
      EXPECT_TRUE(ret == std::string::npos || ret > wait)
          << src.name << ": kernel " << name << " may return before memra_grid_dependency()";
    }
  }
  EXPECT_GE(kernels, 40) << "the scan found too few kernels: has the source layout changed?";
}

}  // namespace
}  // namespace memra::codegen
