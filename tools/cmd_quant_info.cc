// `nanovllm quant-info MODEL [--json] [--repack-check] [--dequant TENSOR --out FILE]`: what the
// engine reads from a GPTQ / AWQ checkpoint (its quantization_config, the quantized modules and
// their shapes) and, with --repack-check, how exactly the int4 kernels hold each module: every
// row of the repacked layout (kernels/cpu/pack_int4.h) dequantized again and compared with the
// checkpoint's exact f32 dequantization (max |difference|, in units of the group's scale too,
// and how many rows are bit-identical). --dequant writes one module's X.weight (its exact f32
// dequantization) as raw little-endian float32 [N, K], for tests.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "command.h"
#include "kernels/cpu/pack_int4.h"
#include "loader/weight_store.h"
#include "util/check.h"
#include "util/thread_pool.h"

namespace {

using nlohmann::json;

// The repacked layout of one module vs its exact dequantization.
json repack_check(const nanovllm::Int4Groups& g, nanovllm::ThreadPool& pool) {
  const nanovllm::QuantizedWeight q = nanovllm::cpu::pack_int4_groups(g, pool);
  const nanovllm::Tensor ref = nanovllm::dequantize_int4(g);
  std::vector<float> row(size_t(g.K));
  double max_abs = 0, max_steps = 0;
  int64_t exact_rows = 0;
  for (int64_t n = 0; n < g.N; ++n) {
    nanovllm::cpu::dequantize_row_inputs(q, n, row.data());
    double d = 0;
    for (int64_t k = 0; k < g.K; ++k) {
      const double e = std::fabs(double(row[size_t(k)]) - double(ref.data<float>()[n * g.K + k]));
      const float s = g.scales.data<float>()[n * g.G + g.g_idx.data<int32_t>()[k]];
      d = std::max(d, e);
      if (s > 0) max_steps = std::max(max_steps, e / double(s));
    }
    exact_rows += d == 0;
    max_abs = std::max(max_abs, d);
  }
  return {{"scheme", q.scheme.str()}, {"gathered", q.act_index.defined()}, {"rows", g.N},
          {"exact_rows", exact_rows}, {"max_abs_diff", max_abs}, {"max_diff_over_scale", max_steps}};
}

int run_quant_info(int argc, char** argv) {
  CLI::App app{"Show how nanovllm reads a GPTQ / AWQ checkpoint (config, modules, int4 repack)"};
  std::string model, dequant, out;
  bool as_json = false, repack = false;
  app.add_option("model", model, "a Hugging Face model directory with a quantization_config")->required();
  app.add_flag("--json", as_json, "machine-readable output");
  app.add_flag("--repack-check", repack,
               "compare each module's int4 kernel layout with its exact dequantization, row by row");
  app.add_option("--dequant", dequant, "write this module's X.weight as float32 to --out");
  app.add_option("--out", out, "output file for --dequant");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    const nanovllm::WeightStore ws = nanovllm::WeightStore::open_dir(model);
    const nanovllm::Int4Checkpoint* ck = ws.int4();
    NV_CHECK(ck, "'", model, "' is not a GPTQ / AWQ checkpoint (its config.json has no quantization_config)");
    if (!dequant.empty()) {
      NV_CHECK(!out.empty(), "--dequant needs --out");
      NV_CHECK(ck->has(dequant), "'", dequant, "' is not a quantized module's weight in '", model, "'");
      const nanovllm::Tensor t = ck->dequantize(dequant);
      FILE* f = std::fopen(out.c_str(), "wb");
      NV_CHECK(f, "cannot write '", out, "'");
      const size_t wrote = std::fwrite(t.raw(), sizeof(float), size_t(t.numel()), f);
      const bool ok = std::fclose(f) == 0 && wrote == size_t(t.numel());
      NV_CHECK(ok, "cannot write '", out, "'");
      return 0;
    }
    json j;
    j["model"] = model;
    j["method"] = ck->config().method;
    j["config"] = ck->config().str();
    j["modules"] = json::object();
    for (const std::string& n : ck->weight_names()) j["modules"][n] = ck->shape(n);
    if (repack) {
      nanovllm::ThreadPool pool(0);
      json agg = {{"modules", 0}, {"rows", 0}, {"exact_rows", 0}, {"max_abs_diff", 0.0},
                  {"max_diff_over_scale", 0.0}, {"gathered", 0}, {"schemes", json::object()}};
      for (const std::string& n : ck->weight_names()) {
        const json c = repack_check(ck->unpack(n), pool);
        agg["modules"] = agg["modules"].get<int>() + 1;
        agg["rows"] = agg["rows"].get<int64_t>() + c["rows"].get<int64_t>();
        agg["exact_rows"] = agg["exact_rows"].get<int64_t>() + c["exact_rows"].get<int64_t>();
        agg["gathered"] = agg["gathered"].get<int>() + (c["gathered"].get<bool>() ? 1 : 0);
        agg["max_abs_diff"] = std::max(agg["max_abs_diff"].get<double>(), c["max_abs_diff"].get<double>());
        agg["max_diff_over_scale"] =
            std::max(agg["max_diff_over_scale"].get<double>(), c["max_diff_over_scale"].get<double>());
        const std::string s = c["scheme"];
        agg["schemes"][s] = agg["schemes"].value(s, 0) + 1;
      }
      j["repack"] = agg;
    }
    if (as_json) {
      std::printf("%s\n", j.dump(1).c_str());
      return 0;
    }
    std::printf("%s: %s, %zu quantized modules\n", model.c_str(), j["config"].get<std::string>().c_str(),
                j["modules"].size());
    if (repack) {
      const json& r = j["repack"];
      std::printf("int4 repack %s: %lld/%lld rows bit-identical, max |diff| %.3g (%.3g of the group scale), "
                  "%d of %d modules gather their input\n",
                  r["schemes"].dump().c_str(), (long long)r["exact_rows"].get<int64_t>(),
                  (long long)r["rows"].get<int64_t>(), r["max_abs_diff"].get<double>(),
                  r["max_diff_over_scale"].get<double>(), r["gathered"].get<int>(), r["modules"].get<int>());
    }
    return 0;
  } catch (const nanovllm::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace

NANOVLLM_COMMAND("quant-info", "Show how a GPTQ / AWQ checkpoint is read (config, modules, int4 repack)",
                 run_quant_info);
