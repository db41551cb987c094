// Quantized-linear kernels for AVX2 with AVX-VNNI (qgemm_avx2_body.h).
// Every header is included before the target pragma, so no inline library code is compiled for
// this ISA (the linker could otherwise pick that copy for the whole program).
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/qgemm_kernels.h"

#pragma GCC target("avx2,fma,f16c,avxvnni")
#define NV_QVNNI 1
#define NV_QENTRY qrows_avx_vnni
#include "kernels/cpu/qgemm_avx2_body.h"
