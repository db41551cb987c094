// Internal: the JSON Schema compiler shared by json_schema.cc (keywords, combinators, scalars)
// and json_schema_rules.cc (object, array and string rules).
//
// Every schema node compiles to an inline Expr for its instances; objects, arrays and
// constrained strings become rules of their own (called from the Expr), because their closing
// delimiter keeps the token-mask walks of their inside positions shareable (token_masks.h).
// Rules are memoized per schema node, which also makes recursive $refs work; a $ref cycle that
// does not pass through an object or array rule is an error.
#pragma once
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "structured/grammar.h"
#include "structured/json_schema.h"

namespace nanovllm::structured {

using ojson = nlohmann::ordered_json;

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const ojson& root, const JsonSchemaOptions& opt);

  // The JSON text of the instances of `s` (at `path`, a "#/..." pointer for messages).
  ExprPtr value(const ojson& s, const std::string& path);

  [[noreturn]] void fail(const std::string& path, const std::string& what) const;

 private:
  ExprPtr value_body(const ojson& s, const std::string& path);
  ExprPtr enum_value(const ojson& s, const std::string& path);
  ExprPtr typed(const ojson& s, const std::string& type, const std::string& path);
  ExprPtr integer_value(const ojson& s, const std::string& path);
  ExprPtr number_value(const ojson& s, const std::string& path);
  const ojson& resolve_ref(const ojson& ref, const std::string& path, std::string* target_path) const;
  std::vector<std::string> types_of(const ojson& s, const std::string& path) const;
  void check_keywords(const ojson& s, const std::string& path) const;

  // json_schema_oneof.cc
  const ojson& deref(const ojson& s, const std::string& path, int depth) const;
  std::set<std::string> possible_types(const ojson& s, const std::string& path, int depth) const;
  bool discriminated(const ojson& a, const ojson& b, const std::string& path) const;
  void check_one_of(const ojson& list, const std::string& path) const;

  // json_schema_rules.cc
  int object_rule(const ojson& s, const std::string& path);
  int array_rule(const ojson& s, const std::string& path);
  ExprPtr string_value(const ojson& s, const std::string& path);
  int plain_string_rule();
  ExprPtr any_value();
  ExprPtr ws() const;
  // A non-negative integer keyword (minItems, maxLength...); `dflt` when absent.
  int64_t count_keyword(const ojson& s, const char* key, int64_t dflt, const std::string& path) const;

  GrammarBuilder& b_;
  const ojson& root_;
  JsonSchemaOptions opt_;
  std::map<const ojson*, int> objects_, arrays_, strings_;
  int plain_string_ = -1;
  std::vector<const ojson*> ref_stack_;  // $ref targets being expanded inline (cycle check)
  const ojson true_ = true, any_object_ = ojson{{"type", "object"}}, any_array_ = ojson{{"type", "array"}};
};

}  // namespace nanovllm::structured
