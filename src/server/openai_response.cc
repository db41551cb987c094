#include "server/openai_response.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

#include "server/api_error.h"

namespace nanovllm::server {

using nlohmann::json;

std::string new_response_id(bool chat) {
  // Random 64-bit prefix per process + a counter: unique without a lock.
  static const uint64_t base = std::random_device{}() * 0x9E3779B97F4A7C15ull;
  static std::atomic<uint64_t> counter{0};
  char buf[48];
  std::snprintf(buf, sizeof buf, "%016llx%08llx", (unsigned long long)base,
                (unsigned long long)counter.fetch_add(1));
  return std::string(chat ? "chatcmpl-" : "cmpl-") + buf;
}

json usage_json(int prompt_tokens, int completion_tokens) {
  return json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}};
}

static json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

json completion_logprobs(const std::vector<int>& ids, const std::vector<TokenLogprobs>& lps,
                         const TokenText& text_of, size_t& offset) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  const size_t n = std::min(ids.size(), lps.size());
  for (size_t i = 0; i < n; ++i) {
    const std::string t = text_of(ids[i]);
    tokens.push_back(t);
    token_lps.push_back(lps[i].logprob);
    json top = json::object();
    for (const auto& alt : lps[i].top) top[text_of(alt.token_id)] = alt.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += t.size();
  }
  return json{{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops},
              {"text_offset", offsets}};
}

json chat_logprobs(const std::vector<int>& ids, const std::vector<TokenLogprobs>& lps,
                   const TokenText& text_of) {
  json content = json::array();
  const size_t n = std::min(ids.size(), lps.size());
  for (size_t i = 0; i < n; ++i) {
    const std::string t = text_of(ids[i]);
    json top = json::array();
    for (const auto& alt : lps[i].top) {
      const std::string at = text_of(alt.token_id);
      top.push_back(json{{"token", at}, {"logprob", alt.logprob}, {"bytes", bytes_of(at)}});
    }
    content.push_back(json{{"token", t}, {"logprob", lps[i].logprob}, {"bytes", bytes_of(t)},
                           {"top_logprobs", std::move(top)}});
  }
  return json{{"content", content}};
}

static json reason_or_null(const std::string& r) { return r.empty() ? json(nullptr) : json(r); }

static json envelope(const ResponseMeta& m, const char* object) {
  return json{{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}};
}

json completion_choice(int index, const std::string& text, const std::string& finish_reason, const json& logprobs) {
  return json{{"index", index}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", reason_or_null(finish_reason)}};
}

json chat_choice(int index, const json& message, const std::string& finish_reason, const json& logprobs) {
  return json{{"index", index}, {"message", message}, {"logprobs", logprobs},
              {"finish_reason", reason_or_null(finish_reason)}};
}

json response_body(const ResponseMeta& m, json choices, const json& usage) {
  json j = envelope(m, m.chat ? "chat.completion" : "text_completion");
  j["choices"] = std::move(choices);
  j["usage"] = usage;
  return j;
}

json completion_response(const ResponseMeta& m, const std::string& text,
                         const std::string& finish_reason, const json& logprobs, const json& usage) {
  return response_body(m, json::array({completion_choice(0, text, finish_reason, logprobs)}), usage);
}

json chat_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                   const json& logprobs, const json& usage) {
  json msg{{"role", "assistant"}, {"content", text}};
  return response_body(m, json::array({chat_choice(0, msg, finish_reason, logprobs)}), usage);
}

json completion_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                      const json& logprobs, int index) {
  json j = envelope(m, "text_completion");
  j["choices"] = json::array({completion_choice(index, text, finish_reason, logprobs)});
  return j;
}

json chat_chunk(const ResponseMeta& m, const json& delta, const std::string& finish_reason,
                const json& logprobs, int index) {
  json j = envelope(m, "chat.completion.chunk");
  j["choices"] = json::array({json{{"index", index}, {"delta", delta}, {"logprobs", logprobs},
                                   {"finish_reason", reason_or_null(finish_reason)}}});
  return j;
}

json usage_chunk(const ResponseMeta& m, const json& usage) {
  json j = envelope(m, m.chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage;
  return j;
}

std::string sse_event(const json& j) { return "data: " + dump_json(j) + "\n\n"; }
std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace nanovllm::server
