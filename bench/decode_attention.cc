// Decode attention at long context on the CPU: one decode step's paged attention (one layer)
// for B sequences of L cached keys each, per KV cache type, as time per call and as the bytes
// of K and V it must read per second against this machine's measured read bandwidth (the
// STREAM-like pass of read_pass.h over 1 GiB, the same threads). The cache's blocks are placed
// in a random order, as after the block manager has churned; the query shape is Qwen3-0.6B's
// (16 query heads, 8 KV heads of 128) unless given.
//
// --layers N gives the step N layers, each with its own cache, run one after another as a model
// does; the times are per layer (the step's time / N). With one layer a small batch's cache stays
// in the last-level cache from call to call (260 MiB on the Emerald Rapids VM), which a model's
// step, reading every layer's cache, does not: judge memory-bound changes with enough layers
// that N x the cache exceeds it.
//
// Usage: bench_decode_attention [--batch 8,16,32,64] [--context 1024,2048,4096,8192]
//          [--kv bf16,int8] [--hq 16] [--hkv 8] [--head-dim 128] [--block-size 256]
//          [--reps 7] [--layers 1] [--max-gib 1.5] [--cpu-time] [--json]
// Threads: NANOVLLM_NUM_THREADS (default all cores); NANOVLLM_ISA caps the instruction set.
// --cpu-time times the process's CPU time divided by the threads instead of the wall clock (on a
// machine shared with other work, descheduled time then does not count; exact with one thread,
// where the pool runs on the caller; with more it also counts the pool's spinning).
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/weight_arena.h"
#include "kernels/kv_cache_int8.h"
#include "nanovllm/backend_options.h"
#include "read_pass.h"
#include "util/cpu_features.h"
#include "util/tensor.h"
#include "util/thread_pool.h"

using namespace nanovllm;
using clk = std::chrono::steady_clock;

namespace {

std::vector<int> int_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return v;
}

std::vector<std::string> str_list(const char* s) {
  std::vector<std::string> v;
  std::string cur;
  for (const char* p = s;; ++p) {
    if (!*p || *p == ',') {
      if (!cur.empty()) v.push_back(cur);
      cur.clear();
      if (!*p) break;
    } else {
      cur += *p;
    }
  }
  return v;
}

DType kv_type(const std::string& s) {
  if (s == "f32") return DType::F32;
  if (s == "bf16") return DType::BF16;
  if (s == "int8") return kKvCacheInt8;
  std::fprintf(stderr, "error: --kv takes f32, bf16 or int8, got '%s'\n", s.c_str());
  std::exit(1);
}

// Fills a cache [slots, Hkv, row] with values in [-1, 1) (int8: random bytes, scale 1/127).
void fill(Tensor& t, int D, ThreadPool& pool) {
  const int64_t rows = t.size(0) * t.size(1), row = t.size(2);
  const DType dt = t.dtype();
  pool.parallel_for(
      rows,
      [&](int64_t a, int64_t b) {
        uint32_t x = uint32_t(a * 2654435761u + 1);
        auto next = [&] { return x = x * 1664525u + 1013904223u; };
        for (int64_t r = a; r < b; ++r) {
          if (dt == DType::F32) {
            float* p = t.data<float>() + r * row;
            for (int d = 0; d < D; ++d) p[d] = float(int32_t(next())) * 4.6566e-10f;
          } else if (dt == DType::BF16) {
            uint16_t* p = t.data<uint16_t>() + r * row;
            for (int d = 0; d < D; ++d) p[d] = f32_to_bf16(float(int32_t(next())) * 4.6566e-10f);
          } else {
            int8_t* p = t.data<int8_t>() + r * row;
            for (int d = 0; d < D; ++d) p[d] = int8_t(int(next() >> 24) % 255 - 127);
            const float s = 1.f / 127.f;
            std::memcpy(p + D, &s, 4);
          }
        }
      },
      1024);
}

double now(bool cpu_time, int threads) {
  if (!cpu_time) return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec)) / threads;
}

double read_bandwidth(ThreadPool& pool, bool cpu_time) {
  const int64_t n = (int64_t(1) << 30) / 4;
  void* map =
      mmap(nullptr, size_t(n) * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return 0;
  madvise(map, size_t(n) * 4, MADV_HUGEPAGE);
  float* buf = static_cast<float*>(map);
  pool.parallel_for(
      n, [&](int64_t a, int64_t b) { std::fill(buf + a, buf + b, 1.f); }, 1 << 16);
  std::vector<float> sink(size_t(pool.size()));
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const double t0 = now(cpu_time, pool.size());
    pool.parallel_for(
        n,
        [&](int64_t a, int64_t b) {
          sink[size_t(a * pool.size() / n)] += bench::read_sum(buf + a, b - a);
        },
        1 << 16);
    best = std::min(best, now(cpu_time, pool.size()) - t0);
  }
  munmap(map, size_t(n) * 4);
  return double(n) * 4 / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> batches = {8, 16, 32, 64}, contexts = {1024, 2048, 4096, 8192};
  std::vector<std::string> kvs = {"bf16", "int8"};
  int Hq = 16, Hkv = 8, D = 128, bs = 256, reps = 7;
  double max_gib = 1.5;
  int layers = 1;
  bool json = false, cpu_time = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--json") {
      json = true;
      continue;
    }
    if (a == "--cpu-time") {
      cpu_time = true;
      continue;
    }
    if (a == "--batch")
      batches = int_list(v);
    else if (a == "--context")
      contexts = int_list(v);
    else if (a == "--kv")
      kvs = str_list(v);
    else if (a == "--hq")
      Hq = std::atoi(v);
    else if (a == "--hkv")
      Hkv = std::atoi(v);
    else if (a == "--head-dim")
      D = std::atoi(v);
    else if (a == "--block-size")
      bs = std::atoi(v);
    else if (a == "--reps")
      reps = std::atoi(v);
    else if (a == "--layers")
      layers = std::max(1, std::atoi(v));
    else if (a == "--max-gib")
      max_gib = std::atof(v);
    else {
      std::fprintf(stderr, "error: unknown argument '%s' (see the file's header)\n", a.c_str());
      return 1;
    }
    ++i;
  }
  ThreadPool pool(backend_options_from_env().num_threads);
  nlohmann::json out;
  out["threads"] = pool.size();
  out["cpu_isa"] = cpu_features().summary();
  const double bw = read_bandwidth(pool, cpu_time);
  out["read_bandwidth_gb_s"] = bw;
  out["clock"] = cpu_time ? "process cpu time / threads" : "wall";
  out["layers"] = layers;
  if (!json)
    std::printf("threads %d, %s, read bandwidth %.1f GB/s (%s clock); Hq %d Hkv %d D %d block %d; %d layer(s), times per layer\n",
                pool.size(), cpu_features().summary().c_str(), bw, cpu_time ? "cpu" : "wall", Hq,
                Hkv, D, bs, layers);
  if (!json)
    std::printf("%-5s %4s %6s %10s %10s %9s %7s\n", "kv", "B", "L", "best ms", "median ms", "GB/s",
                "% read");
  const int W = (Hq + 2 * Hkv) * D;
  std::mt19937 rng(0);
  for (const std::string& kvname : kvs) {
    const DType dt = kv_type(kvname);
    const int64_t row = kv_cache_row_elems(dt, D);
    for (int B : batches)
      for (int L : contexts) {
        const int nb_seq = (L + bs - 1) / bs, nblocks = B * nb_seq;
        const int64_t slots = int64_t(nblocks) * bs;
        const double cache_bytes = 2.0 * double(slots) * Hkv * row * dtype_size(dt);
        if (cache_bytes * layers > max_gib * double(1 << 30)) continue;
        std::vector<Tensor> kcs, vcs;
        for (int l = 0; l < layers; ++l) {
          kcs.push_back(cpu::huge_page_empty({slots, Hkv, row}, dt));
          vcs.push_back(cpu::huge_page_empty({slots, Hkv, row}, dt));
          fill(kcs.back(), D, pool);
          fill(vcs.back(), D, pool);
        }
        std::vector<int32_t> ids(static_cast<size_t>(nblocks));
        std::iota(ids.begin(), ids.end(), 0);
        std::shuffle(ids.begin(), ids.end(), rng);
        std::vector<int32_t> cu(size_t(B) + 1), ctx(size_t(B), L), slot(size_t(B), -1),
            pos(size_t(B), L - 1);
        std::iota(cu.begin(), cu.end(), 0);
        Tensor qkv = Tensor::empty({B, W}, DType::F32);
        for (int64_t i = 0; i < qkv.numel(); ++i)
          qkv.data<float>()[i] = float(int(rng() % 2001) - 1000) * 1e-3f;
        Tensor o = Tensor::empty({B, Hq * D}, DType::F32);
        BatchTensors bt;
        bt.cu_seqlens_q = Tensor::wrap(cu.data(), {B + 1}, DType::I32);
        bt.context_lens = Tensor::wrap(ctx.data(), {B}, DType::I32);
        bt.block_tables = Tensor::wrap(ids.data(), {B, nb_seq}, DType::I32);
        bt.slot_mapping = Tensor::wrap(slot.data(), {B}, DType::I32);
        bt.positions = Tensor::wrap(pos.data(), {B}, DType::I32);
        bt.num_seqs = B;
        bt.num_tokens = B;
        bt.max_seqlen_q = 1;
        bt.max_seqlen_k = L;
        bt.block_size = bs;
        bt.decode_only = true;
        AttentionParams ap{Hq, Hkv, D, 1.f / std::sqrt(float(D))};
        std::vector<double> times;
        for (int r = 0; r < reps + 1; ++r) {
          const double t0 = now(cpu_time, pool.size());
          for (int l = 0; l < layers; ++l) cpu::paged_attention(qkv, kcs[size_t(l)], vcs[size_t(l)], bt, ap, o, pool);
          if (r > 0) times.push_back((now(cpu_time, pool.size()) - t0) / layers);
        }
        std::sort(times.begin(), times.end());
        const double best = times.front(), median = times[times.size() / 2];
        // Bytes the step must read: every visible key's K and V rows (scales included).
        const double bytes = 2.0 * double(B) * L * Hkv * row * dtype_size(dt);
        const double gbs = bytes / median / 1e9;
        if (json) {
          out["runs"].push_back({{"kv", kvname},
                                 {"batch", B},
                                 {"context", L},
                                 {"best_ms", best * 1e3},
                                 {"median_ms", median * 1e3},
                                 {"gb_s", gbs},
                                 {"pct_read_bw", 100 * gbs / bw}});
        } else {
          std::printf("%-5s %4d %6d %10.3f %10.3f %9.1f %6.0f%%\n", kvname.c_str(), B, L,
                      best * 1e3, median * 1e3, gbs, 100 * gbs / bw);
          std::fflush(stdout);
        }
      }
  }
  if (json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
