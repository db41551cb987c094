// The bit layouts of GPTQ and AWQ 4-bit tensors (shapes: loader/int4_checkpoint.h), both ways:
// the loader unpacks, make-model's writer packs. Codes and zero points are one value per byte,
// codes as q[n, k] (the [out, in] order of HF linear weights), zeros as z[n, g].
// Independent of this file, tests/reference/int4_ref.py implements the same layouts in numpy
// from the format descriptions; the tests check one against the other.
#pragma once
#include <cstdint>

namespace nanovllm {

// AutoAWQ's nibble order: nibble i of a packed int32 holds column 8c + kAwqOrder[i].
inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// GPTQ qweight I32 [K/8, N] -> q [N, K]: nibble j of qweight[i, n] is q[n, 8i + j].
void gptq_unpack_qweight(const int32_t* qweight, int64_t K, int64_t N, uint8_t* q);
void gptq_pack_qweight(const uint8_t* q, int64_t N, int64_t K, int32_t* qweight);
// AWQ qweight I32 [K, N/8] -> q [N, K]: nibble i of qweight[k, c] is q[8c + kAwqOrder[i], k].
void awq_unpack_qweight(const int32_t* qweight, int64_t K, int64_t N, uint8_t* q);
void awq_pack_qweight(const uint8_t* q, int64_t N, int64_t K, int32_t* qweight);
// qzeros I32 [G, N/8] -> z [N, G]: sequential nibbles (GPTQ) or kAwqOrder (AWQ), plus `offset`
// (GPTQ v1 stores zero - 1: offset 1, so a stored 15 reads as 16; else 0). Packing subtracts
// it and keeps the low 4 bits.
void unpack_qzeros(const int32_t* qzeros, int64_t G, int64_t N, bool awq, int offset, uint8_t* z);
void pack_qzeros(const uint8_t* z, int64_t N, int64_t G, bool awq, int offset, int32_t* qzeros);

}  // namespace nanovllm
