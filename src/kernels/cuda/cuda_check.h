// Error macros for CUDA runtime and cuBLASLt calls: a failure throws nanovllm::Error whose message
// is the library's own error name and string; the failing call and file:line are its where().
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "util/check.h"

#define CUDA_CHECK(call)                                                                  \
  do {                                                                                    \
    cudaError_t _nv_e = (call);                                                           \
    if (_nv_e != cudaSuccess)                                                             \
      ::nanovllm::detail::fail(__FILE__, __LINE__, "CUDA call failed: " #call, "CUDA error ", \
                               cudaGetErrorName(_nv_e), ": ", cudaGetErrorString(_nv_e)); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                  \
  do {                                                                                      \
    cublasStatus_t _nv_s = (call);                                                          \
    if (_nv_s != CUBLAS_STATUS_SUCCESS)                                                     \
      ::nanovllm::detail::fail(__FILE__, __LINE__, "cuBLAS call failed: " #call, "cuBLAS status ", \
                               int(_nv_s), " (", cublasLtGetStatusName(_nv_s), ": ",        \
                               cublasLtGetStatusString(_nv_s), ")");                        \
  } while (0)

// Checks the launch of the kernel just issued (configuration errors surface here; faults
// inside the kernel surface at the next synchronizing call).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
