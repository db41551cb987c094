// Conformance cases of store_kv + attention over the paged cache: batch layouts (prefill,
// prefix-cached, chunked, decode, mixed), GQA ratios, head sizes, block boundaries, block sizes
// 16 and 256, slot -1, launch hints, and the defensive rules for values past the contract.
//
// Each case builds a HostBatch over a shuffled set of physical blocks (plus spare blocks of
// unrelated data), stores the step's K/V with store_kv, runs attention and compares with an
// f64 reference computed from the HostBatch itself: query i of sequence b sees keys
// 0 .. context_lens[b] - seqlen_q(b) + i (with a sliding window W: only the last W of those)
// through its block table, reading the cache as store_kv
// left it; keys whose block is missing are skipped, rows with no key are zeros, rows of no
// sequence must stay untouched (NaN poison).
//
// An int8 cache (kernels/kv_cache_int8.h) starts as quantized random rows; after store_kv its
// bytes must equal quantize_kv_row of the step's K/V exactly, and the reference reads the
// dequantized cache (q * scale), so the tolerance is the f32 one: the kernels' arithmetic on
// what the cache holds. The quantization error itself is measured end to end (docs/perf.md).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>

#include "conformance.h"
#include "kernels/batch_contract.h"
#include "kernels/kv_cache_int8.h"

namespace nanovllm::conformance {
namespace {

struct Seq {
  int cached, fresh;  // keys already in the cache, query tokens of this step
};

struct AttnSpec {
  AttnSpec(std::vector<Seq> s, int hq, int hkv, int d, int block_size, bool decode_only = false)
      : seqs(std::move(s)), Hq(hq), Hkv(hkv), D(d), bs(block_size), decode(decode_only) {}
  std::vector<Seq> seqs;
  int Hq, Hkv, D, bs;
  bool decode;  // decode_only batch (every fresh == 1)
  // Launch hints below the true values (-1: exact): every row and key must still be computed.
  int max_seqlen_q = -1, max_seqlen_k = -1;
  std::vector<int> unstored;  // step tokens stored with slot -1 (attention reads old cache data)
  // Edits past the contract (validate_batch would reject them): the kernels' defensive rules.
  std::function<void(HostBatch&, int num_blocks)> edit;
  // KV cache type other than the activations' (--kv-cache-dtype; backends without it skip).
  std::optional<DType> kv_dtype;
  int window = 0;  // AttentionParams::sliding_window
};

// One layer's K or V cache on the backend and its contents as f32 [slots, Hkv, D] (int8: the
// dequantized rows; `bytes` the raw rows [slots, Hkv, D + 4]).
struct Cache {
  Tensor t;
  std::vector<float> host;
  std::vector<int8_t> bytes;
};

Cache random_cache(Harness& hx, int64_t slots, int Hkv, int D, DType dt) {
  if (dt != kKvCacheInt8) {
    Dev d = hx.random({slots, Hkv, D}, dt);
    return {d.t, d.host, {}};
  }
  const int64_t rows = slots * Hkv, W = D + kKvInt8ScaleBytes;
  Cache c;
  c.bytes.resize(size_t(rows * W));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(static_cast<size_t>(D));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& e : x) e = u(hx.rng());
    quantize_kv_row(x.data(), D, &c.bytes[size_t(r * W)]);
  }
  Tensor h = Tensor::empty({slots, Hkv, W}, dt);
  std::memcpy(h.raw(), c.bytes.data(), c.bytes.size());
  c.t = hx.upload(h);
  return c;
}

std::vector<int8_t> download_bytes(Harness& hx, const Tensor& t) {
  Tensor h = hx.be.to_host(t);
  std::vector<int8_t> b(h.nbytes());
  std::memcpy(b.data(), h.raw(), b.size());
  return b;
}

// int8 rows [rows, D + 4] -> f32 [rows, D].
std::vector<float> dequantize(const std::vector<int8_t>& bytes, int D) {
  const size_t W = size_t(D) + kKvInt8ScaleBytes, rows = bytes.size() / W;
  std::vector<float> out(rows * size_t(D));
  for (size_t r = 0; r < rows; ++r) dequantize_kv_row(&bytes[r * W], D, &out[r * size_t(D)]);
  return out;
}

HostBatch build(const AttnSpec& s, std::mt19937& rng, int& num_blocks) {
  const int B = int(s.seqs.size()), bs = s.bs;
  int total = 0, stride = 1;
  for (const Seq& q : s.seqs) {
    const int nb = (q.cached + q.fresh + bs - 1) / bs;
    total += nb;
    stride = std::max(stride, nb);
  }
  num_blocks = total + 3;  // spare blocks hold unrelated data
  std::vector<int32_t> ids(size_t(num_blocks), 0);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  HostBatch hb;
  hb.num_seqs = B;
  hb.block_size = bs;
  hb.block_table_stride = stride;
  hb.decode_only = s.decode;
  hb.block_tables.assign(size_t(B) * stride, -1);
  hb.cu_seqlens_q = {0};
  int next = 0;
  for (int b = 0; b < B; ++b) {
    const Seq& q = s.seqs[size_t(b)];
    const int ctx = q.cached + q.fresh;
    int32_t* table = hb.block_tables.data() + size_t(b) * stride;
    for (int j = 0; j < (ctx + bs - 1) / bs; ++j) table[j] = ids[size_t(next++)];
    for (int i = 0; i < q.fresh; ++i) {
      const int pos = q.cached + i, t = int(hb.input_ids.size());
      const bool store = std::find(s.unstored.begin(), s.unstored.end(), t) == s.unstored.end();
      hb.input_ids.push_back(0);
      hb.positions.push_back(pos);
      hb.slot_mapping.push_back(store ? table[pos / bs] * bs + pos % bs : -1);
    }
    hb.cu_seqlens_q.push_back(int32_t(hb.input_ids.size()));
    hb.context_lens.push_back(ctx);
    if (q.fresh > 0) hb.logits_indices.push_back(hb.cu_seqlens_q.back() - 1);
    hb.max_seqlen_q = std::max(hb.max_seqlen_q, q.fresh);
    hb.max_seqlen_k = std::max(hb.max_seqlen_k, ctx);
  }
  hb.num_tokens = int(hb.input_ids.size());
  return hb;
}

// Reference [T, Hq * D] (NaN: a row no sequence covers) from the batch and the cache contents.
std::vector<double> reference(const HostBatch& hb, const std::vector<float>& qkv,
                              const std::vector<float>& k, const std::vector<float>& v,
                              const AttentionParams& p, int num_blocks) {
  const int T = hb.num_tokens, Hq = p.num_q_heads, Hkv = p.num_kv_heads, D = p.head_dim;
  const int G = Hq / Hkv, W = (Hq + 2 * Hkv) * D, bs = hb.block_size;
  std::vector<double> out(size_t(T) * Hq * D, std::nan(""));
  std::vector<double> s;
  std::vector<int64_t> slots;
  for (int b = 0; b < hb.num_seqs; ++b) {
    const int q0 = hb.cu_seqlens_q[size_t(b)], sq = hb.cu_seqlens_q[size_t(b) + 1] - q0;
    const int32_t* table = hb.block_tables.data() + size_t(b) * hb.block_table_stride;
    for (int i = 0; i < sq; ++i) {
      const int t = q0 + i, qpos = hb.context_lens[size_t(b)] - sq + i;
      if (t < 0 || t >= T) continue;
      slots.clear();  // the keys query i sees
      const int first = p.sliding_window > 0 ? std::max(0, qpos - p.sliding_window + 1) : 0;
      for (int j = first; j <= qpos; ++j) {
        const int bi = j / bs;
        const int64_t blk = bi < hb.block_table_stride ? table[bi] : -1;
        if (blk >= 0 && blk < num_blocks) slots.push_back(blk * bs + j % bs);
      }
      for (int h = 0; h < Hq; ++h) {
        double* o = &out[(size_t(t) * Hq + h) * D];
        std::fill(o, o + D, 0.0);
        if (slots.empty()) continue;  // no visible key: zeros
        const float* q = &qkv[size_t(t) * W + size_t(h) * D];
        const int kvh = h / G;
        s.assign(slots.size(), 0.0);
        double mx = -INFINITY, den = 0;
        for (size_t j = 0; j < slots.size(); ++j) {
          const float* kr = &k[(size_t(slots[j]) * Hkv + kvh) * D];
          double d = 0;
          for (int e = 0; e < D; ++e) d += double(q[e]) * kr[e];
          mx = std::max(mx, s[j] = d * p.scale);
        }
        for (auto& x : s) den += (x = std::exp(x - mx));
        for (size_t j = 0; j < slots.size(); ++j) {
          const float* vr = &v[(size_t(slots[j]) * Hkv + kvh) * D];
          for (int e = 0; e < D; ++e) o[e] += s[j] / den * vr[e];
        }
      }
    }
  }
  return out;
}

void attention_case(Harness& hx, const AttnSpec& s) {
  const int Hq = s.Hq, Hkv = s.Hkv, D = s.D, W = (Hq + 2 * Hkv) * D;
  AttentionParams ap{Hq, Hkv, D, float(1.0 / std::sqrt(double(D)))};
  ap.sliding_window = s.window;
  int num_blocks = 0;
  HostBatch hb = build(s, hx.rng(), num_blocks);
  if (s.max_seqlen_q >= 0) hb.max_seqlen_q = s.max_seqlen_q;
  if (s.max_seqlen_k >= 0) hb.max_seqlen_k = s.max_seqlen_k;
  if (s.edit) s.edit(hb, num_blocks);
  if (!s.edit && s.max_seqlen_q < 0 && s.max_seqlen_k < 0) {  // a valid batch passes the check
    BatchLimits lim{1, 1 << 20, num_blocks, s.bs};
    EXPECT_NO_THROW(validate_batch(hb, lim));
  }
  const int T = hb.num_tokens;
  const int64_t slots = int64_t(num_blocks) * s.bs;
  const DType kvd = s.kv_dtype.value_or(hx.act());
  if (!hx.be.kv_cache_dtype_supported(kvd))
    GTEST_SKIP() << "the " << hx.be.name() << " backend has no " << kv_cache_dtype_name(kvd)
                 << " KV cache";
  auto qkv = hx.random({T, W}, hx.act(), -2.f, 2.f);
  Cache kc = random_cache(hx, slots, Hkv, D, kvd);
  Cache vc = random_cache(hx, slots, Hkv, D, kvd);
  BatchTensors bt = hx.be.upload_batch(hb);
  hx.be.store_kv(qkv.t, bt.slot_mapping, kc.t, vc.t, ap);
  Tensor out = hx.poisoned({T, Hq * D}, hx.act());
  hx.be.attention(qkv.t, kc.t, vc.t, bt, ap, out);

  // The cache after store_kv: the step's K/V at the valid slots, exact copies (rounded to the
  // cache's type when it is another: round to nearest even; int8: quantize_kv_row's bytes).
  std::vector<float> k = kc.host, v = vc.host;
  const int KV = Hkv * D;
  const bool int8 = kvd == kKvCacheInt8;
  const size_t RW = size_t(D) + kKvInt8ScaleBytes;
  for (int t = 0; t < T; ++t) {
    const int64_t slot = hb.slot_mapping[size_t(t)];
    if (slot < 0 || slot >= slots) continue;
    const float* kt = &qkv.host[size_t(t) * W + size_t(Hq) * D];
    const float* vt = &qkv.host[size_t(t) * W + size_t(Hq + Hkv) * D];
    if (int8) {
      for (int h = 0; h < Hkv; ++h) {
        quantize_kv_row(kt + h * D, D, &kc.bytes[(size_t(slot) * Hkv + h) * RW]);
        quantize_kv_row(vt + h * D, D, &vc.bytes[(size_t(slot) * Hkv + h) * RW]);
      }
      continue;
    }
    for (int e = 0; e < KV; ++e) {
      k[size_t(slot) * KV + e] = float(round_to(kvd, kt[e]));
      v[size_t(slot) * KV + e] = float(round_to(kvd, vt[e]));
    }
  }
  if (int8) {
    EXPECT_TRUE(download_bytes(hx, kc.t) == kc.bytes) << "k_cache";
    EXPECT_TRUE(download_bytes(hx, vc.t) == vc.bytes) << "v_cache";
    k = dequantize(kc.bytes, D);
    v = dequantize(vc.bytes, D);
  } else {
    EXPECT_EQ(rel_err(hx.download(kc.t), std::vector<double>(k.begin(), k.end())), 0.0)
        << "k_cache";
    EXPECT_EQ(rel_err(hx.download(vc.t), std::vector<double>(v.begin(), v.end())), 0.0)
        << "v_cache";
  }

  const std::vector<double> want = reference(hb, qkv.host, k, v, ap, num_blocks);
  const std::vector<float> got = hx.download(out);
  std::vector<float> got_rows;
  std::vector<double> want_rows;
  size_t untouched_written = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      untouched_written += !std::isnan(got[i]);
    } else {
      got_rows.push_back(got[i]);
      want_rows.push_back(want[i]);
    }
  }
  EXPECT_EQ(untouched_written, 0u) << "attention wrote rows that belong to no sequence";
  EXPECT_LE(rel_err(got_rows, want_rows), tolerance(hx.act(), Tol::kAttention));
}

std::string kv_tag(DType dt) { return dt == kKvCacheInt8 ? "int8" : dt_tag(dt); }

std::string tag(const AttnSpec& s) {
  return "_hq" + std::to_string(s.Hq) + "_hkv" + std::to_string(s.Hkv) + "_d" +
         std::to_string(s.D) + "_bs" + std::to_string(s.bs) +
         (s.kv_dtype ? "_kv" + kv_tag(*s.kv_dtype) : "") +
         (s.window ? "_w" + std::to_string(s.window) : "");
}

void add(std::vector<Case>& out, const std::string& name, AttnSpec s) {
  const bool prefill = !s.decode, decode = s.decode;
  out.push_back({"attention_" + name + tag(s), prefill,
                 [s = std::move(s)](Harness& hx) { attention_case(hx, s); }, decode});
}

// Decode sequences with these context lengths (cached = ctx - 1).
std::vector<Seq> decode_seqs(std::initializer_list<int> ctxs) {
  std::vector<Seq> v;
  for (int c : ctxs) v.push_back({c - 1, 1});
  return v;
}

}  // namespace

void add_attention_cases(std::vector<Case>& out) {
  // Layouts. Block boundaries: contexts at k*bs - 1, k*bs, k*bs + 1.
  add(out, "prefill", {{{0, 37}, {0, 19}, {0, 1}}, 8, 2, 32, 16});
  add(out, "prefix_cached_prefill", {{{16, 19}, {5, 15}, {100, 28}, {0, 40}}, 8, 8, 64, 16});
  add(out, "chunked_prefill", {{{37, 20}, {300, 5}, {15, 17}}, 16, 8, 128, 256});
  add(out, "prefix_cached_prefill", {{{195, 5}, {936, 64}, {32, 1}, {0, 40}}, 4, 4, 64, 256});
  add(out, "prefix_cached_prefill", {{{37, 33}, {0, 128}, {293, 7}}, 16, 2, 128, 256});
  add(out, "decode_block_boundaries", {decode_seqs({1, 15, 16, 17, 31, 32, 33, 300}), 16, 4, 128, 16, true});
  add(out, "decode_block_boundaries", {decode_seqs({1, 255, 256, 257, 511, 512, 513}), 8, 8, 64, 256, true});
  add(out, "mixed_prefill_and_decode", {{{0, 20}, {40, 1}, {63, 1}, {10, 5}, {64, 1}}, 8, 2, 64, 16});
  add(out, "prefill_bs256", {{{0, 300}, {100, 1}}, 4, 1, 64, 256});
  // GQA ratio x head_dim, a mixed batch and a decode batch each.
  for (int D : {8, 32, 64, 96, 128, 256})
    for (int G : {1, 2, 4, 8}) {
      add(out, "mixed_g" + std::to_string(G), {{{0, 20}, {33, 1}, {16, 17}}, 2 * G, 2, D, 16});
      add(out, "decode_g" + std::to_string(G), {decode_seqs({1, 15, 16, 17, 257}), 2 * G, 2, D, 16, true});
    }
  // More than 16 query heads per KV head (CUDA decode splits the group over blocks).
  for (int G : {16, 32}) {
    add(out, "mixed_g" + std::to_string(G), {{{0, 9}, {70, 1}}, G, 1, 64, 16});
    add(out, "decode_g" + std::to_string(G), {decode_seqs({5, 300}), 2 * G, 2, 64, 16, true});
  }
  // A large decode batch: the CPU groups adjacent KV heads into one item (nh > 1, whatever the
  // thread count up to 16) -- odd rows per head (G = 1, 3), Hkv 4 and 3 (a short last group).
  {
    std::vector<Seq> many;
    for (int b = 0; b < 64; ++b) many.push_back({(b * 37) % 90, 1});
    for (int G : {1, 2, 3}) {
      add(out, "decode_head_groups_g" + std::to_string(G), {many, 4 * G, 4, 64, 16, true});
      add(out, "decode_head_groups_g" + std::to_string(G), {many, 3 * G, 3, 128, 16, true});
    }
  }
  // head_dim that is no multiple of 8 (generic CUDA path, CPU per-key loop).
  add(out, "mixed_odd_head_dim", {{{0, 20}, {33, 1}}, 4, 2, 20, 16});
  // Moved from kernels_cpu: prefill items of full and partial 16-query tiles, few-row decode
  // items with per-row causal limits, D % 16 != 0.
  add(out, "single_token", {{{0, 1}}, 4, 4, 16, 16});
  add(out, "qwen3_06b_heads", {{{0, 77}, {300, 5}, {3, 1}}, 16, 8, 128, 256});
  add(out, "decode_boundaries_hkv3", {{{40, 1}, {63, 1}, {64, 1}, {0, 2}}, 6, 3, 8, 32});
  add(out, "prefill_hkv3", {{{0, 20}}, 6, 3, 8, 32});
  add(out, "few_rows", {{{20, 3}, {0, 1}}, 4, 2, 32, 16});
  add(out, "decode_d48", {{{33, 1}, {15, 1}}, 8, 2, 48, 16});
  // Long contexts: many row tiles, many decode splits, a cached prefix of 8176 keys.
  add(out, "long_prefill", {{{0, 1024}}, 2, 1, 64, 256});
  add(out, "long_prefix_cached", {{{500, 300}}, 4, 2, 128, 16});
  add(out, "long_cached_prefix", {{{8176, 16}, {8191, 1}}, 4, 2, 128, 16});
  add(out, "long_decode", {decode_seqs({5000, 3, 700}), 32, 8, 128, 16, true});
  // slot -1 on real tokens: not stored, so attention reads the cache's previous contents.
  {
    AttnSpec s{{{0, 10}, {5, 6}}, 4, 2, 64, 16};
    s.unstored = {2, 12};
    add(out, "slot_minus1_reads_old_cache", s);
  }
  // Launch hints: graph-style max_seqlen_k = max_model_len, understated ones (still exact).
  {
    AttnSpec s{decode_seqs({3, 700, 2049}), 16, 4, 128, 16, true};
    s.max_seqlen_k = 40960;
    add(out, "decode_hint_max_model_len", s);
    s.max_seqlen_k = 1;
    add(out, "decode_hint_understated", s);
    AttnSpec p{{{0, 150}, {30, 70}}, 8, 2, 64, 16};
    p.max_seqlen_q = 1;
    add(out, "prefill_hint_understated", p);
  }
  // A BF16 KV cache (--kv-cache-dtype bf16; the CPU stores F32 activations rounded): prefill
  // tiles, decode rows, the per-key loop (D % 16 != 0), a mixed batch.
  for (AttnSpec s : {AttnSpec{{{0, 77}, {300, 5}, {3, 1}}, 16, 8, 128, 256},
                     AttnSpec{decode_seqs({1, 15, 16, 17, 300}), 16, 4, 128, 16, true},
                     AttnSpec{{{40, 1}, {63, 1}, {64, 1}, {0, 2}}, 6, 3, 8, 32},
                     AttnSpec{{{0, 20}, {40, 1}, {63, 1}, {10, 5}, {64, 1}}, 8, 2, 64, 16},
                     AttnSpec{decode_seqs({1500, 600, 2}), 16, 8, 128, 16, true}}) {
    s.kv_dtype = DType::BF16;
    add(out, s.decode ? "decode" : "mixed", s);
  }
  // An int8 KV cache (--kv-cache-dtype int8: D int8 values and their f32 scale per slot and
  // head): prefill, prefix-cached and chunked prefill, decode across block boundaries, GQA
  // ratios, head groups (nh > 1), long contexts (key chunks), windows, and the per-key loop
  // (D % 8 != 0).
  {
    std::vector<Seq> many;
    for (int b = 0; b < 64; ++b) many.push_back({(b * 37) % 90, 1});
    std::vector<std::pair<std::string, AttnSpec>> int8_cases = {
        {"int8_prefill", {{{0, 77}, {300, 5}, {3, 1}}, 16, 8, 128, 256}},
        {"int8_prefix_cached_prefill", {{{16, 19}, {5, 15}, {100, 28}, {0, 40}}, 8, 8, 64, 16}},
        {"int8_chunked_prefill", {{{37, 20}, {300, 5}, {15, 17}}, 16, 8, 128, 256}},
        {"int8_decode", {decode_seqs({1, 15, 16, 17, 31, 32, 33, 300}), 16, 4, 128, 16, true}},
        {"int8_decode_g1", {decode_seqs({1, 15, 16, 17, 257}), 2, 2, 64, 16, true}},
        {"int8_decode_g3", {decode_seqs({1, 15, 16, 17, 257}), 6, 2, 32, 16, true}},
        {"int8_mixed", {{{0, 20}, {40, 1}, {63, 1}, {10, 5}, {64, 1}}, 8, 2, 64, 16}},
        {"int8_mixed_g1", {{{0, 20}, {33, 1}, {16, 17}}, 2, 2, 96, 16}},
        {"int8_head_groups", {many, 8, 4, 64, 16, true}},
        {"int8_head_groups", {many, 9, 3, 128, 16, true}},
        {"int8_long_decode", {decode_seqs({5000, 3, 700}), 32, 8, 128, 16, true}},
        {"int8_long_decode", {decode_seqs({1500, 600, 2}), 16, 8, 128, 16, true}},
        {"int8_key_chunk_edges", {decode_seqs({240, 241, 480, 481}), 8, 8, 128, 16, true}},
        {"int8_long_prefix_cached", {{{500, 300}}, 4, 2, 128, 16}},
        {"int8_odd_head_dim", {{{0, 20}, {33, 1}}, 4, 2, 20, 16}},
        {"int8_hkv3", {{{40, 1}, {63, 1}, {64, 1}, {0, 2}}, 6, 3, 8, 32}},
    };
    for (auto& [name, spec] : int8_cases) {
      spec.kv_dtype = kKvCacheInt8;
      add(out, name, spec);
    }
    for (int W : {1, 17, 256}) {
      AttnSpec d{decode_seqs({1, 15, 16, 17, 300, 5000}), 16, 4, 128, 16, true};
      d.window = W;
      d.kv_dtype = kKvCacheInt8;
      add(out, "int8_window_decode", d);
      AttnSpec m{{{0, 40}, {33, 1}, {16, 17}, {100, 30}}, 8, 2, 64, 16};
      m.window = W;
      m.kv_dtype = kKvCacheInt8;
      add(out, "int8_window_mixed", m);
    }
  }
  // The CPU decode kernel walks long contexts in chunks of keys (~256 KiB of V; 512 keys for
  // one f32 head of 128): few query rows whose limits straddle a chunk boundary (a row that
  // sees none of the last chunk's keys), and a context of exactly one chunk and one past it.
  add(out, "few_rows_across_key_chunks", {{{510, 3}, {1020, 4}}, 4, 2, 128, 16});
  add(out, "decode_key_chunk_edges", {decode_seqs({512, 513, 1024, 1025}), 8, 1, 128, 16, true});
  // Speculative decoding's verification step: decodes (1 row) beside sequences verifying K
  // drafts (1 + K rows after a cached context), across block boundaries, as both backends run
  // it (CUDA: the prefill kernel path, since the step has rows > 1 per sequence).
  add(out, "spec_verify", {{{40, 1}, {59, 5}, {64, 8}, {300, 1}, {15, 2}, {127, 17}}, 8, 2, 128, 16});
  add(out, "spec_verify", {{{250, 8}, {511, 2}, {3, 1}}, 16, 8, 128, 256});
  // Prefill kernel on decode-shaped sequences (a non-decode batch of one-token sequences).
  add(out, "prefill_kernel_on_decode_shapes", {decode_seqs({1, 77, 4000}), 8, 2, 128, 16});

  // Sliding windows (Mistral, Gemma 3 local layers): prefill rows before and past the window,
  // a window of 1 (only the query's own key), a window larger than every context (no effect),
  // chunked / prefix-cached prefill whose first visible key is inside the cached part, decode
  // across block boundaries and long contexts (CUDA: split-K partitions wholly outside the
  // window), GQA, a BF16 cache, and a window ending exactly on a block boundary.
  for (int W : {1, 16, 17, 4096}) {
    AttnSpec s{{{0, 40}, {33, 1}, {16, 17}, {100, 30}}, 8, 2, 64, 16};
    s.window = W;
    add(out, "window_mixed", s);
  }
  for (int W : {7, 16, 256}) {
    AttnSpec s{decode_seqs({1, 15, 16, 17, 300, 5000}), 16, 4, 128, 16, true};
    s.window = W;
    add(out, "window_decode", s);
  }
  {
    AttnSpec s{{{0, 300}, {500, 40}}, 8, 8, 128, 256};
    s.window = 64;
    add(out, "window_prefill_bs256", s);
    AttnSpec c{{{37, 20}, {300, 5}, {15, 17}}, 16, 8, 128, 256};
    c.window = 32;
    add(out, "window_chunked_prefill", c);
    AttnSpec k{decode_seqs({1500, 600, 2}), 16, 8, 128, 16, true};
    k.window = 512;
    k.kv_dtype = DType::BF16;
    add(out, "window_decode", k);
    AttnSpec m{{{0, 20}, {40, 1}, {63, 1}, {10, 5}, {64, 1}}, 8, 2, 64, 16};
    m.window = 32;
    m.kv_dtype = DType::BF16;
    add(out, "window_mixed", m);
    AttnSpec t{{{0, 1024}}, 2, 1, 64, 256};
    t.window = 512;
    add(out, "window_long_prefill", t);
  }

  // --- past the contract: the same defensive result on every backend -----------------------
  // Missing blocks: an entry -1 inside the context, one >= num_blocks, a context running past
  // the table's width, a sequence with no block at all (its queries see no key: zeros).
  for (bool decode : {false, true}) {
    AttnSpec s{decode ? decode_seqs({40, 33, 20, 9}) : std::vector<Seq>{{0, 40}, {20, 13}, {0, 20}, {0, 9}},
               8, 2, 64, 16, decode};
    s.edit = [](HostBatch& hb, int num_blocks) {
      const int st = hb.block_table_stride;
      hb.block_tables[size_t(0 * st + 1)] = -1;
      hb.block_tables[size_t(1 * st + 0)] = num_blocks;
      hb.context_lens[2] += 2 * hb.block_size;  // keys past the table's 3 columns
      for (int j = 0; j < st; ++j) hb.block_tables[size_t(3 * st + j)] = -1;
    };
    add(out, std::string(decode ? "decode" : "prefill") + "_missing_blocks_masked", s);
  }
  // Graph padding rows: context 0, slot -1, no block (zeros), among real decode rows.
  {
    AttnSpec s{decode_seqs({6, 21, 1, 1}), 8, 2, 128, 16, true};
    s.edit = [](HostBatch& hb, int) {
      for (int b : {2, 3}) {
        hb.context_lens[size_t(b)] = 0;
        hb.slot_mapping[size_t(b)] = -1;
        for (int j = 0; j < hb.block_table_stride; ++j)
          hb.block_tables[size_t(b * hb.block_table_stride + j)] = -1;
      }
    };
    add(out, "decode_graph_padding_rows_zero", s);
  }
  // context_lens below seqlen_q: the first queries see no key (zeros), the rest a prefix.
  {
    AttnSpec s{{{0, 6}, {4, 4}}, 4, 2, 32, 16};
    s.edit = [](HostBatch& hb, int) { hb.context_lens[0] = 3; };
    add(out, "context_below_seqlen_q", s);
  }
  // cu_seqlens_q outside [0, T]: rows clipped to the batch; a decreasing entry: no rows (the
  // rows no sequence covers stay untouched).
  {
    AttnSpec s{{{6, 2}, {7, 2}}, 4, 2, 64, 16};
    s.edit = [](HostBatch& hb, int) { hb.cu_seqlens_q = {-2, 2, 7}; };
    add(out, "cu_seqlens_clipped_to_batch", s);
    AttnSpec d{{{6, 3}, {4, 1}}, 4, 2, 64, 16};
    d.edit = [](HostBatch& hb, int) { hb.cu_seqlens_q = {0, 2, 1}; };
    add(out, "cu_seqlens_decreasing_no_rows", d);
  }
}

}  // namespace nanovllm::conformance
