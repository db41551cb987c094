#include "server/prompt_prep.h"

#include <algorithm>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"

namespace nanovllm::server {

using nlohmann::json;


std::vector<int> render_prompt_ids(const GenerationRequest& r, const Tokenizer* tok, bool add_special_tokens) {
  if (r.chat) {
    if (!tok) throw bad_request("this model has no tokenizer.json: use /v1/completions with token ids", "messages");
    if (tok->chat_template().empty())
      throw bad_request("this model's tokenizer_config.json has no chat_template: use /v1/completions", "messages");
    json kwargs = r.template_kwargs;
    json tools = nullptr;
    if (auto it = kwargs.find("tools"); it != kwargs.end()) {
      tools = std::move(*it);
      kwargs.erase("tools");
    }
    std::string text;
    try {
      text = apply_chat_template(tok->chat_template(), r.messages, r.add_generation_prompt, kwargs,
                                 tok->bos_token(), tok->eos_token(), tools);
    } catch (const Error& e) {
      throw bad_request("chat template: " + client_message(e.what()), "messages");
    }
    return tok->encode(text, /*add_special_tokens=*/false);  // the template has them (vLLM's default)
  }
  if (auto* text = std::get_if<std::string>(&r.prompt)) {
    if (!tok) throw bad_request("this model has no tokenizer.json: send the prompt as token ids", "prompt");
    return tok->encode(*text, add_special_tokens);
  }
  if (auto* ids = std::get_if<std::vector<int>>(&r.prompt)) return *ids;
  throw ApiError(500, "internal error: request without a prompt", "server_error");
}

EngineRequest prepare_prompt(const GenerationRequest& r, const Tokenizer* tok, int max_model_len) {
  EngineRequest out;
  out.params = r.params;
  out.prompt_ids = render_prompt_ids(r, tok);
  const char* prompt_param = r.chat ? "messages" : "prompt";
  const int64_t n = int64_t(out.prompt_ids.size());
  if (n == 0) throw bad_request("The decoder prompt cannot be empty", prompt_param);
  const std::string head = "This model's maximum context length is " + std::to_string(max_model_len) + " tokens";
  if (!r.max_tokens_set) {
    if (n >= max_model_len)
      throw bad_request(head + ". However, your request has " + std::to_string(n) +
                            " input tokens. Please reduce the length of the input messages.",
                        prompt_param);
    out.params.max_tokens = int(max_model_len - n);
    out.params.min_tokens = std::min(out.params.min_tokens, out.params.max_tokens);
    return out;
  }
  const int64_t m = r.params.max_tokens;
  if (n + m > max_model_len)
    throw bad_request("'max_tokens' or 'max_completion_tokens' is too large: " + std::to_string(m) + ". " + head +
                          " and your request has " + std::to_string(n) + " input tokens (" + std::to_string(m) +
                          " > " + std::to_string(max_model_len) + " - " + std::to_string(n) + ").",
                      r.chat ? "max_completion_tokens" : "max_tokens");
  return out;
}

PrepGate::Slot PrepGate::acquire(std::chrono::steady_clock::time_point deadline,
                                 const std::function<bool()>& cancelled) {
  std::unique_lock<std::mutex> lk(mu_);
  if (free_ > 0) {
    --free_;
    return Slot(this);
  }
  if (max_waiting_ > 0 && waiting_ >= max_waiting_)
    throw ApiError(503, "too many requests waiting for tokenization (" + std::to_string(waiting_) +
                            " >= --max-waiting " + std::to_string(max_waiting_) + "); retry later",
                   "service_unavailable", "", "server_overloaded");
  ++waiting_;
  for (;;) {
    if (cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return free_ > 0; })) break;
    const bool gone = cancelled && cancelled();
    if (gone || std::chrono::steady_clock::now() >= deadline) {
      --waiting_;
      if (gone) return Slot(nullptr);
      throw ApiError(503, "timed out waiting for a tokenizer slot; retry later", "service_unavailable", "",
                     "server_overloaded");
    }
  }
  --waiting_;
  --free_;
  return Slot(this);
}

void PrepGate::release() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++free_;
  }
  cv_.notify_one();
}

}  // namespace nanovllm::server
