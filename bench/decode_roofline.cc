// Batch-1 decode against the memory-bandwidth limit, measured in the same run.
//
//   bench_decode_roofline --model DIR [--tokens 64] [--rounds 5] [--quantization Q]
//                         [--lm-head-quantization H] [--json] [--bytes-only]
//
// The limit: a decode token reads every weight once (tied models: the embedding once, as the
// LM head; MoE models: the router and the token's num_experts_per_tok experts of each sparse
// layer), so tok/s <= read_bandwidth / weight_bytes_per_token. On a shared VM the bandwidth
// moves by +-30% within seconds, so the limit is measured in lock-step with the decode: each
// decode step (one token, timed around LLM::step()) is paired with a pure read pass over the
// same number of bytes (a huge-page buffer summed with AVX-512 when present, all pool threads),
// run right after it. ratio = read-pass time / step time; the report gives the median over
// all pairs, plus medians of tok/s and read GB/s, and the fastest step against the fastest
// read pass of the run (peak against peak). With --quantization the bytes per token are those
// of the quantized weights (kernels/quantized.h layout: int8 scales and row sums, int4 group
// scales and padding included).
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nanovllm/backend_options.h"
#include "engine/model_runner.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/simd.h"
#include "read_pass.h"
#include "loader/gguf_checkpoint.h"
#include "loader/gguf_quants.h"
#include "loader/weight_store.h"
#include "models/decoder.h"
#include "models/model_config.h"
#include "nanovllm/llm.h"
#include "util/thread_pool.h"

using namespace nanovllm;

namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct ReadProbe {
  float* buf = nullptr;
  int64_t n = 0;  // floats
  ThreadPool pool{backend_options_from_env().num_threads};  // NANOVLLM_NUM_THREADS or all cores
  std::vector<float> sink;
  explicit ReadProbe(double bytes) {
    n = int64_t(bytes / 4) / 4096 * 4096;
    void* p = mmap(nullptr, size_t(n) * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    NV_CHECK(p != MAP_FAILED, "mmap of the ", n * 4, "-byte read buffer failed");
    madvise(p, size_t(n) * 4, MADV_HUGEPAGE);
    buf = static_cast<float*>(p);
    pool.parallel_for(n, [&](int64_t a, int64_t b) { std::fill(buf + a, buf + b, 1.f); }, 1 << 16);
    sink.assign(size_t(pool.size()), 0.f);
  }
  ~ReadProbe() { munmap(buf, size_t(n) * 4); }
  double pass_seconds() {  // one pass over the buffer
    double t0 = seconds_now();
    pool.parallel_for(n, [&](int64_t a, int64_t b) {
      float s = bench::read_sum(buf + a, b - a);
      sink[size_t(a * pool.size() / n)] += s;
    }, 1 << 16);
    return seconds_now() - t0;
  }
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Bytes of weights one decode token reads: every tensor, except an untied model's embedding
// table (only one row of it is read); the layers' projections and the LM head as `opt`
// quantizes them (a tied model's quantized head is a copy: the dense table is then read one row
// at a time, like an untied model's).
double weight_bytes_per_token(const std::string& dir, const ModelLoadOptions& opt) {
  ModelConfig cfg = ModelConfig::from_dir(dir);
  WeightStore ws = WeightStore::open_dir(dir);
  const std::string head = cfg.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  double bytes = 0;
  for (const auto& name : ws.names()) {
    if (name == "lm_head.weight" && cfg.tie_word_embeddings) continue;  // HF ignores it
    if (name == "model.embed_tokens.weight" && !cfg.tie_word_embeddings) continue;
    const Tensor t = ws.get(name);
    // A GGUF model's per-tensor schemes (opt.tensor_quant), with the fused q/k/v and gate/up
    // taking their most precise part's scheme as DecoderModel loads them.
    std::vector<std::string> group{name};
    for (const auto& fused : {std::vector<std::string>{"q_proj", "k_proj", "v_proj"},
                              std::vector<std::string>{"gate_proj", "up_proj"}})
      for (const auto& part : fused)
        if (const size_t at = name.find("." + part + "."); at != std::string::npos) {
          group.clear();
          for (const auto& other : fused) group.push_back(name.substr(0, at + 1) + other + name.substr(at + 1 + part.size()));
        }
    // A GGUF's K-quant / Q5_1 / IQ4 weights run as stored (one process: no tensor-parallel cut):
    // a fused weight whose parts share one form in it; parts of different forms each in its own
    // where every part stays quantized (a composite weight, DecoderModel::column_linear).
    const bool gguf = opt.checkpoint_int4 && ws.gguf() != nullptr;
    auto as_stored = [&](const std::string& t) {
      const int bits = ws.int4_bits(t);
      const bool q5_1 = bits == 5 && ws.gguf()->tensors().at(t).t->type == uint32_t(GgmlType::Q5_1);
      if (bits == 4 && !ws.int4_table(t)) {  // Q4_K (parse_quant_scheme names no -k form)
        QuantScheme k = parse_quant_scheme("int4-g32-zp");
        k.k_superblocks = true;
        return k;
      }
      return parse_quant_scheme(bits == 6 ? "int6-g16-k" : bits == 3 ? "int3-g16-k" : bits == 2 ? "int2-g16-zp-k"
                                : q5_1 ? "int5-g32-zp" : bits == 5 ? "int5-g32-zp-k" : "int4-g32-nl");
    };
    // A Qwen3-MoE expert's projections run as stored (gate / up through
    // DecoderModel::column_linear) only when its gate is stored; else the dense way.
    const bool expert = name.find(".mlp.experts.") != std::string::npos;
    std::string gate = name;
    for (const char* p : {".up_proj.", ".down_proj."})
      if (const size_t at = gate.find(p); at != std::string::npos) gate.replace(at, std::strlen(p), ".gate_proj.");
    bool stored = gguf && (!expert || ws.has_int4(gate)), q5_1 = false, q5_k = false;
    for (const auto& part : group) {
      stored = stored && ws.has_int4(part) && ws.int4_bits(part) == ws.int4_bits(name) &&
               ws.int4_table(part) == ws.int4_table(name);
      q5_1 = q5_1 || (ws.has_int4(part) && as_stored(part).str() == "int5-g32-zp");
      q5_k = q5_k || (ws.has_int4(part) && as_stored(part).str() == "int5-g32-zp-k");
    }
    const bool parts = gguf && !stored && (!expert || ws.has_int4(gate)) && mixed_quantized_parts(ws, group, opt);
    const QuantScheme q = name == head                    ? opt.lm_head_quant
                          : stored && q5_1 && q5_k          ? parse_quant_scheme("int5-g32-zp-f32")  // Q5_K with Q5_1
                          : stored || (parts && ws.has_int4(name)) ? as_stored(name)
                          : parts                           ? opt.scheme_for({name})
                                                            : opt.scheme_for(group);
    const bool quantized = q.enabled() && t.ndim() == 2 &&
                           (name == head || (name.rfind("model.layers.", 0) == 0 &&
                                             ends_with(name, "_proj.weight")));
    double b = quantized ? double(cpu::quantized_nbytes(t.size(0), t.size(1), q)) : double(t.nbytes());
    // MoE: a token reads its num_experts_per_tok experts of num_experts (all the same size).
    if (cfg.num_experts > 0 && name.find(".mlp.experts.") != std::string::npos)
      b *= double(cfg.num_experts_per_tok) / cfg.num_experts;
    bytes += b;
  }
  return bytes;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  int tokens = 64, rounds = 5;
  bool json = false, bytes_only = false;
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "error: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model") model = next();
    else if (a == "--tokens") tokens = std::stoi(next());
    else if (a == "--rounds") rounds = std::stoi(next());
    else if (a == "--quantization") cfg.quantization = next();
    else if (a == "--lm-head-quantization") cfg.lm_head_quantization = next();
    else if (a == "--json") json = true;
    else if (a == "--bytes-only") bytes_only = true;  // the count alone (bench/benchpy_roofline.py)
    else {
      std::fprintf(stderr, "usage: bench_decode_roofline --model DIR [--tokens N] [--rounds R] "
                   "[--quantization Q] [--lm-head-quantization H] [--json] [--bytes-only]\n");
      return 2;
    }
  }
  if (model.empty() || tokens < 2 || rounds < 1) {
    std::fprintf(stderr, "error: --model DIR is required; --tokens >= 2; --rounds >= 1\n");
    return 2;
  }
  try {
    cfg.model = model;  // before resolve(): `auto` settles per model (a GGUF file's own schemes)
    cfg.device = "cpu";
    cfg.max_model_len = 1024;
    const double wbytes = weight_bytes_per_token(model, ModelRunner::load_options(resolve(cfg)));
    if (bytes_only) {
      std::printf("{\"weight_bytes_per_token\": %.0f}\n", wbytes);
      return 0;
    }
    LLM llm(cfg);
    ReadProbe probe(wbytes);
    const double probe_bytes = double(probe.n) * 4;
    SamplingParams sp;
    sp.temperature = 0;
    sp.max_tokens = tokens;
    sp.ignore_eos = true;
    llm.generate({Prompt(std::vector<int>{1, 2, 3, 4})}, {sp});  // warm-up
    probe.pass_seconds();
    std::vector<double> ratios, tps_all, bw_all;
    nlohmann::json per_round = nlohmann::json::array();
    for (int r = 0; r < rounds; ++r) {
      llm.add_request(Prompt(std::vector<int>{1, 2, 3, 4}), sp);
      llm.step();  // prefill (+ first token): not a decode step
      std::vector<double> rr;
      while (!llm.is_finished()) {
        double t0 = seconds_now();
        llm.step();
        double step_s = seconds_now() - t0;
        if (llm.last_step_stats().num_decode_tokens != 1) continue;
        double read_s = probe.pass_seconds() * (wbytes / probe_bytes);  // same bytes as a token
        rr.push_back(read_s / step_s);
        ratios.push_back(read_s / step_s);
        tps_all.push_back(1.0 / step_s);
        bw_all.push_back(wbytes / read_s / 1e9);
      }
      per_round.push_back({{"decode_steps", rr.size()}, {"median_ratio", median(rr)}});
      if (!json)
        std::printf("round %d: %zu decode steps, median ratio %.0f%%\n", r, rr.size(), 100 * median(rr));
    }
    NV_CHECK(!ratios.empty(), "no decode steps were measured");
    nlohmann::json out;
    out["model"] = model;
    out["quantization"] = cfg.quantization;
    out["lm_head_quantization"] = cfg.lm_head_quantization;
    out["weight_bytes_per_token"] = wbytes;
    out["threads"] = probe.pool.size();
    out["pairs"] = ratios.size();
    out["rounds"] = per_round;
    out["median_decode_tok_s"] = median(tps_all);
    out["median_read_gb_s"] = median(bw_all);
    out["median_decode_weight_gb_s"] = median(tps_all) * wbytes / 1e9;
    out["median_ratio"] = median(ratios);
    // Peak against peak: the fastest decode step and the fastest read pass of the whole run.
    const double best_tps = *std::max_element(tps_all.begin(), tps_all.end());
    const double best_bw = *std::max_element(bw_all.begin(), bw_all.end());
    out["best_decode_tok_s"] = best_tps;
    out["best_read_gb_s"] = best_bw;
    out["best_ratio"] = best_tps * wbytes / (best_bw * 1e9);
    std::sort(ratios.begin(), ratios.end());
    out["ratio_p10"] = ratios[ratios.size() / 10];
    out["ratio_p90"] = ratios[ratios.size() * 9 / 10];
    if (json) std::printf("%s\n", out.dump().c_str());
    else
      std::printf("median over %zu pairs: decode %.2f tok/s (%.1f GB/s of weights), read %.1f GB/s, "
                  "ratio %.0f%% (p10 %.0f%%, p90 %.0f%%); %.3f GB/token\n",
                  ratios.size(), median(tps_all), median(tps_all) * wbytes / 1e9, median(bw_all),
                  100 * median(ratios), 100 * ratios[ratios.size() / 10],
                  100 * ratios[ratios.size() * 9 / 10], wbytes / 1e9);
    if (!json)
      std::printf("peak vs peak: fastest step %.2f tok/s (%.1f GB/s), fastest read %.1f GB/s: %.0f%%\n",
                  best_tps, best_tps * wbytes / 1e9, best_bw, 100 * best_tps * wbytes / (best_bw * 1e9));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
