// Internal to tool_parser.cc: an incremental scanner of one tool-call object
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
// fed one byte at a time. It reports the name once its string is complete, streams the raw text
// of the arguments value (the "arguments" or "parameters" key) as it arrives, skips other keys,
// and knows when the object ends. Bracket matching is string-aware; scalars and the name are
// checked with nlohmann when they end. An arguments value that is a JSON string (some models
// encode the arguments) is decoded and reported once complete.
#pragma once
#include <string>
#include <vector>

namespace nanovllm::chat {

class ToolCallScanner {
 public:
  enum class Status { kMore, kDone, kError };
  ToolCallScanner() = default;
  // Consumes one byte; argument text it completes is appended to *args.
  Status feed(char c, std::string* args);
  bool has_name() const { return has_name_; }
  const std::string& name() const { return name_; }
  bool saw_arguments() const { return saw_args_; }

 private:
  enum class State { kBeforeObject, kBeforeKey, kInKey, kAfterKey, kBeforeValue, kInValue, kAfterValue, kDone, kError };
  enum class Role { kName, kArguments, kOther };
  Status fail() {
    state_ = State::kError;
    return Status::kError;
  }
  // The value in progress ended (scalar: before the current byte). Returns false on bad JSON.
  bool end_value(std::string* args);

  State state_ = State::kBeforeObject;
  bool any_member_ = false;
  std::string key_;  // raw key text (escapes undecoded)
  bool key_escape_ = false;
  Role role_ = Role::kOther;
  // The value being scanned.
  std::string value_;  // its raw text, for the name, string arguments and scalars
  int depth_ = 0;      // open brackets
  bool in_string_ = false, escape_ = false, scalar_ = false;
  std::string name_;
  bool has_name_ = false, saw_args_ = false;
};

}  // namespace nanovllm::chat
