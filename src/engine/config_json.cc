// Config <-> JSON from the field tables (nanovllm/field.h): every row is a key, named enums are
// their names, nested tables (Config::backend) are objects. Reading requires every key and
// refuses unknown ones, so rank 0 and a worker built from different sources fail loudly.
#include "engine/config_json.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "util/check.h"

namespace nanovllm {

namespace {

using nlohmann::json;

template <HasFields T>
json fields_to_json(const T& t);

template <class M>
json value_to_json(const M& v) {
  if constexpr (NamedEnum<M>)
    return std::string(enum_name(v));
  else if constexpr (HasFields<M>)
    return fields_to_json(v);
  else
    return v;
}

template <HasFields T>
json fields_to_json(const T& t) {
  json j = json::object();
  for_each_field<T>([&](const auto& f) { j[std::string(f.name)] = value_to_json(t.*f.member); });
  return j;
}

template <HasFields T>
void fields_from_json(const json& j, const std::string& where, T& t);

template <class M>
void value_from_json(const json& j, const std::string& where, M& v) {
  if constexpr (NamedEnum<M>) {
    const std::string s = j.get<std::string>();
    NV_CHECK(enum_from_name(s, v), where, " must be ", choice_list(enum_names(M{})), ", got '", s,
             "'");
  } else if constexpr (HasFields<M>) {
    fields_from_json(j, where + ".", v);
  } else {
    v = j.get<M>();
  }
}

template <HasFields T>
void fields_from_json(const json& j, const std::string& where, T& t) {
  NV_CHECK(j.is_object(), "'", where.empty() ? std::string("config") : where, "' must be an object");
  std::vector<std::string> names;
  for_each_field<T>([&](const auto& f) {
    const std::string key(f.name);
    auto it = j.find(key);
    NV_CHECK(it != j.end(), "no field '", where, key, "'");
    value_from_json(*it, where + key, t.*f.member);
    names.push_back(key);
  });
  for (const auto& item : j.items())
    NV_CHECK(std::find(names.begin(), names.end(), item.key()) != names.end(), "unknown field '",
             where, item.key(), "'");
}

}  // namespace

std::string config_to_json(const Config& c) { return fields_to_json(c).dump(); }

Config config_from_json(const std::string& text) {
  try {
    Config c;
    fields_from_json(json::parse(text), "", c);
    return c;
  } catch (const std::exception& e) {
    NV_THROW("bad engine configuration from rank 0: ", e.what());
  }
}

}  // namespace nanovllm
