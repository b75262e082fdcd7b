# Third-party dependencies. abseil, LLVM Support and ICU are linked statically so that the binaries
# built here also run on the GPU machine, which has none of them installed.

set(MEMRA_LIBDIR /usr/lib/x86_64-linux-gnu)

# --- abseil (Debian libabsl-dev ships .a archives next to the .so files) ---
file(GLOB MEMRA_ABSL_ARCHIVES ${MEMRA_LIBDIR}/libabsl_*.a)
if(NOT MEMRA_ABSL_ARCHIVES)
  message(FATAL_ERROR "abseil static archives not found; run scripts/setup.sh (libabsl-dev)")
endif()
add_library(memra_absl INTERFACE)
target_link_libraries(memra_absl INTERFACE
  -Wl,--start-group ${MEMRA_ABSL_ARCHIVES} -Wl,--end-group Threads::Threads)
find_package(Threads REQUIRED)

# --- LLVM 14 ADT/Support (Debian llvm-14-dev), static ---
set(MEMRA_LLVM_ROOT /usr/lib/llvm-14 CACHE PATH "LLVM 14 install prefix")
if(NOT EXISTS ${MEMRA_LLVM_ROOT}/lib/libLLVMSupport.a)
  message(FATAL_ERROR "LLVM 14 Support not found under ${MEMRA_LLVM_ROOT}; run scripts/setup.sh")
endif()
add_library(memra_llvm INTERFACE)
target_include_directories(memra_llvm SYSTEM INTERFACE ${MEMRA_LLVM_ROOT}/include)
target_link_libraries(memra_llvm INTERFACE
  ${MEMRA_LLVM_ROOT}/lib/libLLVMSupport.a ${MEMRA_LLVM_ROOT}/lib/libLLVMDemangle.a
  ${MEMRA_LIBDIR}/libz.a ${MEMRA_LIBDIR}/libtinfo.a ${CMAKE_DL_LIBS} rt)

# --- ICU (Unicode categories, regex, NFC for the tokenizer), static ---
add_library(memra_icu INTERFACE)
target_link_libraries(memra_icu INTERFACE
  ${MEMRA_LIBDIR}/libicui18n.a ${MEMRA_LIBDIR}/libicuuc.a ${MEMRA_LIBDIR}/libicudata.a
  ${CMAKE_DL_LIBS})

# --- GoogleTest ---
if(MEMRA_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()

# --- LLVM lit, FileCheck, not, split-file (Debian llvm-14-tools) for the *.mir RUN-line tests ---
if(MEMRA_BUILD_TESTS)
  # Debian's python3 (the one llvm-14-tools' lit is packaged for) before any other on PATH.
  find_program(MEMRA_PYTHON NAMES python3 HINTS /usr/bin)
  find_file(MEMRA_LIT lit.py PATHS ${MEMRA_LLVM_ROOT}/build/utils/lit NO_DEFAULT_PATH)
  find_program(MEMRA_FILECHECK FileCheck PATHS ${MEMRA_LLVM_ROOT}/bin NO_DEFAULT_PATH)
  find_program(MEMRA_NOT not PATHS ${MEMRA_LLVM_ROOT}/bin NO_DEFAULT_PATH)
  find_program(MEMRA_SPLIT_FILE split-file PATHS ${MEMRA_LLVM_ROOT}/bin NO_DEFAULT_PATH)
  foreach(var MEMRA_PYTHON MEMRA_LIT MEMRA_FILECHECK MEMRA_NOT MEMRA_SPLIT_FILE)
    if(NOT ${var} OR NOT EXISTS "${${var}}")
      message(FATAL_ERROR "${var} not found (${${var}}): the *.mir tests need python3 and LLVM lit "
        "(${MEMRA_LLVM_ROOT}/build/utils/lit/lit.py), FileCheck, not and split-file "
        "(${MEMRA_LLVM_ROOT}/bin); run scripts/setup.sh (python3, llvm-14-tools), "
        "or configure with -DMEMRA_BUILD_TESTS=OFF")
    endif()
  endforeach()
endif()

# --- CUDA (optional: without it everything CPU-side still builds and tests) ---
set(MEMRA_HAVE_CUDA OFF)
if(MEMRA_ENABLE_CUDA)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(MEMRA_HAVE_CUDA ON)
    message(STATUS "memra: CUDA ${CUDAToolkit_VERSION} found, building the CUDA backend")
  else()
    message(STATUS "memra: CUDA toolkit not found, CPU-only build")
  endif()
endif()

# Collects the .cc files of a folder (recursively, skipping tests) into one library target.
function(memra_folder_library name)
  cmake_parse_arguments(ARG "" "" "DEPS;EXCLUDE" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  foreach(ex ${ARG_EXCLUDE})
    list(FILTER srcs EXCLUDE REGEX "${ex}")
  endforeach()
  list(FILTER srcs EXCLUDE REGEX "_test\\.cc$")
  list(FILTER srcs EXCLUDE REGEX "_fuzz\\.cc$")
  if(srcs)
    add_library(${name} STATIC ${srcs})
    target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} PUBLIC ${ARG_DEPS} memra_absl memra_llvm)
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} INTERFACE ${ARG_DEPS} memra_absl memra_llvm)
  endif()
endfunction()
