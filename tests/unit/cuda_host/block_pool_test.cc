// BlockPool (the CUDA caching allocator's bookkeeping) over a fake address space: splitting,
// merging, best fit, the separate graph pool, the out-of-memory retry, and that workloads with
// varying sizes keep reserved memory bounded.
#include "kernels/cuda/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace nanovllm::cuda {
namespace {

constexpr size_t MiB = size_t(1) << 20;

// Segments at increasing fake addresses with a gap between them (so a merge across segments
// would show as a non-contiguous block), never dereferenced. Optional capacity: OOM beyond it.
class FakeMemory : public RawMemory {
 public:
  explicit FakeMemory(size_t capacity = SIZE_MAX) : capacity_(capacity) {}
  void* alloc_segment(size_t bytes) override {
    if (used_ + bytes > capacity_) return nullptr;
    const uintptr_t p = next_;
    next_ += bytes + 4096;
    segs_[p] = bytes;
    used_ += bytes;
    ++allocs_;
    return reinterpret_cast<void*>(p);
  }
  void free_segment(void* p, size_t bytes) override {
    auto it = segs_.find(reinterpret_cast<uintptr_t>(p));
    ASSERT_NE(it, segs_.end()) << "freeing an unknown segment";
    ASSERT_EQ(it->second, bytes) << "segment freed with another size";
    used_ -= bytes;
    segs_.erase(it);
  }
  // Whether [p, p + n) lies inside one live segment.
  bool inside(const void* p, size_t n) const {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = segs_.upper_bound(a);
    if (it == segs_.begin()) return false;
    --it;
    return a + n <= it->first + it->second;
  }
  size_t used() const { return used_; }
  int allocs() const { return allocs_; }

 private:
  size_t capacity_, used_ = 0;
  uintptr_t next_ = uintptr_t(1) << 40;
  int allocs_ = 0;
  std::map<uintptr_t, size_t> segs_;
};

// Live allocations as seen by the caller, checked for overlap independently of BlockPool.
class LiveSet {
 public:
  void add(const void* p, size_t n) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = live_.lower_bound(a);
    if (it != live_.end()) {
      ASSERT_LE(a + n, it->first) << "overlaps the next live block";
    }
    if (it != live_.begin()) {
      auto pr = std::prev(it);
      ASSERT_LE(pr->first + pr->second, a) << "overlaps the previous live block";
    }
    live_[a] = n;
  }
  void remove(const void* p) { live_.erase(reinterpret_cast<uintptr_t>(p)); }

 private:
  std::map<uintptr_t, size_t> live_;
};

TEST(BlockPool, RoundingAndSegmentSizes) {
  EXPECT_EQ(BlockPool::round_size(0), 512u);
  EXPECT_EQ(BlockPool::round_size(1), 512u);
  EXPECT_EQ(BlockPool::round_size(512), 512u);
  EXPECT_EQ(BlockPool::round_size(513), 1024u);
  EXPECT_EQ(BlockPool::segment_size(512), 2 * MiB);
  EXPECT_EQ(BlockPool::segment_size(MiB), 2 * MiB);           // small up to 1 MiB
  EXPECT_EQ(BlockPool::segment_size(MiB + 512), 20 * MiB);    // large below 10 MiB
  EXPECT_EQ(BlockPool::segment_size(10 * MiB), 10 * MiB);     // own segment, 2 MiB steps
  EXPECT_EQ(BlockPool::segment_size(11 * MiB + 1), 12 * MiB);
}

TEST(BlockPool, SplitsLargeFreeBlocks) {
  FakeMemory raw;
  BlockPool bp(raw);
  void* a = bp.allocate(3 * MiB, 0);  // 20 MiB segment, 17 MiB remainder split off
  void* b = bp.allocate(5 * MiB, 0);  // from the remainder
  void* c = bp.allocate(9 * MiB, 0);
  EXPECT_EQ(raw.allocs(), 1);
  EXPECT_EQ(static_cast<char*>(b), static_cast<char*>(a) + 3 * MiB);
  EXPECT_EQ(static_cast<char*>(c), static_cast<char*>(b) + 5 * MiB);
  // 3 MiB left: more than 1 MiB, so it was split and serves another request.
  void* d = bp.allocate(2 * MiB + 100, 0);
  EXPECT_EQ(raw.allocs(), 1);
  EXPECT_EQ(bp.block_size(d), 3 * MiB - 0);  // remainder 1 MiB - 512 is not split (<= 1 MiB)
  EXPECT_EQ(bp.current_bytes(), 20 * MiB);
  EXPECT_EQ(bp.reserved_bytes(), 20 * MiB);
  bp.check_invariants();
  // Small requests never take large segments.
  bp.free(b);
  void* s = bp.allocate(4096, 0);
  EXPECT_EQ(raw.allocs(), 2);
  EXPECT_EQ(bp.reserved_bytes(), 22 * MiB);
  for (void* p : {a, c, d, s}) bp.free(p);
  bp.check_invariants();
}

TEST(BlockPool, FreedNeighboursCoalesce) {
  FakeMemory raw;
  BlockPool bp(raw);
  void* a = bp.allocate(4 * MiB, 0);
  void* b = bp.allocate(6 * MiB, 0);
  void* c = bp.allocate(8 * MiB, 0);
  ASSERT_EQ(raw.allocs(), 1);
  bp.free(a);
  bp.free(c);  // c merges with the free tail; a stays alone (b is between them)
  bp.check_invariants();
  EXPECT_EQ(bp.current_bytes(), 6 * MiB);
  bp.free(b);  // a + b + (c + tail) become one block: the whole segment
  bp.check_invariants();
  EXPECT_EQ(bp.current_bytes(), 0u);
  // The whole 20 MiB is one free block again: a 19 MiB request reuses it at the base.
  void* big = bp.allocate(19 * MiB, 0);
  EXPECT_EQ(big, a);
  EXPECT_EQ(raw.allocs(), 1);
  bp.free(big);
  // Only wholly free segments are released.
  void* keep = bp.allocate(4096, 0);
  EXPECT_EQ(bp.release_cached(0), 20 * MiB);
  EXPECT_EQ(bp.reserved_bytes(), 2 * MiB);
  bp.free(keep);
  EXPECT_EQ(bp.release_cached(0), 2 * MiB);
  EXPECT_EQ(bp.reserved_bytes(), 0u);
  EXPECT_EQ(raw.used(), 0u);
  bp.check_invariants();
}

TEST(BlockPool, BestFitPicksTheSmallestBlockThatHolds) {
  FakeMemory raw;
  BlockPool bp(raw);
  // Two 2 MiB small segments carved into free holes of 64 KiB and 16 KiB.
  std::vector<void*> a;
  for (size_t n : {64 << 10, 512 << 10, 16 << 10, 512 << 10}) a.push_back(bp.allocate(n, 0));
  bp.free(a[0]);
  bp.free(a[2]);
  void* p = bp.allocate(10 << 10, 0);
  EXPECT_EQ(p, a[2]);  // the 16 KiB hole, not the 64 KiB one
  void* q = bp.allocate(40 << 10, 0);
  EXPECT_EQ(q, a[0]);
  bp.check_invariants();
}

TEST(BlockPool, GraphPoolIsSeparate) {
  FakeMemory raw;
  BlockPool bp(raw);
  void* g = bp.allocate(3 * MiB, 1);
  bp.free(g);
  void* e = bp.allocate(3 * MiB, 0);  // must not reuse pool 1's free memory
  EXPECT_NE(e, g);
  EXPECT_EQ(raw.allocs(), 2);
  EXPECT_EQ(bp.reserved_bytes(1), 20 * MiB);
  EXPECT_EQ(bp.reserved_bytes(0), 20 * MiB);
  bp.free(e);
  EXPECT_EQ(bp.release_cached(0), 20 * MiB);  // pool 1 keeps its (graph-baked) segment
  EXPECT_EQ(bp.reserved_bytes(), 20 * MiB);
  void* g2 = bp.allocate(3 * MiB, 1);
  EXPECT_EQ(g2, g);
  bp.free(g2);
  bp.check_invariants();
}

TEST(BlockPool, OutOfMemoryReleasesCachedSegmentsThenFails) {
  FakeMemory raw(40 * MiB);
  BlockPool bp(raw);
  void* a = bp.allocate(15 * MiB, 0);  // 16 MiB segment
  void* b = bp.allocate(15 * MiB, 0);
  bp.free(a);  // cached, wholly free
  // 18 MiB needed (no free block holds it), 8 MiB left: the cached 16 MiB segment is released
  // and the retry succeeds.
  void* c = bp.allocate(18 * MiB, 0);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(bp.reserved_bytes(), 34 * MiB);
  EXPECT_EQ(bp.allocate(30 * MiB, 0), nullptr);  // nothing left to release
  bp.check_invariants();
  EXPECT_THROW(bp.free(reinterpret_cast<void*>(0x1234)), Error);
  bp.free(b);
  bp.free(c);
}

// One "step" of a forward: tensors proportional to the token count T (like x, residual, qkv,
// attention out, gate_up, MLP out and logits of a small model), a short-lived scratch tensor
// freed mid-step, and everything freed at the end. Returns the step's peak live bytes.
size_t run_step(BlockPool& bp, LiveSet& live, int T, std::mt19937& rng) {
  const size_t t = size_t(T), sizes[] = {t * 1024 * 2, t * 1024 * 2, t * 4096 * 2,
                                          t * 2048 * 2, t * 6144 * 2, t * 3072 * 2};
  std::vector<std::pair<void*, size_t>> held;
  size_t live_bytes = 0, peak = 0;
  auto take = [&](size_t n) {
    void* p = bp.allocate(n, 0);
    EXPECT_NE(p, nullptr);
    live.add(p, n);
    held.push_back({p, n});
    live_bytes += bp.block_size(p);
    peak = std::max(peak, live_bytes);
  };
  for (size_t n : sizes) {
    take(n);
    if (rng() % 2) {  // scratch (e.g. a dtype conversion) freed right away
      take(n / 2 + 512);
      void* p = held.back().first;
      live_bytes -= bp.block_size(p);
      live.remove(p);
      bp.free(p);
      held.pop_back();
    }
  }
  take(size_t(std::min(T, 256)) * 32000 * 4);  // logits of the sampled rows
  std::shuffle(held.begin(), held.end(), rng);
  for (auto [p, n] : held) {
    live.remove(p);
    bp.free(p);
  }
  return peak;
}

TEST(BlockPool, VaryingPrefillSizesKeepReservedBounded) {
  for (uint32_t seed : {12345u, 1u, 2u}) {
    FakeMemory raw;
    BlockPool bp(raw);
    LiveSet live;
    std::mt19937 rng(seed);
    size_t max_peak = 0, max_reserved = 0;
    for (int s = 0; s < 3000; ++s) {
      const int T = std::uniform_int_distribution<int>(1, 16384)(rng);
      max_peak = std::max(max_peak, run_step(bp, live, T, rng));
      max_reserved = std::max(max_reserved, bp.reserved_bytes());
      ASSERT_EQ(bp.current_bytes(), 0u);
      ASSERT_EQ(bp.reserved_bytes(), raw.used());
      if (s % 97 == 0) bp.check_invariants();
    }
    bp.check_invariants();
    // The bound: 1.25 x the largest step's live peak + one 20 MiB and one 2 MiB segment. Without
    // the growth rule each new largest size leaves its predecessors cached (about 2.3x here).
    const size_t bound = max_peak / 4 * 5 + 22 * MiB;
    EXPECT_LE(max_reserved, bound) << "seed " << seed << ": reserved up to " << max_reserved / MiB
                                   << " MiB, largest step peak " << max_peak / MiB << " MiB";
  }
}

TEST(BlockPool, RandomAllocFreeKeepsInvariants) {
  FakeMemory raw;
  BlockPool bp(raw);
  LiveSet live;
  std::mt19937 rng(7);
  std::vector<std::pair<void*, size_t>> held;
  size_t max_live = 0;
  for (int i = 0; i < 20000; ++i) {
    const bool alloc = held.empty() || (held.size() < 200 && rng() % 2);
    if (alloc) {
      // Log-uniform sizes from 1 byte to 64 MiB, pool 1 now and then.
      const double e = std::uniform_real_distribution<double>(0, 26)(rng);
      const size_t n = size_t(std::pow(2.0, e));
      const int pool = rng() % 8 == 0 ? 1 : 0;
      void* p = bp.allocate(n, pool);
      ASSERT_NE(p, nullptr);
      ASSERT_TRUE(raw.inside(p, n));
      ASSERT_GE(bp.block_size(p), n);
      live.add(p, bp.block_size(p));
      held.push_back({p, n});
    } else {
      const size_t k = rng() % held.size();
      live.remove(held[k].first);
      bp.free(held[k].first);
      held[k] = held.back();
      held.pop_back();
    }
    size_t cur = 0;
    for (auto& h : held) cur += bp.block_size(h.first);
    ASSERT_EQ(bp.current_bytes(), cur);
    ASSERT_GE(bp.peak_bytes(), cur);
    ASSERT_EQ(bp.reserved_bytes(), raw.used());
    ASSERT_GE(bp.reserved_bytes(), bp.current_bytes());
    max_live = std::max(max_live, cur);
    if (i % 50 == 0) bp.check_invariants();
    if (i % 5000 == 4999) bp.release_cached(0);
  }
  EXPECT_EQ(bp.peak_bytes(), max_live);
  for (auto& h : held) bp.free(h.first);
  bp.check_invariants();
  bp.reset_peak();
  EXPECT_EQ(bp.peak_bytes(), 0u);
  bp.release_cached(0);
  EXPECT_EQ(bp.reserved_bytes(), bp.reserved_bytes(1));  // only the graph pool is left
}

}  // namespace
}  // namespace nanovllm::cuda
