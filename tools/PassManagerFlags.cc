#include "tools/PassManagerFlags.h"

#include <memory>

namespace memra::tools {

namespace cl = llvm::cl;

PassManagerFlags::PassManagerFlags(cl::SubCommand& sub, const char* default_pipeline)
    : passes_desc_(std::string("Passes to run, comma-separated, each `name` or `name{key=value ...}` "
                               "(default: \"") +
                   default_pipeline + "\")"),
      verify_desc_(std::string("Verify the IR after every pass and check that passes reporting no change "
                               "changed nothing (default: ") +
                   (passes::kVerifyEachDefault ? "on in this debug build" : "off in release builds") +
                   "; the input is always verified)"),
      passes_("passes", cl::sub(sub), cl::init(default_pipeline), cl::value_desc("pipeline"), cl::desc(passes_desc_)),
      verify_each_("verify-each", cl::sub(sub), cl::init(passes::kVerifyEachDefault), cl::desc(verify_desc_)),
      print_before_all_("print-before-all", cl::sub(sub), cl::init(false),
                        cl::desc("Print the IR before every pass to stderr (default: off)")),
      print_after_all_("print-after-all", cl::sub(sub), cl::init(false),
                       cl::desc("Print the IR after every pass to stderr (default: off)")),
      print_before_("print-before", cl::sub(sub), cl::CommaSeparated, cl::value_desc("pass,..."),
                    cl::desc("Print the IR before the named passes (default: none)")),
      print_after_("print-after", cl::sub(sub), cl::CommaSeparated, cl::value_desc("pass,..."),
                   cl::desc("Print the IR after the named passes (default: none)")),
      print_after_change_("print-after-change", cl::sub(sub), cl::init(false),
                          cl::desc("Print the IR after every pass that changed it; with "
                                   "--print-after(-all) only when the selected pass changed it "
                                   "(default: off)")),
      dump_dir_("dump-dir", cl::sub(sub), cl::init(""), cl::value_desc("dir"),
                cl::desc("Write 00-input.mir and NN-<pass>.mir after each pass into this "
                         "directory; each header records the pipeline that reproduces it "
                         "(default: no dumps)")),
      time_passes_("time-passes", cl::sub(sub), cl::init(false),
                   cl::desc("Print a table of the time spent in each pass (default: off)")),
      disable_passes_("disable-passes", cl::sub(sub), cl::CommaSeparated, cl::value_desc("pass,..."),
                      cl::desc("Remove these passes from the pipeline (default: none)")),
      statistics_("pass-statistics", cl::sub(sub), cl::init(false),
                  cl::desc("Print the passes' statistics after the run (default: off)")) {}

bool PassManagerFlags::any_given() const {
  // std::addressof: cl::list overloads operator& (it yields the stored vector).
  const cl::Option* flags[] = {std::addressof(passes_),
                               std::addressof(verify_each_),
                               std::addressof(print_before_all_),
                               std::addressof(print_after_all_),
                               std::addressof(print_before_),
                               std::addressof(print_after_),
                               std::addressof(print_after_change_),
                               std::addressof(dump_dir_),
                               std::addressof(time_passes_),
                               std::addressof(disable_passes_),
                               std::addressof(statistics_)};
  for (const cl::Option* f : flags)
    if (f->getNumOccurrences() > 0) return true;
  return false;
}

passes::PassManagerOptions PassManagerFlags::Options() const {
  passes::PassManagerOptions o;
  o.pipeline = passes_;
  o.verify_each = verify_each_;
  o.print_before_all = print_before_all_;
  o.print_after_all = print_after_all_;
  o.print_before.assign(print_before_.begin(), print_before_.end());
  o.print_after.assign(print_after_.begin(), print_after_.end());
  o.print_after_change = print_after_change_;
  o.dump_dir = dump_dir_;
  o.time_passes = time_passes_;
  o.disable_passes.assign(disable_passes_.begin(), disable_passes_.end());
  o.print_statistics = statistics_;
  return o;
}

}  // namespace memra::tools
