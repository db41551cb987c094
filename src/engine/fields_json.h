// Options structs <-> JSON from their field tables (nanovllm/field.h): every row is a key, named
// enums are their names, nested tables are objects. Shared by the Config rank 0 sends to
// tensor-parallel workers (config_json.cc: every key required) and the sampling parameters a
// trace records for `nanovllm replay` (params_json.cc: absent keys keep their defaults).
#pragma once
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nanovllm/field.h"
#include "util/check.h"

namespace nanovllm::fields_json {

template <HasFields T>
nlohmann::json to_json(const T& t);

template <class M>
nlohmann::json value_to_json(const M& v) {
  if constexpr (NamedEnum<M>)
    return std::string(enum_name(v));
  else if constexpr (HasFields<M>)
    return to_json(v);
  else if constexpr (std::is_same_v<M, std::optional<uint64_t>>)
    return v ? nlohmann::json(*v) : nlohmann::json();
  else if constexpr (std::is_same_v<M, std::map<int, float>>) {  // JSON keys are strings
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, x] : v) j[std::to_string(k)] = x;
    return j;
  } else
    return v;
}

template <HasFields T>
nlohmann::json to_json(const T& t) {
  nlohmann::json j = nlohmann::json::object();
  for_each_field<T>([&](const auto& f) { j[std::string(f.name)] = value_to_json(t.*f.member); });
  return j;
}

// How from_json treats a key the table has and the JSON lacks.
enum class Missing { kError, kDefault };

template <HasFields T>
void from_json(const nlohmann::json& j, const std::string& where, Missing missing, T& t);

template <class M>
void value_from_json(const nlohmann::json& j, const std::string& where, Missing missing, M& v) {
  if constexpr (NamedEnum<M>) {
    const std::string s = j.get<std::string>();
    NV_CHECK(enum_from_name(s, v), where, " must be ", choice_list(enum_names(M{})), ", got '", s,
             "'");
  } else if constexpr (HasFields<M>) {
    from_json(j, where + ".", missing, v);
  } else if constexpr (std::is_same_v<M, std::optional<uint64_t>>) {
    v = j.is_null() ? std::nullopt : std::optional<uint64_t>(j.get<uint64_t>());
  } else if constexpr (std::is_same_v<M, std::map<int, float>>) {
    NV_CHECK(j.is_object(), where, " must be an object");
    v.clear();
    for (const auto& item : j.items()) v[std::stoi(item.key())] = item.value().template get<float>();
  } else {
    v = j.get<M>();
  }
}

// Unknown keys are always an error (a writer with fields this build lacks: the values would be
// silently dropped).
template <HasFields T>
void from_json(const nlohmann::json& j, const std::string& where, Missing missing, T& t) {
  NV_CHECK(j.is_object(), "'", where.empty() ? std::string("config") : where, "' must be an object");
  std::vector<std::string> names;
  for_each_field<T>([&](const auto& f) {
    const std::string key(f.name);
    names.push_back(key);
    auto it = j.find(key);
    if (it == j.end()) {
      NV_CHECK(missing == Missing::kDefault, "no field '", where, key, "'");
      return;
    }
    value_from_json(*it, where + key, missing, t.*f.member);
  });
  for (const auto& item : j.items())
    NV_CHECK(std::find(names.begin(), names.end(), item.key()) != names.end(), "unknown field '",
             where, item.key(), "'");
}

}  // namespace nanovllm::fields_json
