// POST /v1/embeddings (OpenAI's shape) on an embedding engine (Config::task "embed"):
//   {"input": str | [str] | [ids] | [[ids]], "model", "encoding_format": "float" | "base64",
//    "dimensions": N, "user"}
//   -> {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model",
//       "usage": {"prompt_tokens", "total_tokens"}}
// Every input is one engine request (prefill only), submitted together so they batch in the
// same steps. `dimensions` keeps the first N components (Matryoshka) and L2-normalizes them
// again when the model normalizes.
#include <climits>
#include <cmath>
#include <cstring>
#include <optional>

#include "server/generation.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm::server {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr size_t kMaxInputs = 2048;

struct Input {
  std::string text;       // a text input (tokenized here)
  std::vector<int> ids;   // or token ids
  bool is_text = false;
};

std::vector<int> token_ids(const json& arr, const std::string& where) {
  std::vector<int> ids;
  for (const auto& x : arr) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT_MAX)
      throw bad_request("'" + where + "' must hold non-negative integer token ids", "input", "invalid_type");
    ids.push_back(int(x.get<int64_t>()));
  }
  return ids;
}

std::vector<Input> parse_inputs(const json& b) {
  auto it = b.find("input");
  if (it == b.end() || it->is_null()) throw bad_request("'input' is required", "input", "missing_parameter");
  const json& in = *it;
  std::vector<Input> out;
  if (in.is_string()) {
    out.push_back({in.get<std::string>(), {}, true});
  } else if (in.is_array()) {
    if (in.empty()) throw bad_request("'input' must not be empty", "input");
    if (in[0].is_number_integer()) {
      out.push_back({"", token_ids(in, "input"), false});
    } else {
      if (in.size() > kMaxInputs)
        throw bad_request("'input' holds " + std::to_string(in.size()) + " inputs, more than " +
                              std::to_string(kMaxInputs), "input");
      for (size_t i = 0; i < in.size(); ++i) {
        const std::string w = "input[" + std::to_string(i) + "]";
        if (in[i].is_string()) out.push_back({in[i].get<std::string>(), {}, true});
        else if (in[i].is_array()) out.push_back({"", token_ids(in[i], w), false});
        else throw bad_request("'" + w + "' must be a string or a list of token ids", "input", "invalid_type");
      }
    }
  } else {
    throw bad_request("'input' must be a string, a list of strings, or token ids", "input", "invalid_type");
  }
  return out;
}

std::string base64(const void* data, size_t n) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = uint32_t(p[i]) << 16 | (i + 1 < n ? uint32_t(p[i + 1]) << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < n ? kAlphabet[v & 63] : '=';
  }
  return out;
}

}  // namespace

void handle_embeddings(ServerContext& ctx, const std::string& body, httplib::Response& res) {
  const auto arrival = Clock::now();
  InFlight in_flight(ctx);
  std::vector<std::shared_ptr<Channel>> chans;
  try {
    check_serving(ctx);
    if (!ctx.embed)
      throw bad_request("this server runs a generation model; /v1/embeddings needs an embedding model "
                        "(serve --task embed)", "model", "wrong_task");
    const json b = parse_request_body(body, ctx.max_json_depth);
    if (auto m = b.find("model"); m != b.end() && !m->is_null() &&
                                  (!m->is_string() || (*m != ctx.model_name && *m != ctx.model_path)))
      throw ApiError(404, "The model " + m->dump() + " does not exist; this server serves '" + ctx.model_name + "'",
                     "not_found_error", "model", "model_not_found");
    std::vector<Input> inputs = parse_inputs(b);
    std::string format = "float";
    if (auto f = b.find("encoding_format"); f != b.end() && !f->is_null()) {
      if (!f->is_string() || (*f != "float" && *f != "base64"))
        throw bad_request("'encoding_format' must be \"float\" or \"base64\"", "encoding_format");
      format = *f;
    }
    int dimensions = 0;
    if (auto d = b.find("dimensions"); d != b.end() && !d->is_null()) {
      if (!d->is_number_integer() || d->get<int64_t>() < 1 || d->get<int64_t>() > INT_MAX)
        throw bad_request("'dimensions' must be a positive integer", "dimensions");
      dimensions = int(d->get<int64_t>());
    }
    if (auto u = b.find("user"); u != b.end() && !u->is_null() && !u->is_string())
      throw bad_request("'user' must be a string", "user", "invalid_type");

    // Tokenize on this thread (a PrepGate slot), then submit every input: they batch together.
    std::vector<EngineRequest> reqs;
    {
      PrepGate::Slot slot = ctx.prep->acquire(arrival + ctx.prep_timeout, client_gone);
      if (!slot.held()) throw ClientGone{};
      for (size_t i = 0; i < inputs.size(); ++i) {
        EngineRequest r;
        if (inputs[i].is_text) {
          if (!ctx.tokenizer) throw bad_request("text inputs need the model's tokenizer.json; send token ids", "input");
          r.prompt_ids = ctx.tokenizer->encode(inputs[i].text, /*add_special_tokens=*/true);
        } else {
          r.prompt_ids = std::move(inputs[i].ids);
        }
        const std::string w = inputs.size() > 1 ? "input[" + std::to_string(i) + "]" : "input";
        if (r.prompt_ids.empty()) throw bad_request("'" + w + "' is empty", "input");
        if (int64_t(r.prompt_ids.size()) > ctx.max_model_len)
          throw bad_request("'" + w + "' has " + std::to_string(r.prompt_ids.size()) +
                                " tokens, more than the maximum context length " + std::to_string(ctx.max_model_len),
                            "input");
        r.params.max_tokens = 1;
        r.params.temperature = 0;
        reqs.push_back(std::move(r));
      }
    }
    for (auto& r : reqs) chans.push_back(ctx.loop->submit(std::move(r), arrival));

    json data = json::array();
    int64_t prompt_tokens = 0;
    for (size_t i = 0; i < chans.size(); ++i) {
      std::optional<StreamDelta> last;
      std::vector<StreamDelta> batch = wait_first(*chans[i], "input");
      for (;;) {
        for (auto& d : batch)
          if (d.finished) last = std::move(d);
        if (last) break;
        Channel::Batch nb = chans[i]->wait(100ms);
        if (nb.error) throw *nb.error;
        if (nb.done && nb.deltas.empty()) break;
        batch = std::move(nb.deltas);
        if (client_gone()) throw ClientGone{};
      }
      if (!last || last->finish_reason == "error" || last->embedding.empty())
        throw ApiError(500, last && !last->error.empty() ? client_message(last->error) : "the embedding was not computed",
                       "server_error");
      prompt_tokens += last->num_prompt_tokens;
      std::vector<float> e = std::move(last->embedding);
      if (dimensions > 0) {
        if (size_t(dimensions) > e.size())
          throw bad_request("'dimensions' " + std::to_string(dimensions) + " is more than the model's " +
                                std::to_string(e.size()), "dimensions");
        e.resize(size_t(dimensions));
        if (ctx.embed_normalize) {  // the truncated vector is normalized again
          double n = 0;
          for (float x : e) n += double(x) * double(x);
          if (n > 0)
            for (float& x : e) x = float(double(x) / std::sqrt(n));
        }
      }
      json item{{"object", "embedding"}, {"index", i}};
      if (format == "base64") item["embedding"] = base64(e.data(), e.size() * sizeof(float));  // little-endian f32
      else item["embedding"] = e;
      data.push_back(std::move(item));
    }
    res.set_content(dump_json(json{{"object", "list"},
                                   {"data", std::move(data)},
                                   {"model", ctx.model_name},
                                   {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}}),
                    "application/json");
    return;
  } catch (const ClientGone&) {
    drop_client(res);
  } catch (const ApiError& e) {
    set_error(res, e);
  } catch (const std::exception& e) {
    set_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
  for (auto& ch : chans)
    if (!ch->done()) ctx.loop->abort(ch);
}

}  // namespace nanovllm::server
