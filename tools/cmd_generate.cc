// `nanovllm generate`: offline batched generation from text, a prompt file or token ids.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "engine/stats_json.h"
#include "engine_flags.h"
#include "nanovllm/llm.h"
#include "util/check.h"

namespace nanovllm::cli {
namespace {

int run_generate(int argc, char** argv) {
  CLI::App app{"Generate text or tokens with continuous batching", "nanovllm generate"};
  Config cfg;
  SamplingParams sp;
  std::vector<std::string> prompts, prompt_ids;
  std::string prompt_file;
  bool chat = false, json = false, progress = false;
  std::string enable_thinking;
  app.add_option("--model", cfg.model, "Hugging Face model directory")->required();
  app.add_option("--prompt", prompts, "prompt text (repeatable)");
  app.add_option("--prompt-file", prompt_file, "file with one prompt per line");
  app.add_option("--prompt-ids", prompt_ids, "prompt token ids, e.g. 1,2,3 (repeatable)");
  app.add_flag("--chat", chat, "wrap each prompt as a user message with the chat template");
  app.add_option("--enable-thinking", enable_thinking, "chat template enable_thinking: true|false");
  app.add_flag("--json", json, "print outputs and statistics as JSON");
  app.add_flag("--progress", progress, "progress bar on stderr");
  add_engine_flags(app, cfg);
  add_sampling_flags(app, sp);
  CLI11_PARSE(app, argc, argv);

  sp.validate();  // the flags checked their own values; this, the pairs (min_tokens)
  std::vector<std::string> texts = prompts;
  if (!prompt_file.empty()) {
    std::istringstream is(read_file(prompt_file));
    std::string line;
    while (std::getline(is, line))
      if (!line.empty()) texts.push_back(line);
  }
  NV_CHECK(!texts.empty() || !prompt_ids.empty(),
           "no prompt: give --prompt, --prompt-file or --prompt-ids");

  LLM llm(cfg);
  std::vector<Prompt> all;
  for (auto& t : texts) {
    if (chat) {
      nlohmann::json msgs = nlohmann::json::array({{{"role", "user"}, {"content", t}}});
      nlohmann::json extra = nlohmann::json::object();
      if (!enable_thinking.empty()) extra["enable_thinking"] = enable_thinking == "true";
      std::string rendered = llm.apply_chat_template(msgs.dump(), true, extra.dump());
      // The template already contains any BOS; vLLM-style: no extra special tokens.
      Prompt p(rendered);
      p.add_special_tokens = false;
      all.push_back(std::move(p));
    } else {
      all.emplace_back(t);
    }
  }
  for (auto& s : prompt_ids) all.emplace_back(parse_ids(s));

  auto t0 = std::chrono::steady_clock::now();
  std::vector<RequestOutput> outs = llm.generate(all, {sp}, progress);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t gen = 0;
  for (auto& o : outs) gen += int64_t(o.token_ids.size());

  int rc = 0;
  if (json) {
    nlohmann::json j;
    j["outputs"] = nlohmann::json::array();
    for (auto& o : outs) j["outputs"].push_back(to_json(o));
    j["stats"] = to_json(llm.stats());
    j["seconds"] = secs;
    j["output_tokens"] = gen;
    j["output_tokens_per_s"] = secs > 0 ? double(gen) / secs : 0.0;
    std::cout << j.dump() << std::endl;
  } else {
    for (auto& o : outs) {
      if (!o.error.empty()) {
        std::fprintf(stderr, "request %llu: error: %s\n", (unsigned long long)o.request_id, o.error.c_str());
        rc = 1;
        continue;
      }
      if (llm.tokenizer()) {
        std::cout << o.text << "\n";
      } else {
        for (size_t i = 0; i < o.token_ids.size(); ++i) std::cout << (i ? " " : "") << o.token_ids[i];
        std::cout << "\n";
      }
    }
    std::fprintf(stderr, "%lld tokens in %.3f s: %.1f tok/s\n", (long long)gen, secs,
                 secs > 0 ? double(gen) / secs : 0.0);
  }
  for (auto& o : outs) if (!o.error.empty()) rc = 1;
  return rc;
}

}  // namespace
NANOVLLM_COMMAND("generate", "Generate from prompts (text, file or token ids)", run_generate);
}  // namespace nanovllm::cli
