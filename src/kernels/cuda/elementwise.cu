// Row-wise and elementwise kernels: embedding, RMSNorm (plain and fused residual add),
// SiLU-and-mul, KV store, row gather, add, dtype conversion, bias add. Each has a 16-byte
// vectorized instantiation, used when the row length and every pointer allow it, and a
// scalar fallback (V = 1).
#include <algorithm>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/kernels.h"

namespace nanovllm::cuda {
namespace {

// True when every (pointer, element size) is aligned to vec elements and n % vec == 0.
bool can_vec(int vec, int64_t n, std::initializer_list<std::pair<const void*, size_t>> ptrs) {
  if (n % vec) return false;
  for (auto& p : ptrs)
    if (reinterpret_cast<uintptr_t>(p.first) % (p.second * vec)) return false;
  return true;
}

int row_threads(int64_t work) {  // threads for one block per row, `work` vector slots per row
  int64_t t = (work + 31) / 32 * 32;
  if (t < 32) t = 32;
  if (t > 1024) t = 1024;
  return int(t);
}

dim3 grid1d(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  if (b > 65535 * 32) b = 65535 * 32;  // grid-stride loops cover the rest
  return dim3(unsigned(b));
}

// ---- embedding ------------------------------------------------------------------------
template <class TT, class TO, int V>
__global__ void embedding_kernel(const int32_t* ids, const TT* table, int64_t rows, int64_t H,
                                 int64_t vocab_start, float scale, TO* out) {
  const int64_t t = blockIdx.x;
  const int64_t r = int64_t(ids[t]) - vocab_start;
  const bool in = r >= 0 && r < rows;
  TO* o = out + t * H;
  for (int64_t i = threadIdx.x * V; i < H; i += int64_t(blockDim.x) * V) {
    float v[V];
    if (in) {
      load_f<TT, V>(table + r * H + i, v);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] *= scale;
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = 0.f;
    }
    store_f<TO, V>(o + i, v);
  }
}

// ---- RMSNorm ---------------------------------------------------------------------------
template <class T, class W, int V>
__global__ void rms_norm_kernel(const T* x, const W* w, T* out, int64_t H, float eps) {
  __shared__ float scratch[33];
  const T* xr = x + int64_t(blockIdx.x) * H;
  T* orow = out + int64_t(blockIdx.x) * H;
  float ss = 0.f;
  for (int64_t i = threadIdx.x * V; i < H; i += int64_t(blockDim.x) * V) {
    float v[V];
    load_f<T, V>(xr + i, v);
#pragma unroll
    for (int k = 0; k < V; ++k) ss += v[k] * v[k];
  }
  const float r = rsqrtf(block_sum(ss, scratch) / float(H) + eps);
  for (int64_t i = threadIdx.x * V; i < H; i += int64_t(blockDim.x) * V) {
    float v[V], g[V];
    load_f<T, V>(xr + i, v);
    load_f<W, V>(w + i, g);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = v[k] * r * g[k];
    store_f<T, V>(orow + i, v);
  }
}

// residual += x; x = norm(residual) * w. The norm uses the residual as stored (rounded to T),
// so a later reader of `residual` sees exactly what was normalized. Each thread re-reads only
// the elements it wrote itself, so no extra barrier is needed between the two passes.
template <class T, class W, int V>
__global__ void add_rms_norm_kernel(T* x, T* residual, const W* w, int64_t H, float eps) {
  __shared__ float scratch[33];
  T* xr = x + int64_t(blockIdx.x) * H;
  T* rr = residual + int64_t(blockIdx.x) * H;
  float ss = 0.f;
  for (int64_t i = threadIdx.x * V; i < H; i += int64_t(blockDim.x) * V) {
    float a[V], b[V];
    load_f<T, V>(xr + i, a);
    load_f<T, V>(rr + i, b);
#pragma unroll
    for (int k = 0; k < V; ++k) a[k] = to_f(from_f<T>(a[k] + b[k]));
    store_f<T, V>(rr + i, a);
#pragma unroll
    for (int k = 0; k < V; ++k) ss += a[k] * a[k];
  }
  const float r = rsqrtf(block_sum(ss, scratch) / float(H) + eps);
  for (int64_t i = threadIdx.x * V; i < H; i += int64_t(blockDim.x) * V) {
    float v[V], g[V];
    load_f<T, V>(rr + i, v);
    load_f<W, V>(w + i, g);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = v[k] * r * g[k];
    store_f<T, V>(xr + i, v);
  }
}

// ---- gated activation: act(gate) * up --------------------------------------------------
struct SiluAct {
  __device__ float operator()(float x) const { return x / (1.f + __expf(-x)); }
};
struct GeluTanhAct {  // gelu_pytorch_tanh (Gemma), f32 math
  __device__ float operator()(float x) const {
    return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  }
};

template <class T, int V, class Act>
__global__ void act_and_mul_kernel(const T* gu, T* out, int64_t T_, int64_t I) {
  const int64_t per_row = I / V, n = T_ * per_row;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / per_row, i = (e % per_row) * V;
    float g[V], u[V];
    load_f<T, V>(gu + t * 2 * I + i, g);
    load_f<T, V>(gu + t * 2 * I + I + i, u);
#pragma unroll
    for (int k = 0; k < V; ++k) g[k] = Act()(g[k]) * u[k];
    store_f<T, V>(out + t * I + i, g);
  }
}

// ---- raw row copies (store_kv, gather_rows) ------------------------------------------------
// U is the copy unit (uint4 = 16 bytes, or a 4- / 2-byte word); sizes are in units of U.
template <class U>
__global__ void store_kv_kernel(const U* qkv, int64_t row_units, int64_t k_off, int64_t v_off,
                                int64_t kv_units, const int32_t* slots, int64_t num_slots, U* kc,
                                U* vc) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t];
  if (slot < 0 || slot >= num_slots) return;
  const U* src = qkv + t * row_units;
  for (int64_t i = threadIdx.x; i < kv_units; i += blockDim.x) {
    kc[slot * kv_units + i] = src[k_off + i];
    vc[slot * kv_units + i] = src[v_off + i];
  }
}

template <class U>
__global__ void gather_rows_kernel(const U* x, const int32_t* idx, int64_t row_units,
                                   int64_t num_rows, U* out) {
  const int64_t r = idx[blockIdx.x];
  U* o = out + int64_t(blockIdx.x) * row_units;
  const bool in = r >= 0 && r < num_rows;
  for (int64_t i = threadIdx.x; i < row_units; i += blockDim.x)
    o[i] = in ? x[r * row_units + i] : U{};
}

// ---- elementwise -----------------------------------------------------------------------
template <class T, int V>
__global__ void add_kernel(T* a, const T* b, int64_t nv) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < nv;
       e += int64_t(gridDim.x) * blockDim.x) {
    float x[V], y[V];
    load_f<T, V>(a + e * V, x);
    load_f<T, V>(b + e * V, y);
#pragma unroll
    for (int k = 0; k < V; ++k) x[k] += y[k];
    store_f<T, V>(a + e * V, x);
  }
}

template <class S, class D>
__global__ void convert_kernel(const S* src, D* dst, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    dst[e] = from_f<D>(to_f(src[e]));
}

template <class T, class B>
__global__ void add_bias_kernel(T* out, const B* bias, int64_t n, int64_t N) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    out[e] = from_f<T>(to_f(out[e]) + to_f(bias[e % N]));
}

}  // namespace

void launch_embedding(const int32_t* ids, int64_t T, const void* table, DType table_dt,
                      int64_t rows, int64_t H, int64_t vocab_start, float scale, void* out,
                      DType out_dt, cudaStream_t s) {
  if (T == 0) return;
  NV_CUDA_DISPATCH_ACT(out_dt, TO, NV_CUDA_DISPATCH_FLOAT(table_dt, TT, {
                         const TT* tb = static_cast<const TT*>(table);
                         TO* o = static_cast<TO*>(out);
                         if (can_vec(8, H, {{tb, sizeof(TT)}, {o, sizeof(TO)}}))
                           embedding_kernel<TT, TO, 8><<<unsigned(T), row_threads(H / 8), 0, s>>>(
                               ids, tb, rows, H, vocab_start, scale, o);
                         else
                           embedding_kernel<TT, TO, 1><<<unsigned(T), row_threads(H), 0, s>>>(
                               ids, tb, rows, H, vocab_start, scale, o);
                       }));
  CUDA_CHECK_LAUNCH();
}

void launch_rms_norm(const void* x, const void* w, DType w_dt, void* out, DType act, int64_t T,
                     int64_t H, float eps, cudaStream_t s) {
  if (T == 0) return;
  NV_CUDA_DISPATCH_ACT(
      act, TA, NV_CUDA_DISPATCH_FLOAT(w_dt, TW, {
        const TA* xp = static_cast<const TA*>(x);
        const TW* wp = static_cast<const TW*>(w);
        TA* op = static_cast<TA*>(out);
        if (can_vec(8, H, {{xp, sizeof(TA)}, {wp, sizeof(TW)}, {op, sizeof(TA)}}))
          rms_norm_kernel<TA, TW, 8><<<unsigned(T), row_threads(H / 8), 0, s>>>(xp, wp, op, H, eps);
        else
          rms_norm_kernel<TA, TW, 1><<<unsigned(T), row_threads(H), 0, s>>>(xp, wp, op, H, eps);
      }));
  CUDA_CHECK_LAUNCH();
}

void launch_add_rms_norm(void* x, void* residual, const void* w, DType w_dt, DType act, int64_t T,
                         int64_t H, float eps, cudaStream_t s) {
  if (T == 0) return;
  NV_CUDA_DISPATCH_ACT(act, TA, NV_CUDA_DISPATCH_FLOAT(w_dt, TW, {
                         TA* xp = static_cast<TA*>(x);
                         TA* rp = static_cast<TA*>(residual);
                         const TW* wp = static_cast<const TW*>(w);
                         if (can_vec(8, H, {{xp, sizeof(TA)}, {rp, sizeof(TA)}, {wp, sizeof(TW)}}))
                           add_rms_norm_kernel<TA, TW, 8>
                               <<<unsigned(T), row_threads(H / 8), 0, s>>>(xp, rp, wp, H, eps);
                         else
                           add_rms_norm_kernel<TA, TW, 1>
                               <<<unsigned(T), row_threads(H), 0, s>>>(xp, rp, wp, H, eps);
                       }));
  CUDA_CHECK_LAUNCH();
}

namespace {
template <class Act>
void launch_act_and_mul(const void* gate_up, void* out, DType act, int64_t T, int64_t I, cudaStream_t s) {
  if (T == 0 || I == 0) return;
  NV_CUDA_DISPATCH_ACT(act, TA, {
    const TA* g = static_cast<const TA*>(gate_up);
    TA* o = static_cast<TA*>(out);
    constexpr int V = 16 / sizeof(TA);
    if (can_vec(V, I, {{g, sizeof(TA)}, {o, sizeof(TA)}}))
      act_and_mul_kernel<TA, V, Act><<<grid1d(T * I / V, 256), 256, 0, s>>>(g, o, T, I);
    else
      act_and_mul_kernel<TA, 1, Act><<<grid1d(T * I, 256), 256, 0, s>>>(g, o, T, I);
  });
  CUDA_CHECK_LAUNCH();
}
}  // namespace

void launch_silu_and_mul(const void* gate_up, void* out, DType act, int64_t T, int64_t I,
                         cudaStream_t s) {
  launch_act_and_mul<SiluAct>(gate_up, out, act, T, I, s);
}

void launch_gelu_tanh_and_mul(const void* gate_up, void* out, DType act, int64_t T, int64_t I,
                              cudaStream_t s) {
  launch_act_and_mul<GeluTanhAct>(gate_up, out, act, T, I, s);
}

void launch_store_kv(const void* qkv, DType act, const int32_t* slots, int64_t T, void* k_cache,
                     void* v_cache, int Hq, int Hkv, int D, int64_t num_slots, cudaStream_t s) {
  if (T == 0) return;
  const int64_t es = int64_t(dtype_size(act));
  const int64_t row = int64_t(Hq + 2 * Hkv) * D * es, koff = int64_t(Hq) * D * es,
                voff = int64_t(Hq + Hkv) * D * es, kv = int64_t(Hkv) * D * es;
  auto go = [&](auto unit) {
    using U = decltype(unit);
    const int64_t u = sizeof(U);
    store_kv_kernel<U><<<unsigned(T), 128, 0, s>>>(
        static_cast<const U*>(qkv), row / u, koff / u, voff / u, kv / u, slots, num_slots,
        static_cast<U*>(k_cache), static_cast<U*>(v_cache));
  };
  auto fits = [&](int64_t u) {
    return row % u == 0 && koff % u == 0 && voff % u == 0 && kv % u == 0 &&
           reinterpret_cast<uintptr_t>(qkv) % u == 0 &&
           reinterpret_cast<uintptr_t>(k_cache) % u == 0 &&
           reinterpret_cast<uintptr_t>(v_cache) % u == 0;
  };
  if (fits(16))
    go(uint4{});
  else if (fits(4))
    go(uint32_t{});
  else
    go(uint16_t{});
  CUDA_CHECK_LAUNCH();
}

void launch_gather_rows(const void* x, const int32_t* idx, int64_t S, int64_t row_bytes,
                        int64_t num_rows, void* out, cudaStream_t s) {
  if (S == 0 || row_bytes == 0) return;
  auto go = [&](auto unit) {
    using U = decltype(unit);
    const int64_t units = row_bytes / int64_t(sizeof(U));
    const int threads = std::min(row_threads(units), 256);
    gather_rows_kernel<U><<<unsigned(S), threads, 0, s>>>(static_cast<const U*>(x), idx, units,
                                                          num_rows, static_cast<U*>(out));
  };
  auto fits = [&](int64_t u) {
    return row_bytes % u == 0 && reinterpret_cast<uintptr_t>(x) % u == 0 &&
           reinterpret_cast<uintptr_t>(out) % u == 0;
  };
  if (fits(16))
    go(uint4{});
  else if (fits(4))
    go(uint32_t{});
  else if (fits(2))
    go(uint16_t{});
  else
    go(uint8_t{});
  CUDA_CHECK_LAUNCH();
}

void launch_add_inplace(void* a, const void* b, DType act, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  NV_CUDA_DISPATCH_ACT(act, TA, {
    TA* ap = static_cast<TA*>(a);
    const TA* bp = static_cast<const TA*>(b);
    constexpr int V = 16 / sizeof(TA);
    if (can_vec(V, n, {{ap, sizeof(TA)}, {bp, sizeof(TA)}}))
      add_kernel<TA, V><<<grid1d(n / V, 256), 256, 0, s>>>(ap, bp, n / V);
    else
      add_kernel<TA, 1><<<grid1d(n, 256), 256, 0, s>>>(ap, bp, n);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_convert(const void* src, DType src_dt, void* dst, DType dst_dt, int64_t n,
                    cudaStream_t s) {
  if (n == 0) return;
  NV_CUDA_DISPATCH_FLOAT(src_dt, TS, NV_CUDA_DISPATCH_FLOAT(dst_dt, TD, {
                           convert_kernel<TS, TD><<<grid1d(n, 256), 256, 0, s>>>(
                               static_cast<const TS*>(src), static_cast<TD*>(dst), n);
                         }));
  CUDA_CHECK_LAUNCH();
}

void launch_add_bias(void* out, DType out_dt, const void* bias, DType bias_dt, int64_t T, int64_t N,
                     cudaStream_t s) {
  if (T == 0 || N == 0) return;
  NV_CUDA_DISPATCH_ACT(out_dt, TO, NV_CUDA_DISPATCH_FLOAT(bias_dt, TB, {
                         add_bias_kernel<TO, TB><<<grid1d(T * N, 256), 256, 0, s>>>(
                             static_cast<TO*>(out), static_cast<const TB*>(bias), T * N, N);
                       }));
  CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::cuda
