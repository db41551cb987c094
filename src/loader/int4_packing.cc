// GPTQ / AWQ nibble layouts (loader/int4_packing.h). Packed words are read and written as
// uint32 so the top nibble's shift is well defined.
#include "loader/int4_packing.h"

#include <cstring>

namespace nanovllm {

namespace {

// pos[j]: the nibble that holds column 8c + j (AWQ: the inverse of kAwqOrder; GPTQ: j).
struct NibblePos {
  int pos[8];
  explicit NibblePos(bool awq) {
    for (int i = 0; i < 8; ++i) pos[awq ? kAwqOrder[i] : i] = i;
  }
};

uint32_t word(const int32_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}
void put(int32_t* p, uint32_t w) { std::memcpy(p, &w, 4); }

}  // namespace

void gptq_unpack_qweight(const int32_t* qweight, int64_t K, int64_t N, uint8_t* q) {
  for (int64_t i = 0; i < K / 8; ++i)
    for (int64_t n = 0; n < N; ++n) {
      const uint32_t w = word(qweight + i * N + n);
      for (int j = 0; j < 8; ++j) q[n * K + 8 * i + j] = uint8_t((w >> (4 * j)) & 15u);
    }
}

void gptq_pack_qweight(const uint8_t* q, int64_t N, int64_t K, int32_t* qweight) {
  for (int64_t i = 0; i < K / 8; ++i)
    for (int64_t n = 0; n < N; ++n) {
      uint32_t w = 0;
      for (int j = 0; j < 8; ++j) w |= uint32_t(q[n * K + 8 * i + j] & 15u) << (4 * j);
      put(qweight + i * N + n, w);
    }
}

void awq_unpack_qweight(const int32_t* qweight, int64_t K, int64_t N, uint8_t* q) {
  const NibblePos p(true);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < N / 8; ++c) {
      const uint32_t w = word(qweight + k * (N / 8) + c);
      for (int j = 0; j < 8; ++j) q[(8 * c + j) * K + k] = uint8_t((w >> (4 * p.pos[j])) & 15u);
    }
}

void awq_pack_qweight(const uint8_t* q, int64_t N, int64_t K, int32_t* qweight) {
  const NibblePos p(true);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < N / 8; ++c) {
      uint32_t w = 0;
      for (int j = 0; j < 8; ++j) w |= uint32_t(q[(8 * c + j) * K + k] & 15u) << (4 * p.pos[j]);
      put(qweight + k * (N / 8) + c, w);
    }
}

void unpack_qzeros(const int32_t* qzeros, int64_t G, int64_t N, bool awq, int offset, uint8_t* z) {
  const NibblePos p(awq);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t c = 0; c < N / 8; ++c) {
      const uint32_t w = word(qzeros + g * (N / 8) + c);
      for (int j = 0; j < 8; ++j) z[(8 * c + j) * G + g] = uint8_t(((w >> (4 * p.pos[j])) & 15u) + offset);
    }
}

void pack_qzeros(const uint8_t* z, int64_t N, int64_t G, bool awq, int offset, int32_t* qzeros) {
  const NibblePos p(awq);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t c = 0; c < N / 8; ++c) {
      uint32_t w = 0;
      for (int j = 0; j < 8; ++j)
        w |= (uint32_t(z[(8 * c + j) * G + g] - offset) & 15u) << (4 * p.pos[j]);
      put(qzeros + g * (N / 8) + c, w);
    }
}

}  // namespace nanovllm
