// GCC 12's _mm512_reduce_add_ps triggers a false -Wmaybe-uninitialized inside its own header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/bf16_dot_probe.h"
#include "kernels/cpu/onednn_gemm.h"
#include "kernels/cpu/simd.h"

extern "C" void openblas_set_num_threads(int);

namespace nanovllm::cpu {

namespace {

constexpr int kGemvMaxRows = 8;     // rows of x per streaming-kernel call (accumulators)
constexpr int kStreamMaxRows = 64;  // above this, BLAS (compute-bound; panels amortize)
constexpr int64_t kRowBlock = 32;  // weight rows per tile: 32 x K bf16 stays in L2
constexpr int64_t kStreamBlockRows = 64;  // x rows per pass over the weights (tiled streaming path)
// BF16 weights go to oneDNN from this many rows where the CPU multiplies bf16 faster than f32
// (bf16_dot_probe.h): on AMD Zen 4 1.5-2x the exact f32 streaming kernel from M = 16
// (docs/perf.md; make run +24%); below, decode batches stay exact.
constexpr int kOnednnMinRows = 16;
// A parallel chunk holds at least this many multiply-adds (~5-10 us of streaming): tiny models
// (stories260K: K = 64) then run their linears on one thread instead of paying hand-offs.
constexpr int64_t kMinChunkMacs = int64_t(1) << 17;

// ---------------------------------------------------------------------------------------
// Streaming kernel: out[m, n] = sum_k x[m, k] * w[n, k] for n in [n0, n1), M <= 8 rows of x.
// Each weight row is read exactly once (the memory-bound term); x stays in L1/L2.
// ---------------------------------------------------------------------------------------
template <class WT>
NV_TARGET_AVX512 inline __m512 wload512(const WT* p) {
  if constexpr (std::is_same_v<WT, float>) return load16_f32(p);
  else return load16_bf16(p);
}
template <class WT>
NV_TARGET_AVX512 inline __m512 wload512_masked(const WT* p, __mmask16 m) {
  if constexpr (std::is_same_v<WT, float>) {
    return _mm512_maskz_loadu_ps(m, p);
  } else {
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

constexpr int kTwoRowMinM = 4;
template <int M, class WT>
NV_TARGET_AVX512 void gemv_rows_512(const float* x, const WT* w, float* out, int64_t K, int64_t N,
                                    int64_t n0, int64_t n1) {
  const int64_t kv = K / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (K - kv)) - 1);
  int64_t n = n0;
  // Two rows at a time only where compute, not memory, bounds the kernel (M > 4): for small M
  // one row after another keeps one sequential stream per thread (see gemv1_bf16_512).
  for (; M > kTwoRowMinM && n + 2 <= n1; n += 2) {
    const WT* w0 = w + n * K;
    const WT* w1 = w0 + K;
    __m512 a0[M], a1[M];
    for (int m = 0; m < M; ++m) a0[m] = a1[m] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kv; k += 16) {
      __m512 v0 = wload512(w0 + k), v1 = wload512(w1 + k);
      for (int m = 0; m < M; ++m) {
        __m512 xv = _mm512_loadu_ps(x + m * K + k);
        a0[m] = _mm512_fmadd_ps(v0, xv, a0[m]);
        a1[m] = _mm512_fmadd_ps(v1, xv, a1[m]);
      }
    }
    if (tail) {
      __m512 v0 = wload512_masked(w0 + kv, tail), v1 = wload512_masked(w1 + kv, tail);
      for (int m = 0; m < M; ++m) {
        __m512 xv = _mm512_maskz_loadu_ps(tail, x + m * K + kv);
        a0[m] = _mm512_fmadd_ps(v0, xv, a0[m]);
        a1[m] = _mm512_fmadd_ps(v1, xv, a1[m]);
      }
    }
    for (int m = 0; m < M; ++m) {
      out[m * N + n] = _mm512_reduce_add_ps(a0[m]);
      out[m * N + n + 1] = _mm512_reduce_add_ps(a1[m]);
    }
  }
  for (; n < n1; ++n) {
    const WT* w0 = w + n * K;
    __m512 a0[M];
    for (int m = 0; m < M; ++m) a0[m] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kv; k += 16) {
      if constexpr (M <= kTwoRowMinM)  // bandwidth-bound: simd.h's software lead
        _mm_prefetch(reinterpret_cast<const char*>(w0 + k) + kStreamPrefetchBytes, _MM_HINT_T0);
      __m512 v0 = wload512(w0 + k);
      for (int m = 0; m < M; ++m) a0[m] = _mm512_fmadd_ps(v0, _mm512_loadu_ps(x + m * K + k), a0[m]);
    }
    if (tail) {
      __m512 v0 = wload512_masked(w0 + kv, tail);
      for (int m = 0; m < M; ++m)
        a0[m] = _mm512_fmadd_ps(v0, _mm512_maskz_loadu_ps(tail, x + m * K + kv), a0[m]);
    }
    for (int m = 0; m < M; ++m) out[m * N + n] = _mm512_reduce_add_ps(a0[m]);
  }
}

// BF16 weights, K % 32 == 0, AVX-512: every M (the decode hot path at M == 1). One 64-byte load
// carries 32 weights; dword i holds weights 2i (low half) and 2i+1 (high half), so a shift and a
// mask give both as f32 without widening converts. x is pre-split to match, per row:
// xs[b*32 + i] = x[32b + 2i], xs[b*32 + 16 + i] = x[32b + 2i + 1].
// Each (x row, weight row) dot has four accumulators (even / odd weights of each 32-weight half
// of a 64-weight step; a K % 64 == 32 tail adds to the first two) summed as ((a0 + a1) + (a2 +
// a3)), then one horizontal reduction: the same operations in the same order for every MR, so a
// row's output bits do not depend on how many rows share the call (docs/determinism.md). Before,
// M == 1 had these four accumulators and M >= 2 one, and a request's logits changed in the last
// bits with its batch.
// Rows are read one after another, so each thread reads one sequential stream: the hardware
// prefetcher then runs at full bandwidth. (Interleaving 4 rows -- 4 streams -- plus software
// prefetch measured 19-20 GB/s; one stream 26-30 GB/s on the same machine, docs/perf.md.)
// The stream is also prefetched kStreamPrefetchBytes ahead in software (simd.h says why) where
// memory bounds the kernel (MR <= 4 x rows per weight row).
template <int MR>
NV_TARGET_AVX512 void gemv_split_bf16_512(const float* xs, const uint16_t* w, float* out, int64_t K,
                                          int64_t N, int64_t n0, int64_t n1) {
  const __m512i hi_mask = _mm512_set1_epi32(int(0xFFFF0000u));
  const int64_t k64 = K / 64 * 64;
  for (int64_t n = n0; n < n1; ++n) {
    const uint16_t* row = w + n * K;
    // Four independent accumulators per x row hide the FMA latency (4 cycles) behind the loads.
    __m512 a0[MR], a1[MR], a2[MR], a3[MR];
    for (int m = 0; m < MR; ++m) a0[m] = a1[m] = a2[m] = a3[m] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k < k64; k += 64) {
      const char* ahead = reinterpret_cast<const char*>(row + k) + kStreamPrefetchBytes;
      _mm_prefetch(ahead, _MM_HINT_T0);
      _mm_prefetch(ahead + 64, _MM_HINT_T0);
      const __m512i v0 = _mm512_loadu_si512(row + k), v1 = _mm512_loadu_si512(row + k + 32);
      const __m512 w0 = _mm512_castsi512_ps(_mm512_slli_epi32(v0, 16));
      const __m512 w1 = _mm512_castsi512_ps(_mm512_and_si512(v0, hi_mask));
      const __m512 w2 = _mm512_castsi512_ps(_mm512_slli_epi32(v1, 16));
      const __m512 w3 = _mm512_castsi512_ps(_mm512_and_si512(v1, hi_mask));
      for (int m = 0; m < MR; ++m) {
        const float* xm = xs + m * K + k;
        a0[m] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xm), a0[m]);
        a1[m] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xm + 16), a1[m]);
        a2[m] = _mm512_fmadd_ps(w2, _mm512_loadu_ps(xm + 32), a2[m]);
        a3[m] = _mm512_fmadd_ps(w3, _mm512_loadu_ps(xm + 48), a3[m]);
      }
    }
    if (k < K) {  // one 32-wide block left (K % 64 == 32)
      const __m512i v0 = _mm512_loadu_si512(row + k);
      const __m512 w0 = _mm512_castsi512_ps(_mm512_slli_epi32(v0, 16));
      const __m512 w1 = _mm512_castsi512_ps(_mm512_and_si512(v0, hi_mask));
      for (int m = 0; m < MR; ++m) {
        a0[m] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xs + m * K + k), a0[m]);
        a1[m] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xs + m * K + k + 16), a1[m]);
      }
    }
    for (int m = 0; m < MR; ++m)
      out[m * N + n] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0[m], a1[m]), _mm512_add_ps(a2[m], a3[m])));
  }
}

// Rows [n0, n1) of out [M, N] for M <= kGemvMaxRows split x rows (xs [M, K]): up to 4 x rows per
// sweep over a weight row (16 accumulators); a second sweep finds the row in L1.
NV_TARGET_AVX512 void gemv_split_dispatch(const float* xs, const uint16_t* w, float* out, int64_t M,
                                          int64_t K, int64_t N, int64_t n0, int64_t n1) {
  for (int64_t m0 = 0; m0 < M; m0 += 4) {
    const float* x = xs + m0 * K;
    float* o = out + m0 * N;
    switch (std::min<int64_t>(4, M - m0)) {
      case 1: gemv_split_bf16_512<1>(x, w, o, K, N, n0, n1); break;
      case 2: gemv_split_bf16_512<2>(x, w, o, K, N, n0, n1); break;
      case 3: gemv_split_bf16_512<3>(x, w, o, K, N, n0, n1); break;
      default: gemv_split_bf16_512<4>(x, w, o, K, N, n0, n1); break;
    }
  }
}

void split_even_odd(const float* x, float* xs, int64_t K) {
  for (int64_t b = 0; b < K; b += 32)
    for (int i = 0; i < 16; ++i) {
      xs[b + i] = x[b + 2 * i];
      xs[b + 16 + i] = x[b + 2 * i + 1];
    }
}

template <class WT>
NV_TARGET_AVX2 inline __m256 wload256(const WT* p) {
  if constexpr (std::is_same_v<WT, float>) return load8_f32(p);
  else return load8_bf16(p);
}
template <class WT>
inline float wscalar(const WT* p) {
  if constexpr (std::is_same_v<WT, float>) return *p;
  else return bf16_to_f32(*p);
}

// AVX2: each output row sums in four chains of 8 lanes (k blocks of 32: chain j takes
// w[k + 8j .. k + 8j + 8]), whatever M. Why four: one chain waits an FMA latency (4 cycles on
// Zen 3/4) per 8 weights, 16 bytes of bf16 per 4 cycles = ~10 GB/s per core at 2.6 GHz: batch-1
// bf16 decode measured 18.4 tok/s (22 GB/s on 2 cores) against a 32.7 GB/s read pass. Rows go
// in sweeps of up to 3 (12 accumulators + the weight vector fit AVX2's 16 registers; later
// sweeps find the caller's tile of kRowBlock weight rows in L2). Bits per row do not depend on
// M or on the sweep (docs/determinism.md): the order is 32-blocks into the 4 chains, a leftover
// 8-block j into chain j, ((c0 + c1) + (c2 + c3)) reduced by hsum8, then the scalar tail.
template <int R, class WT>
NV_TARGET_AVX2 void gemv_rows_256_sweep(const float* x, const WT* w, float* out, int64_t K,
                                        int64_t N, int64_t n0, int64_t n1) {
  const int64_t k32 = K / 32 * 32, kv = K / 8 * 8;
  for (int64_t n = n0; n < n1; ++n) {
    const WT* wr = w + n * K;
    __m256 c[R][4];
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) c[r][j] = _mm256_setzero_ps();
    for (int64_t k = 0; k < k32; k += 32) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256 v = wload256(wr + k + 8 * j);
#pragma GCC unroll 3
        for (int r = 0; r < R; ++r)
          c[r][j] = _mm256_fmadd_ps(v, _mm256_loadu_ps(x + r * K + k + 8 * j), c[r][j]);
      }
    }
    // Leftover 8-blocks (K % 32 of 8, 16 or 24) into chains 0, 1, 2; constant indices keep
    // the accumulators in registers.
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j) {
      const int64_t k = k32 + 8 * j;
      if (k >= kv) break;
      const __m256 v = wload256(wr + k);
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) c[r][j] = _mm256_fmadd_ps(v, _mm256_loadu_ps(x + r * K + k), c[r][j]);
    }
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) {
      float s = hsum8(_mm256_add_ps(_mm256_add_ps(c[r][0], c[r][1]), _mm256_add_ps(c[r][2], c[r][3])));
      for (int64_t k = kv; k < K; ++k) s += wscalar(wr + k) * x[r * K + k];
      out[r * N + n] = s;
    }
  }
}

template <int M, class WT>
NV_TARGET_AVX2 void gemv_rows_256(const float* x, const WT* w, float* out, int64_t K, int64_t N,
                                  int64_t n0, int64_t n1) {
  for (int m0 = 0; m0 < M; m0 += 3) {
    const float* xr = x + m0 * K;
    float* o = out + m0 * N;
    switch (std::min(3, M - m0)) {
      case 1: gemv_rows_256_sweep<1, WT>(xr, w, o, K, N, n0, n1); break;
      case 2: gemv_rows_256_sweep<2, WT>(xr, w, o, K, N, n0, n1); break;
      default: gemv_rows_256_sweep<3, WT>(xr, w, o, K, N, n0, n1); break;
    }
  }
}

template <class WT>
void gemv_rows_scalar(const float* x, const WT* w, float* out, int64_t M, int64_t K, int64_t N,
                      int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t m = 0; m < M; ++m) {
      float s = 0;
      for (int64_t k = 0; k < K; ++k) s += wscalar(w + n * K + k) * x[m * K + k];
      out[m * N + n] = s;
    }
}

template <class WT>
void gemv_dispatch(const float* x, const WT* w, float* out, int64_t M, int64_t K, int64_t N,
                   int64_t n0, int64_t n1) {
  Isa isa = active_isa();
#define NV_CASE(MM)                                                            \
  case MM:                                                                     \
    if (isa == Isa::Avx512) return gemv_rows_512<MM, WT>(x, w, out, K, N, n0, n1); \
    if (isa == Isa::Avx2) return gemv_rows_256<MM, WT>(x, w, out, K, N, n0, n1);   \
    break;
  switch (M) {
    NV_CASE(1) NV_CASE(2) NV_CASE(3) NV_CASE(4) NV_CASE(5) NV_CASE(6) NV_CASE(7) NV_CASE(8)
    default: break;
  }
#undef NV_CASE
  gemv_rows_scalar<WT>(x, w, out, M, K, N, n0, n1);
}

void blas_threads(ThreadPool& pool) {
  static std::atomic<int> set{-1};
  const int n = pool.active_threads();
  if (set.load() != n) {
    openblas_set_num_threads(n);
    set = n;
  }
}

}  // namespace

void add_bias_rows(const Tensor* bias, float* out, int64_t M, int64_t N) {
  if (!bias) return;
  std::vector<float> b = to_f32_vector(*bias);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) out[m * N + n] += b[size_t(n)];
}

int gemv_max_rows() { return kStreamMaxRows; }  // for F32 weights
int onednn_min_rows() {
  return bf16_dot_probe().bf16_matmul_wins() ? kOnednnMinRows : std::numeric_limits<int>::max();
}

void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out, ThreadPool& pool,
            LinearPath lp) {
  // Shapes and dtypes were checked by the op contract (kernels/op_contract.cc): x, out F32.
  const int64_t K = w.size(1), N = w.size(0);
  const int64_t M = x.numel() / K;
  if (M == 0) return;
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  const DType wd = w.dtype();

  const bool autopath = lp == LinearPath::kAuto;
  // Prefill-sized M with BF16 weights: oneDNN's bf16 matmul (AVX-512 BF16 / AMX), where bf16
  // multiplies outrun f32 FMA; elsewhere the streaming kernel below (exact, and faster there).
  if (wd == DType::BF16 && (lp == LinearPath::kOnednn || (autopath && M >= onednn_min_rows()))) {
    if (onednn_bf16_linear(x, w, out, pool)) {
      add_bias_rows(bias, op, M, N);
      return;
    }
  }
  // BF16 weights: the streaming kernel at every M (measured faster than converting panels to
  // F32 for sgemm, docs/perf.md). F32 weights: streaming up to kStreamMaxRows, then sgemm.
  // kOnednn falls back to streaming when oneDNN declined.
  bool stream = lp == LinearPath::kStreaming || lp == LinearPath::kOnednn ||
                (autopath && (M <= kStreamMaxRows || wd == DType::BF16));
  if (stream && wd == DType::BF16 && K % 32 == 0 && active_isa() == Isa::Avx512) {
    // x split for the kernel, kSplitRows rows at a time: the buffer stays small (a 16K-token
    // prefill of K = 3072 would otherwise hold 200 MB), and each block's rows still reuse every
    // weight tile from L2; an output row's bits do not depend on the block.
    constexpr int64_t kSplitRows = 256;
    thread_local std::vector<float> xs;
    for (int64_t mb = 0; mb < M; mb += kSplitRows) {
      const int64_t mm = std::min(kSplitRows, M - mb);
      xs.resize(size_t(mm * K));
      for (int64_t m = 0; m < mm; ++m) split_even_odd(xp + (mb + m) * K, xs.data() + m * K, K);
      const float* xsp = xs.data();  // (a thread_local named in the lambda would be the worker's)
      float* ob = op + mb * N;
      // As below: tiles of kRowBlock weight rows, reused from L2 for every chunk of 8 rows of x.
      pool.parallel_for(N, [&](int64_t n0, int64_t n1) {
        if (mm == 1) {  // one sequential stream per thread, no tiles (the decode hot path)
          gemv_split_bf16_512<1>(xsp, w.data<uint16_t>(), ob, K, N, n0, n1);
          return;
        }
        for (int64_t nb = n0; nb < n1; nb += kRowBlock) {
          const int64_t ne = std::min(n1, nb + kRowBlock);
          for (int64_t m0 = 0; m0 < mm; m0 += kGemvMaxRows)
            gemv_split_dispatch(xsp + m0 * K, w.data<uint16_t>(), ob + m0 * N,
                                std::min<int64_t>(kGemvMaxRows, mm - m0), K, N, nb, ne);
        }
      }, grain_for_work(mm * K, kMinChunkMacs, kRowBlock));
    }
    add_bias_rows(bias, op, M, N);
    return;
  }
  if (stream && wd != DType::F16) {
    // Tiles of kRowBlock weight rows: DRAM reads each weight once per block of x rows; the tile
    // is reused from L2 for every chunk of 8 rows of x. Blocks of kStreamBlockRows x rows
    // (64 x K f32: 256 KB at K = 1024) keep x in L2 too: a 512-row prefill's x (2 MB at
    // K = 1024) came from L3 for every tile, 49 GFLOP/s against 108 at M = 64 (AVX2 Zen 4,
    // bench_hw_limits; 83-103 with blocks. The whole 512-token prefill measured the same before
    // and after, docs/perf.md). A row's bits do not depend on its block.
    for (int64_t mb = 0; mb < M; mb += kStreamBlockRows) {
      const int64_t mbe = std::min(M, mb + kStreamBlockRows);
      pool.parallel_for(N, [&](int64_t n0, int64_t n1) {
        for (int64_t nb = n0; nb < n1; nb += kRowBlock) {
          int64_t ne = std::min(n1, nb + kRowBlock);
          for (int64_t m0 = mb; m0 < mbe; m0 += kGemvMaxRows) {
            int64_t mm = std::min<int64_t>(kGemvMaxRows, mbe - m0);
            if (wd == DType::F32)
              gemv_dispatch<float>(xp + m0 * K, w.data<float>(), op + m0 * N, mm, K, N, nb, ne);
            else
              gemv_dispatch<uint16_t>(xp + m0 * K, w.data<uint16_t>(), op + m0 * N, mm, K, N, nb, ne);
          }
        }
      }, grain_for_work((mbe - mb) * K, kMinChunkMacs, kRowBlock));
    }
    add_bias_rows(bias, op, M, N);
    return;
  }

  blas_threads(pool);
  pool.park();  // OpenBLAS runs on its own threads
  if (wd == DType::F32) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(N), int(K), 1.f, xp, int(K),
                w.data<float>(), int(K), 0.f, op, int(N));
  } else {
    // Convert row panels of w to f32 (parallel), then one sgemm per panel into out[:, n0:n1].
    const int64_t panel = std::max<int64_t>(64, (int64_t(1) << 20) / K);
    std::vector<float> buf(size_t(std::min(panel, N) * K));
    for (int64_t n0 = 0; n0 < N; n0 += panel) {
      int64_t rows = std::min(panel, N - n0);
      const uint16_t* src = w.data<uint16_t>() + n0 * K;
      pool.parallel_for(rows * K, [&](int64_t a, int64_t b) {
        convert_to_f32(src + a, wd, buf.data() + a, b - a);
      }, 4096);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(rows), int(K), 1.f, xp,
                  int(K), buf.data(), int(K), 0.f, op + n0, int(N));
    }
  }
  add_bias_rows(bias, op, M, N);
}

}  // namespace nanovllm::cpu
