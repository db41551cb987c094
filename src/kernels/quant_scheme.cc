// Parsing and naming of quantization schemes (kernels/quantized.h).
#include "kernels/quantized.h"

#include "util/check.h"

namespace nanovllm {

std::string QuantScheme::str() const {
  switch (kind) {
    case QuantKind::None: return "none";
    case QuantKind::Int8: return group > 0 ? "int8-g" + std::to_string(group) : "int8";
    case QuantKind::Int4:
      return "int4-g" + std::to_string(group) + (zero_points ? "-zp" : "") + (f32_params ? "-f32" : "") +
             (k_superblocks ? "-k" : "") + (nl_table ? "-nl" : "");
    case QuantKind::Int5: return k_superblocks ? "int5-g32-zp-k" : f32_params ? "int5-g32-zp-f32" : "int5-g32-zp";
    case QuantKind::Int6: return "int6-g16-k";
    case QuantKind::Int2: return "int2-g16-zp-k";
    case QuantKind::Int3: return "int3-g16-k";
  }
  return "?";
}

QuantScheme parse_quant_scheme(const std::string& s) {
  QuantScheme q;
  if (s.empty() || s == "none") return q;
  if (s == "int8") {
    q.kind = QuantKind::Int8;
    return q;
  }
  if (s == "int5-g32-zp-k") {  // ggml's Q5_K as stored (a GGUF's; quantize_weight refuses it)
    q.kind = QuantKind::Int5;
    q.group = 32;
    q.zero_points = q.k_superblocks = true;
    return q;
  }
  if (s == "int5-g32-zp" || s == "int5-g32-zp-f32") {  // ggml's Q5_1 as stored (a GGUF's; quantize_weight
    q.kind = QuantKind::Int5;                          // refuses it); -f32: fused with Q5_K parts
    q.group = 32;
    q.zero_points = true;
    q.f32_params = s == "int5-g32-zp-f32";
    return q;
  }
  if (s == "int6-g16-k") {  // ggml's Q6_K as stored (a GGUF's; quantize_weight refuses it)
    q.kind = QuantKind::Int6;
    q.group = 16;
    q.k_superblocks = true;
    return q;
  }
  if (s == "int3-g16-k") {  // ggml's Q3_K as stored (a GGUF's; quantize_weight refuses it)
    q.kind = QuantKind::Int3;
    q.group = 16;
    q.k_superblocks = true;
    return q;
  }
  if (s == "int2-g16-zp-k") {  // ggml's Q2_K as stored (a GGUF's; quantize_weight refuses it)
    q.kind = QuantKind::Int2;
    q.group = 16;
    q.zero_points = q.k_superblocks = true;
    return q;
  }
  if (s == "int8-g32") {
    q.kind = QuantKind::Int8;
    q.group = 32;
    return q;
  }
  // int4 defaults: group 32, symmetric (docs/perf.md: error and speed of each variant).
  q.kind = QuantKind::Int4;
  q.group = 32;
  if (s == "int4" || s == "int4-g32") return q;
  if (s == "int4-g64") {
    q.group = 64;
    return q;
  }
  if (s == "int4-g32-nl") {  // ggml's IQ4_NL / IQ4_XS as stored (a GGUF's; quantize_weight refuses it)
    q.nl_table = true;
    return q;
  }
  if (s == "int4-g32-zp-f32") {  // the layout of a Q4_K repack; a fit from floats keeps f16 values
    q.zero_points = q.f32_params = true;
    return q;
  }
  if (s == "int4-g32-zp" || s == "int4-g64-zp") {
    q.group = s == "int4-g32-zp" ? 32 : 64;
    q.zero_points = true;
    return q;
  }
  NV_THROW("unknown quantization '", s,
           "' (expected none, int8, int8-g32, int4, int4-g32, int4-g64, int4-g32-zp or int4-g64-zp)");
}

}  // namespace nanovllm
