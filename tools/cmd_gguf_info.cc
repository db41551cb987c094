// `nanovllm gguf-info MODEL [--json] [--repack-check] [--dequant TENSOR --out FILE]`: what the
// engine makes of a GGUF model - architecture, tensor types, the config.json it reads as, the
// --quantization auto scheme - and, with --repack-check, how exactly that scheme holds each
// linear weight: every row of the engine's int8/int4 layout is dequantized again and compared
// with the GGUF's own dequantized row (max |difference|, and how many rows are bit-identical).
// --dequant writes one tensor (HF name) as raw little-endian float32, HF shape, for tests.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "command.h"
#include "engine/model_files.h"
#include "kernels/cpu/pack_int4.h"
#include "kernels/cpu/quantize.h"
#include "loader/gguf_checkpoint.h"
#include "loader/gguf_quants.h"
#include "loader/tensor_ops.h"
#include "util/check.h"
#include "util/dtype.h"
#include "util/thread_pool.h"

namespace {

using nlohmann::json;

// The engine layout of one weight vs the GGUF values it came from: quantized from them with
// `scheme`, or (`as_stored`, a Q4_K / Q5_K / Q6_K tensor under auto) its codes and parameters repacked.
json repack_check(const nanovllm::Tensor& w, const nanovllm::QuantScheme& scheme,
                  const nanovllm::Int4Groups* as_stored, nanovllm::ThreadPool& pool) {
  const int64_t N = w.size(0), K = w.size(1);
  nanovllm::QuantizedWeight q = as_stored ? nanovllm::cpu::pack_int4_groups(*as_stored, pool)
                                          : nanovllm::cpu::quantize_weight(w, scheme, pool);
  std::vector<float> row(static_cast<size_t>(K));
  double max_abs = 0, max_rel = 0;
  int64_t exact_rows = 0;
  const float* src = w.data<float>();
  for (int64_t n = 0; n < N; ++n) {
    nanovllm::cpu::dequantize_row_inputs(q, n, row.data());
    double d = 0, m = 0;
    for (int64_t k = 0; k < K; ++k) {
      d = std::max(d, double(std::fabs(row[size_t(k)] - src[n * K + k])));
      m = std::max(m, double(std::fabs(src[n * K + k])));
    }
    exact_rows += d == 0;
    max_abs = std::max(max_abs, d);
    if (m > 0) max_rel = std::max(max_rel, d / m);
  }
  return {{"scheme", q.scheme.str()}, {"rows", N}, {"exact_rows", exact_rows}, {"max_abs_diff", max_abs},
          {"max_diff_over_row_max", max_rel}};
}

int run_gguf_info(int argc, char** argv) {
  CLI::App app{"Show how nanovllm reads a GGUF model (types, config, quantization)"};
  std::string model, dequant, out, quant = "auto";
  bool as_json = false, repack = false;
  app.add_option("model", model, "a .gguf file, a split set's first file, or a folder with one")->required();
  app.add_flag("--json", as_json, "machine-readable output");
  app.add_flag("--repack-check", repack,
               "compare each linear weight's engine layout (the --quantization scheme) with the "
               "GGUF values, row by row");
  app.add_option("--quantization", quant, "scheme for --repack-check (auto: what the engine picks)")
      ->capture_default_str();
  app.add_option("--dequant", dequant, "write this tensor (HF name) as float32 to --out");
  app.add_option("--out", out, "output file for --dequant");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    auto ck = nanovllm::GgufCheckpoint::open(model);
    if (!dequant.empty()) {
      NV_CHECK(!out.empty(), "--dequant needs --out");
      nanovllm::Tensor t = ck->get(dequant);
      std::vector<float> v = nanovllm::to_f32_vector(t);
      FILE* f = std::fopen(out.c_str(), "wb");
      NV_CHECK(f, "cannot write '", out, "'");
      const size_t wrote = std::fwrite(v.data(), sizeof(float), v.size(), f);
      const bool ok = std::fclose(f) == 0 && wrote == v.size();
      NV_CHECK(ok, "cannot write '", out, "'");
      return 0;
    }
    const nanovllm::QuantScheme scheme = quant == "auto" ? nanovllm::gguf_default_quantization(model)
                                                         : nanovllm::parse_quant_scheme(quant);
    json j;
    j["file"] = ck->path();
    j["architecture"] = ck->arch();
    j["version"] = ck->meta().version();
    std::map<std::string, int> types;
    for (const auto& [name, r] : ck->tensors())
      if (r.expert <= 0) types[nanovllm::ggml_type_name(r.t->type)]++;
    j["tensor_types"] = types;
    j["quantization_auto"] = nanovllm::gguf_default_quantization(model).str();
    // The scheme auto gives each linear tensor by its own ggml type (an expert stack counts once).
    // A fused q/k/v or gate/up of parts in different forms runs each part in its own (a
    // composite weight, models/decoder.h mixed_quantized_parts), and the LM head follows
    // --lm-head-quantization: neither is shown here.
    const auto per_tensor = nanovllm::gguf_tensor_quantization(model);
    std::map<std::string, int> by_scheme;
    // A Q4_K / Q5_K / Q6_K / Q3_K / Q2_K / IQ4 tensor runs as stored (int4-g32-zp-k / int5-g32-zp-k /
    // int6-g16-k / int3-g16-k / int2-g16-zp-k / int5-g32-zp (Q5_1) / int4-g32-nl;
    // int4-g32-zp-f32 for Q4_K when a tensor-parallel cut splits its superblocks); fused with a
    // part of another type it keeps that form as a composite's part (a dense part aside).
    for (const auto& [name, q] : per_tensor)
      if (ck->tensors().at(name).expert <= 0)
        by_scheme[ck->int4_bits(name) == 6   ? "int6-g16-k"
                  : ck->int4_bits(name) == 5 ? (ck->tensors().at(name).t->type == uint32_t(nanovllm::GgmlType::Q5_1)
                                                    ? "int5-g32-zp" : "int5-g32-zp-k")
                  : ck->int4_bits(name) == 3 ? "int3-g16-k"
                  : ck->int4_bits(name) == 2 ? "int2-g16-zp-k"
                  : ck->int4_table(name)     ? "int4-g32-nl"
                  : ck->has_int4(name)       ? "int4-g32-zp-k"
                                             : q.str()]++;
    j["quantization_auto_tensors"] = by_scheme;
    // --lm-head-quantization auto on the CPU: the file's Q5_K / Q6_K / Q3_K / Q2_K head as stored, else "none" here
    // (the engine's rule then: int8 with int4 layers, else the layers' scheme).
    j["lm_head_auto"] = nanovllm::gguf_lm_head_quantization(model).str();
    j["config"] = json::parse(ck->hf_config_json());
    if (repack) {
      nanovllm::ThreadPool pool(0);
      json per_type = json::object();
      for (const auto& [name, r] : ck->tensors()) {
        // auto: each tensor against its own type's scheme (gguf_tensor_quantization).
        const auto it = per_tensor.find(name);
        const nanovllm::QuantScheme s = quant == "auto" && it != per_tensor.end() ? it->second : scheme;
        if (r.t->ne.size() < 2 || name == "model.embed_tokens.weight" || !s.enabled()) continue;
        nanovllm::Tensor w = nanovllm::to_dtype(ck->get(name), nanovllm::DType::F32);
        std::optional<nanovllm::Int4Groups> stored;
        if (quant == "auto" && ck->has_int4(name)) stored = ck->get_int4(name);
        json c = repack_check(w, s, stored ? &*stored : nullptr, pool);
        json& agg = per_type[nanovllm::ggml_type_name(r.t->type)];
        if (agg.is_null()) agg = {{"scheme", c["scheme"]}, {"tensors", 0}, {"rows", 0}, {"exact_rows", 0},
                                  {"max_abs_diff", 0.0}, {"max_diff_over_row_max", 0.0}};
        agg["tensors"] = agg["tensors"].get<int>() + 1;
        agg["rows"] = agg["rows"].get<int64_t>() + c["rows"].get<int64_t>();
        agg["exact_rows"] = agg["exact_rows"].get<int64_t>() + c["exact_rows"].get<int64_t>();
        agg["max_abs_diff"] = std::max(agg["max_abs_diff"].get<double>(), c["max_abs_diff"].get<double>());
        agg["max_diff_over_row_max"] =
            std::max(agg["max_diff_over_row_max"].get<double>(), c["max_diff_over_row_max"].get<double>());
      }
      j["repack"] = {{"scheme", scheme.str()}, {"by_type", per_type}};
    }
    if (as_json) {
      std::printf("%s\n", j.dump(1).c_str());
    } else {
      std::string tensors;
      for (const auto& [q, n] : by_scheme) tensors += (tensors.empty() ? "" : ", ") + std::to_string(n) + " " + q;
      std::printf("%s: %s (GGUF v%u), %s\nquantization auto: %s (linear tensors: %s)\n", ck->path().c_str(),
                  ck->arch().c_str(), ck->meta().version(), ck->type_summary().c_str(),
                  j["quantization_auto"].get<std::string>().c_str(), tensors.c_str());
      if (j["lm_head_auto"] != "none")
        std::printf("LM head auto: %s (as stored)\n", j["lm_head_auto"].get<std::string>().c_str());
      if (repack)
        for (const auto& [t, c] : j["repack"]["by_type"].items())
          std::printf("repack %s -> %s: %lld/%lld rows bit-identical, max |diff| %.3g (%.3g of the row max)\n",
                      t.c_str(), c["scheme"].get<std::string>().c_str(), (long long)c["exact_rows"].get<int64_t>(),
                      (long long)c["rows"].get<int64_t>(), c["max_abs_diff"].get<double>(),
                      c["max_diff_over_row_max"].get<double>());
    }
    return 0;
  } catch (const nanovllm::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace

NANOVLLM_COMMAND("gguf-info", "Show how a GGUF model is read (types, config, quantization)", run_gguf_info);
