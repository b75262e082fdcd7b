// libFuzzer target for memra's command line: the input, split at NUL bytes, is argv[1..] parsed by
// LLVM cl with memra's whole option table (every subcommand's flags, tools/*Command.cc, built by
// the project; tools/Options.cc, the validated options, instrumented here). Nothing may crash,
// hang or read out of bounds, and:
//  * a refused command line carries an error message;
//  * an accepted one leaves every numeric option of every subcommand with a value its declaration
//    allows (tools/Options.h NumericOptionInfo::valid), defaults included.
// Command lines with an argument that makes LLVM cl print and exit (--help*, -h*, --version,
// --print-options) or a response file (@FILE, which would read a file) are skipped.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"
#include "tools/Command.h"
#include "tools/Options.h"

namespace {

void Check(bool cond, const char* what, const std::string& detail = "") {
  if (!cond) {
    std::fprintf(stderr, "Cli_fuzz: %s\n%s\n", what, detail.c_str());
    std::abort();
  }
}

// The option names a command line may use: the top level's and its subcommand's (argv[1] when it
// names one).
const std::set<std::string>& OptionNames(const std::string& first) {
  // Built once per subcommand name (the table does not change while the fuzzer runs).
  static auto* cache = new std::map<std::string, std::set<std::string>>();
  std::string key;  // the subcommand's name, or "" (the top level): the cache stays bounded
  for (llvm::cl::SubCommand* sub : llvm::cl::getRegisteredSubcommands())
    if (!sub->getName().empty() && sub->getName() == first) key = first;
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  std::set<std::string>& names = (*cache)[key];
  for (llvm::cl::SubCommand* sub : llvm::cl::getRegisteredSubcommands())
    if (sub->getName().empty() || sub->getName() == key)
      for (const auto& entry : sub->OptionsMap) names.insert(entry.getKey().str());
  return names;
}

bool Skipped(const std::string& arg, const std::set<std::string>& names) {
  if (!arg.empty() && arg[0] == '@') return true;
  for (const char* word : {"help", "version", "print-options", "print-all-options"})
    if (arg.find(word) != std::string::npos) return true;
  // -h is LLVM cl's alias of --help, and a name the subcommand does not have is read as a group
  // of single-letter options ("--ih" is -i -h, and so is "--host" outside serve): skip those that
  // could reach it.
  if (arg.size() > 1 && arg[0] == '-') {
    const size_t from = arg[1] == '-' ? 2 : 1;
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(from, eq == std::string::npos ? std::string::npos : eq - from);
    if (name == "h" || (name.find('h') != std::string::npos && names.count(name) == 0)) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::vector<std::string> args = {"memra"};
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  args.push_back(cur);
  if (args.size() > 32) return 0;
  const std::set<std::string>& names = OptionNames(args.size() > 1 ? args[1] : "");
  for (const std::string& a : args)
    if (Skipped(a, names)) return 0;
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());

  llvm::cl::ResetAllOptionOccurrences();
  std::string errors;
  llvm::raw_string_ostream es(errors);
  // LLVM cl also writes an option's own error (the validated options' messages) to llvm::errs().
  const bool ok = llvm::cl::ParseCommandLineOptions(static_cast<int>(argv.size()), argv.data(), "", &es);
  es.flush();
  if (!ok) return 0;
  for (const auto& o : memra::tools::NumericOptions()) {
    if (o.valid)
      Check(o.valid(), "an accepted command line left a numeric option outside its range",
            o.subcommand + " --" + o.name);
  }
  return 0;
}
