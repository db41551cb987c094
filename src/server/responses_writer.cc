#include "server/responses_writer.h"

namespace nanovllm::server {

using nlohmann::json;

ResponsesWriter::ResponsesWriter(json response) : resp_(std::move(response)) {
  resp_["output"] = json::array();
  resp_["status"] = "in_progress";
  resp_["error"] = nullptr;
  resp_["incomplete_details"] = nullptr;
  resp_["usage"] = nullptr;
}

std::string ResponsesWriter::event(const std::string& type, json fields) {
  fields["type"] = type;
  fields["sequence_number"] = seq_++;
  return sse_named_event(type, fields);
}

std::string ResponsesWriter::item_id(const char* prefix) const {
  // Unique within the response and across responses: the response id's random part + index.
  const std::string rid = resp_["id"].get<std::string>();
  const std::string tail = rid.substr(rid.find('_') == std::string::npos ? 0 : rid.find('_') + 1);
  return std::string(prefix) + "_" + tail + "_" + std::to_string(resp_["output"].size());
}

std::string ResponsesWriter::begin() {
  std::string out = event("response.created", json{{"response", resp_}});
  out += event("response.in_progress", json{{"response", resp_}});
  return out;
}

std::string ResponsesWriter::open(Kind k, json it) {
  std::string out = close();
  open_ = k;
  const size_t index = resp_["output"].size();
  out += event("response.output_item.added", json{{"output_index", index}, {"item", it}});
  resp_["output"].push_back(std::move(it));
  const std::string id = item()["id"];
  if (k == Kind::kMessage) {
    json part{{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}, {"logprobs", json::array()}};
    out += event("response.content_part.added",
                 json{{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
    item()["content"].push_back(std::move(part));
  } else if (k == Kind::kReasoning) {
    json part{{"type", "reasoning_text"}, {"text", ""}};
    out += event("response.content_part.added",
                 json{{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
    item()["content"].push_back(std::move(part));
  }
  return out;
}

std::string ResponsesWriter::close(const char* status) {
  if (open_ == Kind::kNone) return "";
  std::string out;
  const size_t index = resp_["output"].size() - 1;
  json& it = item();
  const std::string id = it["id"];
  if (open_ == Kind::kMessage || open_ == Kind::kReasoning) {
    const json& part = it["content"][0];
    const bool text = open_ == Kind::kMessage;
    json done{{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", part["text"]}};
    if (text) done["logprobs"] = json::array();
    out += event(text ? "response.output_text.done" : "response.reasoning_text.done", std::move(done));
    out += event("response.content_part.done",
                 json{{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
  } else if (open_ == Kind::kFunctionCall) {
    // Arguments that are not a JSON document were cut short (max_output_tokens mid-call).
    if (json::parse(it["arguments"].get<std::string>(), nullptr, false).is_discarded()) status = "incomplete";
    out += event("response.function_call_arguments.done",
                 json{{"item_id", id}, {"output_index", index}, {"name", it["name"]}, {"arguments", it["arguments"]}});
  }
  it["status"] = status;
  out += event("response.output_item.done", json{{"output_index", index}, {"item", it}});
  open_ = Kind::kNone;
  return out;
}

std::string ResponsesWriter::delta(const json& d) {
  std::string out;
  auto text_delta = [&](const char* type, const std::string& text) {
    json& part = item()["content"][0];
    part["text"] = part["text"].get<std::string>() + text;
    json ev{{"item_id", item()["id"]}, {"output_index", resp_["output"].size() - 1}, {"content_index", 0}, {"delta", text}};
    if (open_ == Kind::kMessage) ev["logprobs"] = json::array();
    out += event(type, std::move(ev));
  };
  if (auto r = d.find("reasoning_content"); r != d.end() && r->is_string()) {
    if (open_ != Kind::kReasoning)
      out += open(Kind::kReasoning, json{{"id", item_id("rs")}, {"type", "reasoning"}, {"summary", json::array()},
                                         {"content", json::array()}, {"status", "in_progress"}});
    text_delta("response.reasoning_text.delta", *r);
    message_["reasoning_content"] = message_.value("reasoning_content", "") + r->get<std::string>();
  }
  if (auto c = d.find("content"); c != d.end() && c->is_string() && !c->get<std::string>().empty()) {
    if (open_ != Kind::kMessage)
      out += open(Kind::kMessage, json{{"id", item_id("msg")}, {"type", "message"}, {"role", "assistant"},
                                       {"status", "in_progress"}, {"content", json::array()}});
    text_delta("response.output_text.delta", *c);
    message_["content"] = message_["content"].get<std::string>() + c->get<std::string>();
  }
  if (auto tcs = d.find("tool_calls"); tcs != d.end() && tcs->is_array()) {
    for (const json& tc : *tcs) {
      const json fn = tc.value("function", json::object());
      if (tc.contains("id")) {
        out += open(Kind::kFunctionCall, json{{"id", item_id("fc")}, {"type", "function_call"}, {"call_id", tc["id"]},
                                              {"name", fn.value("name", "")}, {"arguments", ""}, {"status", "in_progress"}});
        if (!message_.contains("tool_calls")) message_["tool_calls"] = json::array();
        message_["tool_calls"].push_back(json{{"id", tc["id"]}, {"type", "function"},
                                              {"function", {{"name", fn.value("name", "")}, {"arguments", ""}}}});
      }
      const std::string args = fn.value("arguments", "");
      if (open_ != Kind::kFunctionCall || args.empty()) continue;
      item()["arguments"] = item()["arguments"].get<std::string>() + args;
      json& mc = message_["tool_calls"].back()["function"]["arguments"];
      mc = mc.get<std::string>() + args;
      out += event("response.function_call_arguments.delta",
                   json{{"item_id", item()["id"]}, {"output_index", resp_["output"].size() - 1}, {"delta", args}});
    }
  }
  return out;
}

std::string ResponsesWriter::finish(const FinishInfo& f) {
  // The last item was cut short when the response was.
  std::string out = close(f.finish_reason == "length" || f.finish_reason == "abort" ? "incomplete" : "completed");
  std::string type = "response.completed";
  if (f.finish_reason == "length") {
    resp_["status"] = "incomplete";
    resp_["incomplete_details"] = json{{"reason", "max_output_tokens"}};
    type = "response.incomplete";
  } else if (f.finish_reason == "abort") {
    resp_["status"] = "cancelled";
    type = "response.incomplete";
  } else {
    resp_["status"] = "completed";
  }
  resp_["usage"] = json{{"input_tokens", f.prompt_tokens},
                        {"input_tokens_details", {{"cached_tokens", f.cached_tokens}}},
                        {"output_tokens", f.completion_tokens},
                        {"output_tokens_details", {{"reasoning_tokens", f.reasoning_tokens}}},
                        {"total_tokens", f.prompt_tokens + f.completion_tokens}};
  out += event(type, json{{"response", resp_}});
  finished_ = true;
  if (on_finish) on_finish(resp_, message_);
  return out;
}

std::string ResponsesWriter::stream_error(const ApiError& e) {
  resp_["status"] = "failed";
  resp_["error"] = json{{"code", e.code.empty() ? "server_error" : e.code}, {"message", e.what()}};
  finished_ = true;
  std::string out = event("error", json{{"code", e.code.empty() ? json(nullptr) : json(e.code)},
                                        {"message", e.what()},
                                        {"param", e.param.empty() ? json(nullptr) : json(e.param)}});
  return out + event("response.failed", json{{"response", resp_}});
}

}  // namespace nanovllm::server
