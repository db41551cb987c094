// Quantized-linear kernels for AVX2 without VNNI (qgemm_avx2_body.h).
// Every header is included before the target pragma, so no inline library code is compiled for
// this ISA (the linker could otherwise pick that copy for the whole program).
#include <immintrin.h>

#include <cstring>
#include <type_traits>  // qgemm_avx2_body.h's std::integral_constant

#include "kernels/cpu/qgemm_kernels.h"

// clang ignores `#pragma GCC target`: there the target attribute goes on every function
// declared below (templates included), the same ISA on the same functions.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,f16c")
#endif
#define NV_QVNNI 0
#define NV_QENTRY qrows_avx2
#include "kernels/cpu/qgemm_avx2_body.h"
#if defined(__clang__)
#pragma clang attribute pop
#endif
