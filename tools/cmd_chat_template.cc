// `nanovllm chat-template`: renders a model's chat template (tokenizer_config.json) for a message
// list, like transformers' tokenizer.apply_chat_template(messages, tokenize=False).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat/chat_template.h"
#include "command.h"
#include "util/check.h"
#include "util/json_bounded.h"

namespace {

using ojson = nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  NV_CHECK(f.good(), "cannot open ", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Bounded nesting depth: deeper input is an error, never a stack overflow while rendering.
ojson read_json(const std::string& path) { return nanovllm::read_ordered_json_file(path); }

// bos_token / eos_token are strings or AddedToken objects {"content": ...}; absent/null -> "".
std::string token_string(const ojson& cfg, const char* key) {
  if (!cfg.contains(key) || cfg[key].is_null()) return "";
  const ojson& t = cfg[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string()) return t["content"].get<std::string>();
  NV_THROW("tokenizer_config.json: unexpected ", key, " value ", t.dump());
}

int run_chat_template(int argc, char** argv) {
  CLI::App app{"Render a chat template (tokenizer_config.json chat_template) for a message list"};
  std::string dir, messages_path, tools_path, template_path, thinking, kwargs_path;
  bool add_generation_prompt = false;
  app.add_option("--tokenizer", dir, "Directory with tokenizer_config.json")->required();
  app.add_option("--messages", messages_path, "JSON file: list of messages")->required();
  app.add_flag("--add-generation-prompt", add_generation_prompt, "Append the assistant turn header");
  app.add_option("--enable-thinking", thinking, "Pass enable_thinking=true|false to the template");
  app.add_option("--tools", tools_path, "JSON file: list of tool schemas");
  app.add_option("--template", template_path, "Use this template file instead of tokenizer_config.json's");
  app.add_option("--kwargs", kwargs_path, "JSON file: object of extra template variables");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);  // prints help or the usage error
    return rc == 0 ? 0 : 2;
  }
  if (!thinking.empty() && thinking != "true" && thinking != "false") {
    std::fprintf(stderr, "--enable-thinking must be true or false\n");
    return 2;
  }

  ojson cfg = read_json(dir + "/tokenizer_config.json");
  std::string tmpl;
  if (!template_path.empty()) {
    tmpl = read_file(template_path);
  } else {
    NV_CHECK(cfg.contains("chat_template"), dir, "/tokenizer_config.json has no chat_template");
    const ojson& ct = cfg["chat_template"];
    if (ct.is_string()) {
      tmpl = ct.get<std::string>();
    } else if (ct.is_array()) {  // [{"name": "default", "template": ...}, ...]
      for (auto& t : ct)
        if (t.value("name", "") == "default") tmpl = t.value("template", "");
      NV_CHECK(!tmpl.empty(), "tokenizer_config.json chat_template list has no 'default' entry");
    } else {
      NV_THROW("tokenizer_config.json chat_template must be a string or a list");
    }
  }

  ojson messages = read_json(messages_path);
  NV_CHECK(messages.is_array(), messages_path, " must hold a JSON list of messages");
  ojson tools = tools_path.empty() ? ojson(nullptr) : read_json(tools_path);
  ojson kwargs = kwargs_path.empty() ? ojson::object() : read_json(kwargs_path);
  NV_CHECK(kwargs.is_object(), kwargs_path, " must hold a JSON object");
  if (!thinking.empty()) kwargs["enable_thinking"] = thinking == "true";

  std::string out = nanovllm::apply_chat_template(tmpl, messages, add_generation_prompt, kwargs,
                                                  token_string(cfg, "bos_token"), token_string(cfg, "eos_token"),
                                                  tools);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

NANOVLLM_COMMAND("chat-template", "Render a chat template for a message list", run_chat_template);
