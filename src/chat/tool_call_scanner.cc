#include "chat/tool_call_scanner.h"

#include <nlohmann/json.hpp>

#include "chat/text_scan.h"

namespace nanovllm::chat {

bool ToolCallScanner::end_value(std::string* args) {
  any_member_ = true;
  if (role_ == Role::kName || (role_ == Role::kArguments && value_[0] == '"')) {
    nlohmann::json v = nlohmann::json::parse(value_, nullptr, false);
    if (!v.is_string()) return false;
    if (role_ == Role::kArguments) {
      *args += v.get<std::string>();
    } else if (!has_name_) {
      name_ = v.get<std::string>();
      has_name_ = true;
    }
    return true;
  }
  return !scalar_ || nlohmann::json::accept(value_);
}

ToolCallScanner::Status ToolCallScanner::feed(char c, std::string* args) {
  switch (state_) {
    case State::kBeforeObject:
      if (is_json_ws(c)) return Status::kMore;
      if (c != '{') return fail();
      state_ = State::kBeforeKey;
      return Status::kMore;
    case State::kBeforeKey:
      if (is_json_ws(c)) return Status::kMore;
      if (c == '"') {
        key_.clear();
        key_escape_ = false;
        state_ = State::kInKey;
        return Status::kMore;
      }
      if (c == '}' && !any_member_) {
        state_ = State::kDone;
        return Status::kDone;
      }
      return fail();
    case State::kInKey: {
      if (key_escape_ || c != '"') {
        key_escape_ = !key_escape_ && c == '\\';
        key_ += c;
        return Status::kMore;
      }
      nlohmann::json k = nlohmann::json::parse("\"" + key_ + "\"", nullptr, false);
      if (!k.is_string()) return fail();
      std::string key = k.get<std::string>();
      role_ = key == "name" ? Role::kName : key == "arguments" || key == "parameters" ? Role::kArguments : Role::kOther;
      state_ = State::kAfterKey;
      return Status::kMore;
    }
    case State::kAfterKey:
      if (is_json_ws(c)) return Status::kMore;
      if (c != ':') return fail();
      state_ = State::kBeforeValue;
      return Status::kMore;
    case State::kBeforeValue: {
      if (is_json_ws(c)) return Status::kMore;
      value_.assign(1, c);
      depth_ = 0;
      in_string_ = escape_ = scalar_ = false;
      if (c == '"') in_string_ = true;
      else if (c == '{' || c == '[') depth_ = 1;
      else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') scalar_ = true;
      else return fail();
      if (role_ == Role::kArguments) {
        saw_args_ = true;
        if (c != '"') *args += c;
      }
      state_ = State::kInValue;
      return Status::kMore;
    }
    case State::kInValue: {
      if (scalar_ && (c == ',' || c == '}' || c == ']' || is_json_ws(c))) {
        if (!end_value(args)) return fail();
        state_ = State::kAfterValue;
        return feed(c, args);  // the delimiter belongs to the object
      }
      value_ += c;
      if (role_ == Role::kArguments && value_[0] != '"') *args += c;
      bool ended = false;
      if (scalar_) {
      } else if (in_string_) {
        if (escape_) escape_ = false;
        else if (c == '\\') escape_ = true;
        else if (c == '"') in_string_ = false, ended = depth_ == 0;
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if (c == '}' || c == ']') {
        ended = --depth_ == 0;
      }
      if (ended) {
        if (!end_value(args)) return fail();
        state_ = State::kAfterValue;
      }
      return Status::kMore;
    }
    case State::kAfterValue:
      if (is_json_ws(c)) return Status::kMore;
      if (c == ',') {
        state_ = State::kBeforeKey;
        return Status::kMore;
      }
      if (c != '}') return fail();
      state_ = State::kDone;
      return Status::kDone;
    case State::kDone:
      return Status::kDone;
    case State::kError:
      return Status::kError;
  }
  return Status::kError;
}

}  // namespace nanovllm::chat
