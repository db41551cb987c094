#include "replay/http_response.h"

#include <nlohmann/json.hpp>

#include "util/check.h"

namespace nanovllm::replay {

namespace {

using nlohmann::json;

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Anthropic's stop_reason and the Responses API's status, in the engine's words.
std::string engine_reason(const std::string& r) {
  if (r == "end_turn" || r == "stop_sequence" || r == "completed") return "stop";
  if (r == "max_tokens" || r == "max_output_tokens") return "length";
  return r;
}

void add_ids(const json& j, ChoiceOutput& c) {
  auto it = j.find("token_ids");
  if (it == j.end() || !it->is_array()) return;
  c.has_token_ids = true;
  for (const json& t : *it)
    if (t.is_number_integer()) c.token_ids.push_back(t.get<int>());
}

}  // namespace

ChoiceOutput& ResponseReader::choice(int index) {
  for (ChoiceOutput& c : choices_)
    if (c.index == index) return c;
  choices_.push_back({});
  choices_.back().index = index;
  return choices_.back();
}

bool ResponseReader::feed_sse_line(std::string_view line) {
  if (line.substr(0, 5) != "data:") return false;
  line.remove_prefix(5);
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.empty() || line == "[DONE]") return false;
  const json ev = json::parse(line, nullptr, false);
  if (!ev.is_object()) return false;
  bool content = false;
  if (auto cs = ev.find("choices"); cs != ev.end() && cs->is_array()) {  // completions / chat
    for (const json& c : *cs) {
      ChoiceOutput& o = choice(c.value("index", 0));
      std::string piece = str(c, "text");
      if (auto d = c.find("delta"); d != c.end() && d->is_object()) piece += str(*d, "content");
      add_ids(c, o);
      content = content || !piece.empty();
      o.text += piece;
      if (c.contains("finish_reason") && c["finish_reason"].is_string())
        o.finish_reason = c["finish_reason"].get<std::string>();
    }
    return content;
  }
  const std::string type = str(ev, "type");
  if (type == "content_block_delta" && ev.contains("delta")) {  // Anthropic
    const std::string piece = str(ev["delta"], "text");
    choice(0).text += piece;
    return !piece.empty();
  }
  if (type == "message_delta" && ev.contains("delta"))
    choice(0).finish_reason = engine_reason(str(ev["delta"], "stop_reason"));
  if (type == "response.output_text.delta") {  // Responses
    const std::string piece = str(ev, "delta");
    choice(0).text += piece;
    return !piece.empty();
  }
  if ((type == "response.completed" || type == "response.incomplete") && ev.contains("response")) {
    const json& r = ev["response"];
    std::string reason = str(r, "status");
    if (r.contains("incomplete_details") && r["incomplete_details"].is_object())
      reason = str(r["incomplete_details"], "reason");
    choice(0).finish_reason = engine_reason(reason);
  }
  return false;
}

void ResponseReader::read_whole(std::string_view body) {
  const json j = json::parse(body, nullptr, false);
  NV_CHECK(j.is_object(), "the response is not a JSON object");
  if (auto cs = j.find("choices"); cs != j.end() && cs->is_array()) {
    for (const json& c : *cs) {
      ChoiceOutput& o = choice(c.value("index", 0));
      o.text = str(c, "text");
      if (auto m = c.find("message"); m != c.end() && m->is_object()) o.text = str(*m, "content");
      add_ids(c, o);
      o.finish_reason = str(c, "finish_reason");
    }
    return;
  }
  if (auto content = j.find("content"); content != j.end() && content->is_array()) {  // Anthropic
    ChoiceOutput& o = choice(0);
    for (const json& b : *content) o.text += str(b, "text");
    o.finish_reason = engine_reason(str(j, "stop_reason"));
    return;
  }
  if (auto out = j.find("output"); out != j.end() && out->is_array()) {  // Responses
    ChoiceOutput& o = choice(0);
    for (const json& item : *out)
      if (item.value("type", "") == "message" && item.contains("content") && item["content"].is_array())
        for (const json& part : item["content"]) o.text += str(part, "text");
    std::string reason = str(j, "status");
    if (j.contains("incomplete_details") && j["incomplete_details"].is_object())
      reason = str(j["incomplete_details"], "reason");
    o.finish_reason = engine_reason(reason);
  }
}

}  // namespace nanovllm::replay
