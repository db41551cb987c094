#include "models/rotary.h"

#include <cmath>

namespace nanovllm {

Tensor make_cos_sin_table(const ModelConfig& c, int max_pos) {
  const int D = c.head_dim, half = D / 2;
  std::vector<double> inv = rope_inv_freq(c);
  const double scale = rope_attention_factor(c);  // YaRN's mscale; 1 otherwise
  NV_CHECK_EQ(int(inv.size()), half, "rope inv_freq size");
  Tensor t = Tensor::empty({max_pos, D}, DType::F32);
  float* p = t.data<float>();
  for (int pos = 0; pos < max_pos; ++pos)
    for (int i = 0; i < half; ++i) {
      // HF computes the angle in f32 (inv_freq f32 times position); do the same so long
      // positions match transformers, then cos/sin in f64.
      float angle = float(pos) * float(inv[size_t(i)]);
      p[int64_t(pos) * D + i] = float(std::cos(double(angle)) * scale);
      p[int64_t(pos) * D + half + i] = float(std::sin(double(angle)) * scale);
    }
  return t;
}

}  // namespace nanovllm
