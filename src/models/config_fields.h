// Typed access to one config.json object with errors that name the field and the file
// (ModelConfig::from_json_text and the architecture files in models/arch/ read through it).
#pragma once
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/check.h"

namespace nanovllm {

struct ModelConfig;

// One rope parameter object (rope_scaling, rope_parameters, or one layer type's entry of
// rope_parameters) into c.rope_scaling, and c.rope_theta when theta_inside and it has one.
// `key` names the object in errors.
void parse_rope_parameters(const nlohmann::json& r, const std::string& where, const std::string& key,
                           bool theta_inside, ModelConfig& c);

// Typed access to one JSON object with errors that name the field and the file.
struct ConfigFields {
  const nlohmann::json& j;
  const std::string& where;
  std::string prefix;  // "rope_scaling." for nested objects

  bool has(const char* k) const { return j.contains(k) && !j[k].is_null(); }
  std::string name(const char* k) const { return prefix + k; }

  [[noreturn]] void missing(const char* k) const {
    NV_THROW("missing required field '", name(k), "' in ", where);
  }
  int64_t integer(const char* k) const {
    const nlohmann::json& v = j[k];
    // 4096.0 is accepted (some converters write floats); 4096.5 is not.
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())
      return int64_t(v.get<double>());
    NV_THROW("field '", name(k), "' in ", where, " must be an integer, got ", v.dump());
  }
  int req_pos_int(const char* k) const {
    if (!has(k)) missing(k);
    int64_t v = integer(k);
    if (v <= 0 || v > INT32_MAX)
      NV_THROW("field '", name(k), "' in ", where, " must be a positive integer, got ", v);
    return int(v);
  }
  int opt_pos_int(const char* k, int dflt) const { return has(k) ? req_pos_int(k) : dflt; }
  double number(const char* k) const {
    const nlohmann::json& v = j[k];
    if (!v.is_number()) NV_THROW("field '", name(k), "' in ", where, " must be a number, got ", v.dump());
    return v.get<double>();
  }
  double req_pos_number(const char* k) const {
    if (!has(k)) missing(k);
    double v = number(k);
    if (!(v > 0) || !std::isfinite(v))
      NV_THROW("field '", name(k), "' in ", where, " must be a positive number, got ", v);
    return v;
  }
  double opt_pos_number(const char* k, double dflt) const {
    return has(k) ? req_pos_number(k) : dflt;
  }
  bool opt_bool(const char* k, bool dflt) const {
    if (!has(k)) return dflt;
    if (!j[k].is_boolean())
      NV_THROW("field '", name(k), "' in ", where, " must be true or false, got ", j[k].dump());
    return j[k].get<bool>();
  }
  std::string opt_string(const char* k, const std::string& dflt) const {
    if (!has(k)) return dflt;
    if (!j[k].is_string())
      NV_THROW("field '", name(k), "' in ", where, " must be a string, got ", j[k].dump());
    return j[k].get<std::string>();
  }
  // An id field that may be an int or a list of ints (eos_token_id), absent/null -> empty.
  std::vector<int> id_list(const char* k) const {
    std::vector<int> out;
    if (!has(k)) return out;
    auto one = [&](const nlohmann::json& v) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
        NV_THROW("field '", name(k), "' in ", where, " must be a token id or a list of ids, got ",
                 j[k].dump());
      out.push_back(int(v.get<int64_t>()));
    };
    if (j[k].is_array())
      for (const auto& v : j[k]) one(v);
    else
      one(j[k]);
    return out;
  }
};

}  // namespace nanovllm
