// Time of the allowed-token mask per generated token under structured-output constraints, with a
// real vocabulary (default: Qwen3's 151k tokens), for comparison with a decode step.
//   build/bench/bench_structured_mask [--tokenizer DIR] [--docs N] [--seed S] [--json]
// Per workload: compile time; a cold document (fresh CompiledGrammar: position tables computed
// as they are reached) and N warm documents (tables cached, as for later requests with the same
// constraint): mean / p50 / p99 / max of fill_next_token_bitmask; and the time to compute every
// position table up front (CompiledGrammar::precompute). Tokens are drawn at random
// from the masks (structured::sample_random), a stand-in for a model.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "structured/constraints.h"
#include "structured/random_sampler.h"
#include "tokenizer/tokenizer.h"

using namespace nanovllm;
using namespace nanovllm::structured;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Stats {
  size_t n = 0;
  double mean_us = 0, p50_us = 0, p99_us = 0, max_us = 0;
};

Stats stats(std::vector<double> s) {
  Stats r;
  if (s.empty()) return r;
  std::sort(s.begin(), s.end());
  r.n = s.size();
  double sum = 0;
  for (double x : s) sum += x;
  r.mean_us = sum / s.size() * 1e6;
  r.p50_us = s[s.size() / 2] * 1e6;
  r.p99_us = s[std::min(s.size() - 1, s.size() * 99 / 100)] * 1e6;
  r.max_us = s.back() * 1e6;
  return r;
}

nlohmann::json to_json(const Stats& s) {
  return {{"tokens", s.n}, {"mean_us", s.mean_us}, {"p50_us", s.p50_us}, {"p99_us", s.p99_us}, {"max_us", s.max_us}};
}

struct Workload {
  const char* name;
  const char* kind;  // json_object | json_schema | regex
  const char* spec;
};

const Workload kWorkloads[] = {
    {"json_object", "json_object", ""},
    {"function_args", "json_schema",
     R"({"type":"object","properties":{"location":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]},
        "days":{"type":"integer","minimum":1,"maximum":14},"details":{"type":"boolean"}},
        "required":["location","unit","days","details"],"additionalProperties":false})"},
    {"records", "json_schema",
     R"({"type":"array","items":{"type":"object","properties":{"id":{"type":"string","format":"uuid"},
        "name":{"type":"string","maxLength":20},"score":{"type":"number","minimum":0,"maximum":100},
        "tags":{"type":"array","items":{"type":"string"},"maxItems":3}},"required":["id","name","score","tags"]},
        "minItems":2,"maxItems":4})"},
    {"regex_email", "regex", "[a-z0-9._]{1,20}@[a-z]{2,10}\\.(com|org|net)"},
};

Grammar grammar_of(const Workload& w) {
  std::string kind = w.kind;
  if (kind == "json_object") return json_object_grammar();
  if (kind == "regex") return regex_grammar(w.spec);
  return json_schema_grammar(parse_json_schema(w.spec));
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::string(NANOVLLM_SOURCE_DIR) + "/../shared/data/tokenizers/qwen3";
  int docs = 5;
  uint32_t seed = 1;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--tokenizer") dir = value();
    else if (a == "--docs") docs = std::stoi(value());
    else if (a == "--seed") seed = static_cast<uint32_t>(std::stoul(value()));
    else if (a == "--json") json = true;
    else {
      std::fprintf(stderr, "unknown flag %s (--tokenizer DIR, --docs N, --seed S, --json)\n", a.c_str());
      return 2;
    }
  }
  double t0 = now_s();
  auto tok = Tokenizer::from_dir(dir);
  double t1 = now_s();
  auto vocab = TokenIndex::from_tokenizer(*tok, tok->eos_token_ids());
  double t2 = now_s();
  nlohmann::json out = {{"tokenizer", dir}, {"vocab", vocab->vocab_size()}, {"trie_nodes", vocab->nodes().size()},
                        {"tokenizer_load_ms", (t1 - t0) * 1e3}, {"token_index_ms", (t2 - t1) * 1e3}};
  std::mt19937 rng(seed);
  for (const Workload& w : kWorkloads) {
    double c0 = now_s();
    auto cg = compile(grammar_of(w), vocab);
    double c1 = now_s();
    RandomSample cold = sample_random(cg, rng);
    auto after_cold = cg->stats();
    std::vector<double> warm;
    size_t unfinished = !cold.finished;
    for (int d = 0; d < docs; ++d) {
      RandomSample s = sample_random(cg, rng);
      unfinished += !s.finished;
      warm.insert(warm.end(), s.mask_seconds.begin(), s.mask_seconds.end());
    }
    auto all = cg->stats();
    // A fresh compile with every table computed up front (CompiledGrammar::precompute).
    auto pre = compile(grammar_of(w), vocab);
    double p0 = now_s();
    size_t n_pre = pre->precompute();
    double p1 = now_s();
    out["workloads"].push_back({{"name", w.name},
                                {"compile_ms", (c1 - c0) * 1e3},
                                {"states", cg->grammar().states.size()},
                                {"cold", to_json(stats(cold.mask_seconds))},
                                {"cold_walk_ms", after_cold.walk_seconds * 1e3},
                                {"cold_positions", after_cold.positions},
                                {"warm", to_json(stats(warm))},
                                {"positions", all.positions},
                                {"walk_ms_total", all.walk_seconds * 1e3},
                                {"unfinished_docs", unfinished},
                                {"precompute_ms", (p1 - p0) * 1e3},
                                {"precompute_positions", n_pre},
                                {"example", cold.text.substr(0, 120)}});
  }
  if (json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("vocab %d ids, trie %zu nodes; tokenizer load %.0f ms, token index %.0f ms\n", vocab->vocab_size(),
              vocab->nodes().size(), out["tokenizer_load_ms"].get<double>(), out["token_index_ms"].get<double>());
  std::printf("%-14s %9s %7s | %-36s | %-36s\n", "workload", "compile", "states", "cold doc: tokens mean p50 p99 max (us)",
              "warm docs: tokens mean p50 p99 max (us)");
  for (auto& w : out["workloads"]) {
    auto row = [](const nlohmann::json& s) {
      char b[96];
      std::snprintf(b, sizeof b, "%5d %7.1f %6.1f %7.1f %8.1f", s["tokens"].get<int>(), s["mean_us"].get<double>(),
                    s["p50_us"].get<double>(), s["p99_us"].get<double>(), s["max_us"].get<double>());
      return std::string(b);
    };
    std::printf("%-14s %6.1f ms %7d | %-36s | %-36s  (cold walks %.1f ms over %d positions; precompute all %d: %.0f ms)\n",
                w["name"].get<std::string>().c_str(), w["compile_ms"].get<double>(), w["states"].get<int>(),
                row(w["cold"]).c_str(), row(w["warm"]).c_str(), w["cold_walk_ms"].get<double>(),
                w["cold_positions"].get<int>(), w["precompute_positions"].get<int>(), w["precompute_ms"].get<double>());
  }
  return 0;
}
