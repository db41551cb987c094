// Small helpers shared by the engine unit tests.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/stop_checker.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm::test {

inline std::vector<int> iota_tokens(int n, int start) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + i;
  return v;
}

// In the engine a Request owns a sequence and the SamplingParams it views; here the shared_ptr
// (which points at the sequence) owns both.
struct SeqOwner {
  SamplingParams params;
  Sequence seq;
  SeqOwner(uint64_t id, std::vector<int> prompt, int block_size, const SamplingParams& p)
      : params(p), seq(id, std::move(prompt), params, block_size) {}
};
inline std::shared_ptr<Sequence> make_seq(uint64_t id, std::vector<int> prompt, int block_size,
                                          const SamplingParams& p = {}) {
  auto owner = std::make_shared<SeqOwner>(id, std::move(prompt), block_size, p);
  return std::shared_ptr<Sequence>(owner, &owner->seq);
}

// The scheduler does not own sequences (the engine's requests do): this one keeps the
// sequences added to it alive for the test.
class TestScheduler : public Scheduler {
 public:
  using Scheduler::Scheduler;
  void add(std::shared_ptr<Sequence> seq) {
    Scheduler::add(seq.get());  // throws before keeping it when rejected
    owned_.push_back(std::move(seq));
  }

 private:
  std::vector<std::shared_ptr<Sequence>> owned_;
};

inline const char* name(FinishReason r) { return finish_reason_name(r); }

// The engine decides finishes with StopChecker; scheduler tests use its token rules alone
// (EOS ids, stop ids, min_tokens, max_tokens, the scheduler's max_seq_len).
inline StopCheck token_stops(std::vector<int> eos_ids, const Scheduler& s) {
  const int max_len = s.max_seq_len();
  return [eos = std::move(eos_ids), max_len](Sequence& seq, int token, size_t) {
    return token_stop_reason(seq, token, eos, max_len);
  };
}

}  // namespace nanovllm::test
