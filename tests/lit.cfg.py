# -*- Python -*-
# LLVM lit configuration for memra's RUN-line tests: every tests/**/*.mir (outside data/ and
# Inputs/ folders) is one test whose `// RUN:` lines lit runs in its internal shell.
# The build's tests/lit.site.cfg.py (configured from lit.site.cfg.py.in) sets the tool paths and
# then loads this file; run lit on the build folder, not on this source folder:
#   python3 /usr/lib/llvm-14/build/utils/lit/lit.py -sv build/tests                    (all)
#   python3 /usr/lib/llvm-14/build/utils/lit/lit.py -sv build/tests/passes/dce.mir     (one)
import os

import lit.formats
import lit.llvm
from lit.llvm.subst import ToolSubst

config.name = 'memra'
if not hasattr(config, 'memra_bin'):
    lit_config.fatal('no site configuration: run lit on the build folder (build/tests), whose '
                     'lit.site.cfg.py CMake writes from tests/lit.site.cfg.py.in')

# The internal shell: pipelines, &&, ||, redirections and lit's builtins (cd, mkdir, rm, diff,
# echo, ...); no bash subshells, $(...) or <(...). Use %t for temporary files and `not` for commands
# that must fail. pipefail is on (lit's default).
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = ['.mir']
config.excludes = ['data', 'Inputs']  # inputs, not tests (tests/CMakeLists.txt skips them too)
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = config.memra_test_exec_root  # %t lives under <build>/tests/<dir>/Output/

lit.llvm.initialize(lit_config, config)
llvm_config = lit.llvm.llvm_config
config.available_features.discard('shell')  # LLVMConfig assumes bash on Linux; we do not
# Tool substitutions (lit's ToolSubst) replace the tool name only as a word of its own, not
# after '/', '.', '-', '\\', '^', '<' nor before '-', '.': paths that contain `memra` (a checkout
# in a folder named memra) stay intact. %s, %t, %S, %p, ... are lit's own, expanded first.
llvm_config.add_tool_substitutions([
    ToolSubst('memra', command=config.memra_bin, unresolved='fatal'),
    ToolSubst('FileCheck', command=config.filecheck, unresolved='fatal'),
    ToolSubst('not', command=config.llvm_not, unresolved='fatal'),
    ToolSubst('split-file', command=config.split_file, unresolved='fatal'),
])

if not os.path.exists(config.memra_bin):
    lit_config.fatal('%s is not built: cmake --build <build> --target memra' % config.memra_bin)
