// The interface between the two halves of MoeGemm.cu's host emulation (moegemm_run.sh):
// MoeGemmEmuConfig.cc, compiled once per module key, + MoeGemmEmuLaunch.cc (the kernels over
// CudaHostEmulation.h, which cannot share a translation unit with the host headers, and their
// registry) and MoeGemmEmuMain.cc (cases, MoeGemm.h's launches and binds, reference).
#pragma once

#include <string>

using MgEmuKernel = void (*)(const void*);
// nullptr when the emulation has no such "<module key>::<entry>".
MgEmuKernel MgEmuFind(const std::string& key);
// Runs the kernel over grid x block host threads (one block at a time); params: its struct.
void MgEmuLaunch(const std::string& key, unsigned grid, unsigned block, const void* params);
