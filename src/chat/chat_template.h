// Chat templates (tokenizer_config.json "chat_template") rendered the way
// transformers.apply_chat_template does with Python jinja2: trim_blocks, lstrip_blocks,
// loopcontrols, raise_exception(), tojson with ensure_ascii=False, strftime_now().
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace nanovllm {

namespace jinja {
class Template;
}

// A parsed template; immutable and safe to render from several threads at once.
class ChatTemplate {
 public:
  // Parses (throws nanovllm::Error naming the template line on syntax errors / unsupported tags).
  static std::shared_ptr<ChatTemplate> compile(const std::string& template_text);
  // Like compile() but reuses a previously compiled template with the same text (small LRU cache).
  static std::shared_ptr<ChatTemplate> cached(const std::string& template_text);
  // `context` must be a JSON object. ordered_json keeps dict key order (visible through tojson).
  std::string render(const nlohmann::json& context) const;
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  std::shared_ptr<const jinja::Template> tmpl_;
};

// Renders a chat template. `context` holds everything passed to the template: messages, tools,
// add_generation_prompt, enable_thinking, bos_token, eos_token, and any extra kwargs.
// Throws nanovllm::Error for template syntax errors / unsupported constructs, naming the template line,
// and for raise_exception(msg) calls (message = msg).
std::string render_chat_template(const std::string& template_text, const nlohmann::json& context);
std::string render_chat_template(const std::string& template_text, const nlohmann::ordered_json& context);

// Convenience: builds the context like transformers.apply_chat_template does:
// {messages, add_generation_prompt, tools (only if non-null), bos_token, eos_token, ...extra_kwargs}.
// Note: nlohmann::json sorts object keys; pass ordered_json (overload below) to keep the key order
// of tool schemas / tool-call arguments, which `tojson` prints.
std::string apply_chat_template(const std::string& template_text, const nlohmann::json& messages,
                                bool add_generation_prompt, const nlohmann::json& extra_kwargs,
                                const std::string& bos_token, const std::string& eos_token,
                                const nlohmann::json& tools = nullptr);
std::string apply_chat_template(const std::string& template_text, const nlohmann::ordered_json& messages,
                                bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs,
                                const std::string& bos_token, const std::string& eos_token,
                                const nlohmann::ordered_json& tools = nullptr);

}  // namespace nanovllm
