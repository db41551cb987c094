// POST /tokenize and /detokenize with vLLM's shapes:
//   /tokenize   {"prompt": str, "add_special_tokens": true, "return_token_strs": false}
//            or {"messages": [...], "add_generation_prompt": true, "chat_template_kwargs", "tools"}
//               (rendered exactly as a chat request's prompt)
//            -> {"count": N, "max_model_len": M, "tokens": [ids], "token_strs": null | [str]}
//   /detokenize {"tokens": [ids]} -> {"prompt": text}
#include <climits>

#include "server/handlers.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"
#include "util/json_bounded.h"

namespace nanovllm::server {

using nlohmann::json;

namespace {

bool bool_field(const json& b, const char* key, bool def) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return def;
  if (!it->is_boolean())
    throw bad_request(std::string("'") + key + "' must be a boolean", key, "invalid_type");
  return it->get<bool>();
}

void check_model(const ServerContext& ctx, const json& b) {
  auto it = b.find("model");
  if (it == b.end() || it->is_null()) return;
  if (!it->is_string() || (*it != ctx.model_name && *it != ctx.model_path))
    throw ApiError(
        404,
        "The model " + it->dump() + " does not exist; this server serves '" + ctx.model_name + "'",
        "not_found_error", "model", "model_not_found");
}

}  // namespace

void handle_tokenize(ServerContext& ctx, const std::string& body, httplib::Response& res) {
  try {
    const json b = parse_request_body(body, ctx.max_json_depth);
    check_model(ctx, b);
    if (!ctx.tokenizer) throw bad_request("this model has no tokenizer.json", "");
    std::vector<int> ids;
    if (b.contains("messages")) {
      GenerationRequest g = parse_chat_request(body, ctx.max_json_depth);
      ids = render_prompt_ids(g, ctx.tokenizer);  // the template writes the special tokens
    } else {
      auto p = b.find("prompt");
      if (p == b.end() || !p->is_string())
        throw bad_request("'prompt' (a string) or 'messages' is required", "prompt",
                          "missing_parameter");
      ids = ctx.tokenizer->encode(p->get<std::string>(), bool_field(b, "add_special_tokens", true));
    }
    json strs = nullptr;
    if (bool_field(b, "return_token_strs", false)) {
      strs = json::array();
      for (int id : ids) strs.push_back(ctx.tokenizer->decode({id}, false));
    }
    res.status = 200;
    res.set_content(dump_json(json{{"count", ids.size()},
                                   {"max_model_len", ctx.max_model_len},
                                   {"tokens", ids},
                                   {"token_strs", strs}}),
                    "application/json");
  } catch (const ApiError& e) {
    set_error(res, e);
  } catch (const std::exception& e) {
    set_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
}

void handle_detokenize(ServerContext& ctx, const std::string& body, httplib::Response& res) {
  try {
    const json b = parse_request_body(body, ctx.max_json_depth);
    check_model(ctx, b);
    if (!ctx.tokenizer) throw bad_request("this model has no tokenizer.json", "");
    auto t = b.find("tokens");
    if (t == b.end() || !t->is_array())
      throw bad_request("'tokens' (a list of token ids) is required", "tokens",
                        "missing_parameter");
    std::vector<int> ids;
    const int64_t vocab = ctx.tokenizer->vocab_size();
    for (const auto& x : *t) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= vocab)
        throw bad_request(
            "'tokens' must hold token ids in [0, " + std::to_string(vocab) + "), got " + x.dump(),
            "tokens");
      ids.push_back(int(x.get<int64_t>()));
    }
    res.status = 200;
    res.set_content(dump_json(json{{"prompt", ctx.tokenizer->decode(ids, false)}}),
                    "application/json");
  } catch (const ApiError& e) {
    set_error(res, e);
  } catch (const std::exception& e) {
    set_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
}

}  // namespace nanovllm::server
