// Host-only bookkeeping of the CUDA caching allocator (device_allocator.h): segments of raw
// device memory cut into blocks, best-fit reuse, splitting of large free blocks and merging of
// adjacent free blocks. No CUDA here: the raw memory comes through `RawMemory` (cudaMalloc /
// cudaFree in production, a fake address space in tests/unit/cuda_host), so every rule below is
// unit-tested on the CPU.
//
// Rules (sizes in bytes):
// - Requests are rounded up to a multiple of 512 (kMinBlock).
// - A rounded request <= 1 MiB is "small" and is served from small segments of 2 MiB; a larger
//   one is "large": from 20 MiB segments below 10 MiB, else from a segment of its own size
//   rounded up to 2 MiB. Small and large blocks never share a segment, so many small tensors
//   cannot pin down a big segment.
// - Best fit: the smallest free block of the same pool and class that holds the request
//   (ties: lowest address). A small block is split when >= 512 bytes remain; a large block when
//   more than 1 MiB remains (else the remainder stays with the allocation, counted in current).
// - Freeing marks the block free and merges it with a free predecessor and successor in the
//   same segment (never across segments), so a segment whose blocks are all free is one block
//   again, which any request up to the segment size can reuse.
// - Growth: a large eager request that no free block holds first releases pool 0's wholly free
//   segments (all smaller than the request, or it would have fit), then allocates a segment.
//   Without this, each new largest size would leave the previous (smaller) segments cached.
// - Pools: 0 = eager, 1 = CUDA-graph capture. Segments belong to one pool for life; a block
//   never changes pool. Only release_cached(0) gives memory back (pool 1's free blocks are
//   scratch addresses baked into captured graphs).
//
// Why this bounds reserved memory under varying prefill sizes: a step's tensors are freed at
// its end, their segments merge back to whole free blocks, a later step of any size up to the
// largest seen reuses them by splitting, and growth drops the cached segments it outgrew.
// tests/unit/cuda_host/block_pool_test.cc checks reserved <= 1.25 x the largest step's live
// peak + 22 MiB over 3000 random prefill-like steps (measured: about 1.1x).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>

#include "util/check.h"

namespace nanovllm::cuda {

// Where segments come from. alloc_segment returns nullptr when out of memory.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  virtual void* alloc_segment(size_t bytes) = 0;
  virtual void free_segment(void* p, size_t bytes) = 0;
};

class BlockPool {
 public:
  static constexpr int kNumPools = 2;
  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kSmallRequest = size_t(1) << 20;   // <= this: small
  static constexpr size_t kSmallSegment = size_t(2) << 20;
  static constexpr size_t kMidRequest = size_t(10) << 20;    // < this: 20 MiB segments
  static constexpr size_t kLargeSegment = size_t(20) << 20;
  static constexpr size_t kSegmentRound = size_t(2) << 20;

  explicit BlockPool(RawMemory& raw) : raw_(raw) {}
  ~BlockPool() {
    for (auto& [base, seg] : segments_) {
      for (Block* b = seg.head; b;) {
        Block* n = b->next;
        delete b;
        b = n;
      }
      raw_.free_segment(base, seg.size);
    }
  }
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  static size_t round_size(size_t bytes) {
    if (bytes == 0) bytes = 1;
    return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
  }
  static bool is_small(size_t rounded) { return rounded <= kSmallRequest; }
  // Bytes of the segment created for a rounded request no free block can serve.
  static size_t segment_size(size_t rounded) {
    if (is_small(rounded)) return kSmallSegment;
    if (rounded < kMidRequest) return kLargeSegment;
    return (rounded + kSegmentRound - 1) / kSegmentRound * kSegmentRound;
  }

  // A block of >= bytes from `pool`, or nullptr when the raw memory is exhausted even after
  // releasing pool 0's wholly free segments.
  void* allocate(size_t bytes, int pool) {
    NV_CHECK(pool >= 0 && pool < kNumPools, "BlockPool: bad pool ", pool);
    const size_t size = round_size(bytes);
    const bool small = is_small(size);
    FreeSet& fs = free_[pool][small];
    Block probe;
    probe.size = size;
    Block* b = nullptr;
    auto it = fs.lower_bound(&probe);
    if (it != fs.end()) {
      b = *it;
      fs.erase(it);
    } else {
      b = new_segment(size, pool, small);
      if (!b) return nullptr;
    }
    const size_t rest = b->size - size;
    if (small ? rest >= kMinBlock : rest > kSmallRequest) {
      Block* r = new Block{b->ptr + size, rest, pool, small, false, b, b->next};
      if (b->next) b->next->prev = r;
      b->next = r;
      b->size = size;
      fs.insert(r);
    }
    b->allocated = true;
    live_[b->ptr] = b;
    current_ += b->size;
    if (current_ > peak_) peak_ = current_;
    return b->ptr;
  }

  void free(void* p) {
    auto it = live_.find(p);
    NV_CHECK(it != live_.end(), "BlockPool::free: ", p, " is not a live block");
    Block* b = it->second;
    live_.erase(it);
    b->allocated = false;
    current_ -= b->size;
    FreeSet& fs = free_[b->pool][b->small];
    if (b->prev && !b->prev->allocated) {  // merge into the free predecessor
      Block* p0 = b->prev;
      fs.erase(p0);
      p0->size += b->size;
      unlink(b);
      b = p0;
    }
    if (b->next && !b->next->allocated) {  // absorb the free successor
      Block* n = b->next;
      fs.erase(n);
      b->size += n->size;
      unlink(n);
    }
    fs.insert(b);
  }

  // Returns every segment of `pool` that is one free block to the raw memory; bytes released.
  size_t release_cached(int pool) {
    size_t released = 0;
    for (auto it = segments_.begin(); it != segments_.end();) {
      Block* h = it->second.head;
      if (h->pool == pool && !h->allocated && !h->next) {
        free_[pool][h->small].erase(h);
        raw_.free_segment(it->first, it->second.size);
        reserved_ -= it->second.size;
        pool_reserved_[pool] -= it->second.size;
        released += it->second.size;
        delete h;
        it = segments_.erase(it);
      } else {
        ++it;
      }
    }
    return released;
  }

  size_t current_bytes() const { return current_; }    // in live blocks
  size_t peak_bytes() const { return peak_; }          // max current since reset_peak()
  size_t reserved_bytes() const { return reserved_; }  // in segments (live + cached)
  size_t reserved_bytes(int pool) const { return pool_reserved_[pool]; }
  size_t num_segments() const { return segments_.size(); }
  size_t num_live_blocks() const { return live_.size(); }
  void reset_peak() { peak_ = current_; }
  // Size of a live block (>= what was asked).
  size_t block_size(const void* p) const {
    auto it = live_.find(p);
    NV_CHECK(it != live_.end(), "BlockPool::block_size: ", p, " is not a live block");
    return it->second->size;
  }

  // Throws on any broken invariant: blocks tile each segment contiguously, no two adjacent
  // free blocks, free blocks are exactly the free sets' members, counters match the blocks.
  void check_invariants() const {
    size_t cur = 0, res = 0, nfree = 0, nlive = 0, pres[kNumPools] = {0, 0};
    for (const auto& [base, seg] : segments_) {
      NV_CHECK(seg.head && seg.head->ptr == base && !seg.head->prev, "segment head mismatch");
      size_t sum = 0;
      for (const Block* b = seg.head; b; b = b->next) {
        NV_CHECK(b->ptr == base + sum, "blocks do not tile their segment");
        NV_CHECK(b->pool == seg.head->pool && b->small == seg.head->small, "mixed segment");
        NV_CHECK(!b->next || b->next->prev == b, "broken block links");
        NV_CHECK(b->size >= kMinBlock && b->size % kMinBlock == 0, "bad block size ", b->size);
        if (b->allocated) {
          cur += b->size;
          ++nlive;
          NV_CHECK(live_.count(b->ptr) && live_.at(b->ptr) == b, "live block not indexed");
        } else {
          ++nfree;
          NV_CHECK(!b->next || b->next->allocated, "two adjacent free blocks were not merged");
          NV_CHECK(free_[b->pool][b->small].count(const_cast<Block*>(b)),
                   "free block missing from its free set");
        }
        sum += b->size;
      }
      NV_CHECK_EQ(sum, seg.size, "blocks do not add up to the segment");
      res += seg.size;
      pres[seg.head->pool] += seg.size;
    }
    size_t in_sets = 0;
    for (const auto& p : free_)
      for (const auto& s : p) in_sets += s.size();
    NV_CHECK_EQ(in_sets, nfree, "free sets hold blocks that are not free");
    NV_CHECK_EQ(nlive, live_.size(), "live index out of date");
    NV_CHECK_EQ(cur, current_, "current bytes out of date");
    NV_CHECK_EQ(res, reserved_, "reserved bytes out of date");
    for (int p = 0; p < kNumPools; ++p) NV_CHECK_EQ(pres[p], pool_reserved_[p], "pool ", p);
    NV_CHECK_LE(current_, peak_, "peak below current");
  }

 private:
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    int pool = 0;
    bool small = false;
    bool allocated = false;
    Block* prev = nullptr;  // neighbours in address order within the segment
    Block* next = nullptr;
  };
  struct BySize {  // best fit: smallest size, then lowest address
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };
  using FreeSet = std::set<Block*, BySize>;
  struct Segment {
    Block* head = nullptr;  // the block at the segment's base (never merged away)
    size_t size = 0;
  };

  Block* new_segment(size_t size, int pool, bool small) {
    const size_t seg = segment_size(size);
    // A large request no free block holds: pool 0's wholly free segments are all too small for
    // it, so give them back before growing (costs a device sync, only when growing).
    if (pool == 0 && !small) release_cached(0);
    void* p = raw_.alloc_segment(seg);
    if (!p) {  // out of memory: give back pool 0's wholly free segments and retry once
      release_cached(0);
      p = raw_.alloc_segment(seg);
      if (!p) return nullptr;
    }
    Block* b = new Block{static_cast<char*>(p), seg, pool, small, false, nullptr, nullptr};
    segments_[b->ptr] = Segment{b, seg};
    reserved_ += seg;
    pool_reserved_[pool] += seg;
    return b;
  }
  void unlink(Block* b) {  // b was merged into a neighbour
    if (b->prev) b->prev->next = b->next;
    if (b->next) b->next->prev = b->prev;
    delete b;
  }

  RawMemory& raw_;
  FreeSet free_[kNumPools][2];  // [pool][small]
  std::unordered_map<const void*, Block*> live_;
  std::map<char*, Segment> segments_;
  size_t current_ = 0, peak_ = 0, reserved_ = 0, pool_reserved_[kNumPools] = {0, 0};
};

}  // namespace nanovllm::cuda
