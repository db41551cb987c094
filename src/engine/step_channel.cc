#include "engine/step_channel.h"

#include <algorithm>
#include <cstring>

#include "parallel/gloo_group.h"
#include "util/check.h"

namespace nanovllm {

namespace {

enum : int32_t { kRun = 1, kShutdown = 2 };
constexpr size_t kScalars = 8, kArrays = 7;

// The HostBatch arrays in message order (const or not).
template <class HB, class F>
void for_each_array(HB& hb, F&& f) {
  f(hb.input_ids);
  f(hb.positions);
  f(hb.slot_mapping);
  f(hb.cu_seqlens_q);
  f(hb.context_lens);
  f(hb.block_tables);
  f(hb.logits_indices);
}

}  // namespace

std::vector<int32_t> encode_step(const HostBatch& hb) {
  std::vector<int32_t> w = {kRun,          hb.num_seqs,     hb.num_tokens,
                            hb.max_seqlen_q, hb.max_seqlen_k, hb.block_size,
                            hb.block_table_stride, hb.decode_only ? 1 : 0};
  for_each_array(hb, [&](const std::vector<int32_t>& a) { w.push_back(int32_t(a.size())); });
  for_each_array(hb, [&](const std::vector<int32_t>& a) { w.insert(w.end(), a.begin(), a.end()); });
  return w;
}

HostBatch decode_step(const int32_t* w, size_t n) {
  NV_CHECK(n >= kScalars + kArrays && w[0] == kRun, "step message: bad header (", n, " words)");
  HostBatch hb;
  hb.num_seqs = w[1];
  hb.num_tokens = w[2];
  hb.max_seqlen_q = w[3];
  hb.max_seqlen_k = w[4];
  hb.block_size = w[5];
  hb.block_table_stride = w[6];
  hb.decode_only = w[7] != 0;
  size_t at = kScalars + kArrays, i = 0;
  for_each_array(hb, [&](std::vector<int32_t>& a) {
    const int32_t len = w[kScalars + i];
    NV_CHECK(len >= 0 && at + size_t(len) <= n, "step message: array ", i, " of ", len,
             " words overruns the ", n, "-word message");
    a.assign(w + at, w + at + len);
    at += size_t(len);
    ++i;
  });
  NV_CHECK(at == n, "step message: ", n - at, " trailing words");
  return hb;
}

void StepChannel::send(const std::vector<int32_t>& words) {
  constexpr size_t kInlineWords = kInline / 4 - 1;
  buf_.assign(kInline / 4, 0);
  buf_[0] = int32_t(words.size());
  std::copy_n(words.begin(), std::min(words.size(), kInlineWords), buf_.begin() + 1);
  comm_.broadcast_bytes(buf_.data(), kInline, 0);
  if (words.size() > kInlineWords) {
    std::vector<int32_t> rest(words.begin() + long(kInlineWords), words.end());
    comm_.broadcast_bytes(rest.data(), rest.size() * 4, 0);
  }
}

void StepChannel::send_step(const HostBatch& hb) { send(encode_step(hb)); }

void StepChannel::send_shutdown() { send({kShutdown}); }

bool StepChannel::receive(HostBatch* hb) {
  constexpr size_t kInlineWords = kInline / 4 - 1;
  buf_.assign(kInline / 4, 0);
  comm_.broadcast_bytes(buf_.data(), kInline, 0);
  const size_t n = size_t(buf_[0]);
  NV_CHECK(buf_[0] >= 1, "step message: bad length ", buf_[0]);
  std::vector<int32_t> words(buf_.begin() + 1, buf_.begin() + 1 + long(std::min(n, kInlineWords)));
  if (n > kInlineWords) {
    words.resize(n);
    comm_.broadcast_bytes(words.data() + kInlineWords, (n - kInlineWords) * 4, 0);
  }
  if (words[0] == kShutdown) return false;
  *hb = decode_step(words.data(), words.size());
  return true;
}

void send_text(GlooGroup& control, const std::string& text) {
  uint64_t n = text.size();
  control.broadcast(&n, sizeof n, 0);
  std::string copy = text;
  control.broadcast(copy.data(), copy.size(), 0);
}

std::string receive_text(GlooGroup& control) {
  uint64_t n = 0;
  control.broadcast(&n, sizeof n, 0);
  NV_CHECK(n < (uint64_t(1) << 30), "rank 0 sent a ", n, "-byte configuration");
  std::string text(size_t(n), '\0');
  control.broadcast(text.data(), text.size(), 0);
  return text;
}

}  // namespace nanovllm
