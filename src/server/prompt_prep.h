// Prompt preparation on the HTTP handler threads, never on the engine thread (a 32 MB prompt
// tokenized there stalled every stream for 10 s): chat-template rendering, tokenization, and
// vLLM's length rules. PrepGate bounds how many preparations run at once (their CPU is shared
// with the engine) and how many may wait; the work itself is bounded by the body-size limit.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "server/engine_loop.h"
#include "server/openai_request.h"

namespace nanovllm {
class Tokenizer;
}

namespace nanovllm::server {

// Renders (chat) or tokenizes (text) `r`'s prompt, then applies vLLM's rules (ApiError 400):
// an empty prompt ("The decoder prompt cannot be empty"); max_tokens unset (chat) becomes the
// rest of the context and a prompt of max_model_len tokens or more is refused; otherwise
// prompt tokens + max_tokens must fit max_model_len.
// The prompt's token ids alone: rendered chat template or tokenized text (ApiError 400 without
// a tokenizer / chat template); /tokenize uses it too.
std::vector<int> render_prompt_ids(const GenerationRequest& r, const Tokenizer* tok, bool add_special_tokens = true);

EngineRequest prepare_prompt(const GenerationRequest& r, const Tokenizer* tok, int max_model_len);

// A counting semaphore with a bounded queue of waiters.
class PrepGate {
 public:
  PrepGate(int slots, int max_waiting) : free_(slots), max_waiting_(max_waiting) {}

  // Holds a slot while alive.
  class Slot {
   public:
    explicit Slot(PrepGate* g) : g_(g) {}
    Slot(Slot&& o) noexcept : g_(o.g_) { o.g_ = nullptr; }
    Slot(const Slot&) = delete;
    ~Slot() {
      if (g_) g_->release();
    }
    bool held() const { return g_ != nullptr; }

   private:
    PrepGate* g_;
  };

  // Waits for a free slot. Throws ApiError 503 when `max_waiting` requests already wait or
  // `deadline` passes; returns an empty slot (nothing held) when `cancelled()` turns true
  // (checked every 100 ms: the client went away).
  Slot acquire(std::chrono::steady_clock::time_point deadline, const std::function<bool()>& cancelled);

 private:
  friend class Slot;
  void release();
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
  int waiting_ = 0;
  const int max_waiting_;
};

}  // namespace nanovllm::server
