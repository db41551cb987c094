#include "server/anthropic_writer.h"

#include "server/anthropic_request.h"

namespace nanovllm::server {

using nlohmann::json;

AnthropicWriter::AnthropicWriter(std::string id, std::string model, int prompt_tokens) {
  msg_ = json{{"id", std::move(id)},
              {"type", "message"},
              {"role", "assistant"},
              {"model", std::move(model)},
              {"content", json::array()},
              {"stop_reason", nullptr},
              {"stop_sequence", nullptr},
              {"usage", {{"input_tokens", prompt_tokens}, {"output_tokens", 0}}}};
}

std::string AnthropicWriter::begin() {
  return sse_named_event("message_start", json{{"type", "message_start"}, {"message", msg_}});
}

std::string AnthropicWriter::open(Kind k, json block) {
  std::string out = close();
  open_ = k;
  tool_args_.clear();
  const size_t index = msg_["content"].size();
  out += sse_named_event("content_block_start",
                         json{{"type", "content_block_start"}, {"index", index}, {"content_block", block}});
  msg_["content"].push_back(std::move(block));
  return out;
}

std::string AnthropicWriter::close() {
  if (open_ == Kind::kNone) return "";
  const size_t index = msg_["content"].size() - 1;
  if (open_ == Kind::kToolUse) {
    // The whole message carries the parsed input; arguments that are not a JSON object (a
    // model that broke off mid-call) are kept whole rather than dropped.
    json input = json::parse(tool_args_.empty() ? "{}" : tool_args_, nullptr, false);
    if (input.is_discarded() || !input.is_object()) input = json{{"_raw_arguments", tool_args_}};
    msg_["content"][index]["input"] = std::move(input);
  }
  open_ = Kind::kNone;
  return sse_named_event("content_block_stop", json{{"type", "content_block_stop"}, {"index", index}});
}

std::string AnthropicWriter::delta(const json& d) {
  std::string out;
  auto block_delta = [&](json delta) {
    const size_t index = msg_["content"].size() - 1;
    out += sse_named_event("content_block_delta", json{{"type", "content_block_delta"}, {"index", index}, {"delta", delta}});
  };
  if (auto r = d.find("reasoning_content"); r != d.end() && r->is_string()) {
    if (open_ != Kind::kThinking) out += open(Kind::kThinking, json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
    msg_["content"].back()["thinking"] = msg_["content"].back()["thinking"].get<std::string>() + r->get<std::string>();
    block_delta(json{{"type", "thinking_delta"}, {"thinking", *r}});
  }
  if (auto c = d.find("content"); c != d.end() && c->is_string() && !c->get<std::string>().empty()) {
    if (open_ != Kind::kText) out += open(Kind::kText, json{{"type", "text"}, {"text", ""}});
    msg_["content"].back()["text"] = msg_["content"].back()["text"].get<std::string>() + c->get<std::string>();
    block_delta(json{{"type", "text_delta"}, {"text", *c}});
  }
  if (auto tcs = d.find("tool_calls"); tcs != d.end() && tcs->is_array()) {
    for (const json& tc : *tcs) {
      if (tc.contains("id")) {
        // A new call: "call_<...>" ids become Anthropic's "toolu_<...>".
        std::string id = tc["id"].get<std::string>();
        if (id.rfind("call_", 0) == 0) id = "toolu_" + id.substr(5);
        out += open(Kind::kToolUse, json{{"type", "tool_use"}, {"id", id},
                                         {"name", tc["function"].value("name", "")}, {"input", json::object()}});
      }
      if (open_ != Kind::kToolUse) continue;  // (arguments without a call: impossible by the parser)
      const std::string args = tc.contains("function") ? tc["function"].value("arguments", "") : "";
      if (args.empty()) continue;
      tool_args_ += args;
      block_delta(json{{"type", "input_json_delta"}, {"partial_json", args}});
    }
  }
  return out;
}

std::string AnthropicWriter::stop_reason(const FinishInfo& f) {
  if (f.finish_reason == "tool_calls") return "tool_use";
  if (f.finish_reason == "length") return "max_tokens";
  if (!f.stop_reason.empty()) return "stop_sequence";
  return "end_turn";
}

std::string AnthropicWriter::finish(const FinishInfo& f) {
  std::string out = close();
  msg_["stop_reason"] = stop_reason(f);
  msg_["stop_sequence"] = f.stop_reason.empty() || f.finish_reason == "tool_calls" ? json(nullptr) : json(f.stop_reason);
  // Anthropic counts prompt tokens read from the cache apart from input_tokens.
  json& usage = msg_["usage"];
  usage["input_tokens"] = f.prompt_tokens - f.cached_tokens;
  usage["output_tokens"] = f.completion_tokens;
  usage["cache_read_input_tokens"] = f.cached_tokens;
  out += sse_named_event("message_delta",
                         json{{"type", "message_delta"},
                              {"delta", {{"stop_reason", msg_["stop_reason"]}, {"stop_sequence", msg_["stop_sequence"]}}},
                              {"usage", usage}});
  out += sse_named_event("message_stop", json{{"type", "message_stop"}});
  return out;
}

std::string AnthropicWriter::stream_error(const ApiError& e) {
  return sse_named_event("error", anthropic_error_json(e));
}

}  // namespace nanovllm::server
