// Chat template front end: compile cache and the transformers-style render context.
#include "chat/chat_template.h"

#include <list>
#include <mutex>

#include "chat/jinja_interp.h"
#include "util/check.h"
#include "util/json_bounded.h"

namespace nanovllm {

// Copying or converting a json value recurses per nesting level: the depth is checked
// (iteratively) first. The render context wraps the caller's values in one more object.
template <class J>
static void check_depth(const J& j, const char* what, size_t limit = kJsonMaxDepth) {
  if (json_depth(j) > limit) NV_THROW(what, " nested deeper than ", limit, " levels");
}

std::shared_ptr<ChatTemplate> ChatTemplate::compile(const std::string& template_text) {
  auto t = std::shared_ptr<ChatTemplate>(new ChatTemplate());
  t->tmpl_ = std::make_shared<const jinja::Template>(template_text);
  return t;
}

std::shared_ptr<ChatTemplate> ChatTemplate::cached(const std::string& template_text) {
  // A server has one or two templates; a tiny most-recently-used list is enough.
  static std::mutex mu;
  static std::list<std::pair<std::string, std::shared_ptr<ChatTemplate>>> cache;
  constexpr size_t kMaxEntries = 8;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = cache.begin(); it != cache.end(); ++it)
      if (it->first == template_text) {
        cache.splice(cache.begin(), cache, it);
        return it->second;
      }
  }
  auto t = compile(template_text);  // parse outside the lock
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace_front(template_text, t);
  if (cache.size() > kMaxEntries) cache.pop_back();
  return t;
}

std::string ChatTemplate::render(const nlohmann::json& context) const {
  NV_CHECK(context.is_object(), "chat template context must be a JSON object");
  check_depth(context, "template input", kJsonMaxDepth + 1);
  return tmpl_->render(jinja::from_json(context));
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  NV_CHECK(context.is_object(), "chat template context must be a JSON object");
  check_depth(context, "template input", kJsonMaxDepth + 1);
  return tmpl_->render(jinja::from_json(context));
}

std::string render_chat_template(const std::string& template_text, const nlohmann::json& context) {
  return ChatTemplate::cached(template_text)->render(context);
}

std::string render_chat_template(const std::string& template_text, const nlohmann::ordered_json& context) {
  return ChatTemplate::cached(template_text)->render(context);
}

template <class J>
static J build_context(const J& messages, bool add_generation_prompt, const J& extra_kwargs,
                       const std::string& bos_token, const std::string& eos_token, const J& tools) {
  NV_CHECK(messages.is_array(), "messages must be a JSON array");
  check_depth(messages, "messages");
  check_depth(extra_kwargs, "chat template kwargs");
  check_depth(tools, "tools");
  NV_CHECK(extra_kwargs.is_null() || extra_kwargs.is_object(), "chat template kwargs must be a JSON object");
  J ctx = J::object();
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = add_generation_prompt;
  if (!tools.is_null()) ctx["tools"] = tools;
  ctx["bos_token"] = bos_token;
  ctx["eos_token"] = eos_token;
  if (extra_kwargs.is_object())
    for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it) ctx[it.key()] = it.value();
  return ctx;
}

std::string apply_chat_template(const std::string& template_text, const nlohmann::json& messages,
                                bool add_generation_prompt, const nlohmann::json& extra_kwargs,
                                const std::string& bos_token, const std::string& eos_token,
                                const nlohmann::json& tools) {
  return render_chat_template(
      template_text, build_context(messages, add_generation_prompt, extra_kwargs, bos_token, eos_token, tools));
}

std::string apply_chat_template(const std::string& template_text, const nlohmann::ordered_json& messages,
                                bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs,
                                const std::string& bos_token, const std::string& eos_token,
                                const nlohmann::ordered_json& tools) {
  return render_chat_template(
      template_text, build_context(messages, add_generation_prompt, extra_kwargs, bos_token, eos_token, tools));
}

}  // namespace nanovllm
