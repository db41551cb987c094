#include "kernels/cpu/elementwise.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/rowops.h"
#include "kernels/cpu/simd.h"

namespace nanovllm::cpu {

namespace {
// Elements per parallel chunk (at least): smaller ops run on the caller (thread_pool.h).
constexpr int64_t kMinChunkElems = 16384;

// Norm weights are tiny ([H] or [D]); converting them per call keeps kernels dtype-agnostic.
std::vector<float> weights_f32(const Tensor& w) { return to_f32_vector(w); }
}  // namespace

void embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, Tensor& out,
               float scale, ThreadPool& pool) {
  const int64_t T = ids.numel(), H = table.size(1), V = table.size(0);
  const int32_t* id = ids.data<int32_t>();
  float* o = out.data<float>();
  for (int64_t t = 0; t < T; ++t) {
    int64_t r = int64_t(id[t]) - vocab_start;
    if (r < 0 || r >= V) {
      std::memset(o + t * H, 0, size_t(H) * 4);
      continue;
    }
    convert_to_f32(static_cast<const char*>(table.raw()) + size_t(r * H) * dtype_size(table.dtype()),
                   table.dtype(), o + t * H, H);
    if (scale != 1.f) scale_f32(scale, o + t * H, int(H));
  }
  (void)pool;
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out, ThreadPool& pool) {
  const int64_t H = w.numel(), T = x.numel() / H;
  auto wf = weights_f32(w);
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  pool.parallel_for(T, [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) rms_row(xp + t * H, wf.data(), eps, op + t * H, H);
  }, grain_for_work(H, kMinChunkElems));
}

void add_rms_norm(Tensor& x, Tensor& residual, const Tensor& w, float eps, ThreadPool& pool) {
  const int64_t H = w.numel(), T = x.numel() / H;
  auto wf = weights_f32(w);
  float* xp = x.data<float>();
  float* rp = residual.data<float>();
  pool.parallel_for(T, [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) {
      float* r = rp + t * H;
      float* xr = xp + t * H;
      axpy_f32(1.f, xr, r, int(H));  // residual += x (fma(1, x, r) == x + r exactly)
      rms_row(r, wf.data(), eps, xr, H);
    }
  }, grain_for_work(H, kMinChunkElems));
}

void silu_and_mul(const Tensor& gate_up, Tensor& out, ThreadPool& pool) {
  const int64_t I = out.size(-1), T = I ? out.numel() / I : 0;
  const float* g = gate_up.data<float>();
  float* o = out.data<float>();
  pool.parallel_for(T, [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) {
      const float* gr = g + t * 2 * I;
      const float* ur = gr + I;
      float* orow = o + t * I;
      silu_mul_row(gr, ur, orow, I);
    }
  }, grain_for_work(I, kMinChunkElems));
}

// gelu_pytorch_tanh(g) * u in f32 (Gemma's MLP). tanh in f32 like PyTorch's f32 kernel; the MLP
// is not the hot path of a decode step (the linears are), so no vector form.
void gelu_tanh_and_mul(const Tensor& gate_up, Tensor& out, ThreadPool& pool) {
  const int64_t I = out.size(-1), T = I ? out.numel() / I : 0;
  const float* g = gate_up.data<float>();
  float* o = out.data<float>();
  pool.parallel_for(T, [&](int64_t a, int64_t b) {
    constexpr float kC = 0.7978845608028654f;  // sqrt(2 / pi)
    for (int64_t t = a; t < b; ++t) {
      const float* gr = g + t * 2 * I;
      const float* ur = gr + I;
      float* orow = o + t * I;
      for (int64_t i = 0; i < I; ++i) {
        const float x = gr[i];
        orow[i] = 0.5f * x * (1.f + std::tanh(kC * (x + 0.044715f * x * x * x))) * ur[i];
      }
    }
  }, grain_for_work(I, kMinChunkElems));
}

void qk_norm_rope(Tensor& qkv, const Tensor& positions, const Tensor* q_norm, const Tensor* k_norm,
                  float eps, const Tensor& cos_sin, const AttentionParams& p, ThreadPool& pool) {
  const int D = p.head_dim, Hq = p.num_q_heads, Hkv = p.num_kv_heads, half = D / 2;
  const int64_t row = int64_t(Hq + 2 * Hkv) * D, T = qkv.numel() / row;
  const int64_t max_pos = cos_sin.size(0);
  std::vector<float> qn, kn;
  if (q_norm) qn = weights_f32(*q_norm);
  if (k_norm) kn = weights_f32(*k_norm);
  float* base = qkv.data<float>();
  const int32_t* pos = positions.data<int32_t>();
  const float* cs = cos_sin.data<float>();
  pool.parallel_for(T, [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) {
      // The contract's defensive rule (kernels/README.md): a position outside the table leaves
      // the token's q/k normed but not rotated, as on CUDA. validate_batch rejects such batches.
      const bool rotate = pos[t] >= 0 && pos[t] < max_pos;
      const float* c = cs + (rotate ? int64_t(pos[t]) : 0) * D;
      const float* s = c + half;
      for (int h = 0; h < Hq + Hkv; ++h) {
        float* v = base + t * row + int64_t(h) * D;
        const std::vector<float>& nw = h < Hq ? qn : kn;
        if (!nw.empty()) rms_row(v, nw.data(), eps, v, D);
        if (!rotate) continue;
        rope_row(v, c, s, half);
      }
    }
  }, grain_for_work(row, kMinChunkElems));
}

void gather_rows(const Tensor& x, const Tensor& idx, Tensor& out) {
  const int64_t S = idx.numel(), T = x.size(0);
  const size_t rb = T ? x.nbytes() / size_t(T) : 0;
  const int32_t* ip = idx.data<int32_t>();
  for (int64_t i = 0; i < S; ++i) {
    char* dst = static_cast<char*>(out.raw()) + size_t(i) * rb;
    if (ip[i] < 0 || ip[i] >= T)  // defensive rule: an index outside x gives a zero row
      std::memset(dst, 0, rb);
    else
      std::memcpy(dst, static_cast<const char*>(x.raw()) + size_t(ip[i]) * rb, rb);
  }
}

void add_inplace(Tensor& a, const Tensor& b) {
  float* ap = a.data<float>();
  const float* bp = b.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i) ap[i] += bp[i];
}

}  // namespace nanovllm::cpu
