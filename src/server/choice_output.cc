#include "server/choice_output.h"

namespace nanovllm::server {

using nlohmann::json;

json to_openai(const chat::ToolCall& c) {
  return {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

json to_openai(const chat::ToolCallDelta& d) {
  json j = {{"index", d.index}};
  json f = {{"arguments", d.arguments}};
  if (!d.id.empty()) {
    j["id"] = d.id;
    j["type"] = "function";
    f["name"] = d.name;
  }
  j["function"] = f;
  return j;
}

ChoiceOutput::ChoiceOutput(const ChoiceOptions& opt) : opt_(opt) {
  if (opt_.reasoning) {
    chat::ReasoningOptions ro;
    ro.prompt_opened = opt_.prompt_opened;
    reasoning_ = std::make_unique<chat::ReasoningStreamParser>(ro);
  }
  if (opt_.tools)
    tools_ = std::make_unique<chat::ToolCallStreamParser>(opt_.format, opt_.call_id_prefix);
}

std::vector<json> ChoiceOutput::reasoning_deltas(const std::string& r) {
  if (r.empty()) return {};
  reasoning_text_ += r;
  return {json{{"reasoning_content", r}}};
}

std::vector<json> ChoiceOutput::tool_deltas(const chat::ToolStreamDelta& td) {
  chat::accumulate(td, parsed_);
  std::vector<json> out;
  if (!td.content.empty()) out.push_back(json{{"content", td.content}});
  if (!td.tool_calls.empty()) {
    json calls = json::array();
    for (const auto& c : td.tool_calls) calls.push_back(to_openai(c));
    out.push_back(json{{"tool_calls", calls}});
  }
  return out;
}

std::vector<json> ChoiceOutput::content_deltas(const std::string& c) {
  if (c.empty()) return {};
  if (tools_) return tool_deltas(tools_->push(c));
  parsed_.content += c;
  return {json{{"content", c}}};
}

static void append(std::vector<json>& to, std::vector<json> more) {
  for (auto& j : more) to.push_back(std::move(j));
}

std::vector<json> ChoiceOutput::push(const std::string& text) {
  if (!reasoning_) return content_deltas(text);
  chat::ReasoningDelta d = reasoning_->push(text);
  std::vector<json> out = reasoning_deltas(d.reasoning);
  append(out, content_deltas(d.content));
  return out;
}

std::vector<json> ChoiceOutput::finish() {
  std::vector<json> out;
  if (reasoning_) {
    chat::ReasoningDelta d = reasoning_->finish();
    out = reasoning_deltas(d.reasoning);
    append(out, content_deltas(d.content));
  }
  if (tools_) append(out, tool_deltas(tools_->finish()));
  return out;
}

std::string ChoiceOutput::finish_reason(const std::string& engine_reason) const {
  if (tools_ && tools_->num_calls() > 0 && engine_reason == "stop") return "tool_calls";
  return engine_reason;
}

json ChoiceOutput::message() const {
  json m{{"role", "assistant"}};
  const bool calls = !parsed_.calls.empty();
  m["content"] = calls && parsed_.content.empty() ? json(nullptr) : json(parsed_.content);
  if (!reasoning_text_.empty()) m["reasoning_content"] = reasoning_text_;
  if (calls) {
    json arr = json::array();
    for (const auto& c : parsed_.calls) arr.push_back(to_openai(c));
    m["tool_calls"] = arr;
  }
  return m;
}

}  // namespace nanovllm::server
