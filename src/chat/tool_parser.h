// Parses tool calls out of a model's text into OpenAI's fields (id, name, arguments), streaming
// or at once. Their JSON is the server's (server/choice_output.h).
//
// Formats (tool_call_format.h):
//  - kHermes (Qwen2.5/Qwen3, Hermes): <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>,
//    any number of them, with plain content around them.
//  - kLlama3Json (Llama 3.x JSON tool calling): the output starts (after whitespace or
//    <|python_tag|>) with {"name": ..., "parameters": {...}}; several calls are separated by
//    ';' or whitespace. An output that does not start with '{' is plain content.
//
// A call's function.arguments is the raw text of its "arguments" / "parameters" value as the
// model wrote it (a JSON string value is decoded instead; no such key gives "{}"). The stream
// emits, per call, one delta carrying index, id and name (arguments "") as soon as the name is
// complete, then deltas with argument pieces as they arrive: the way OpenAI streams
// delta.tool_calls. Content outside the calls is emitted as content deltas; whitespace right
// after a </tool_call> is dropped.
//
// Malformed calls: if a call's JSON breaks before its name is complete, its text (from the
// start tag) is content; if it breaks later, the call keeps what was streamed and the rest of
// the block is dropped. A call cut off by the end of the output keeps what was streamed.
//
// parse_tool_calls(text) equals the accumulation of push(text) + finish(), and the stream's
// accumulated result does not depend on how the text is split (tested at every byte).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_format.h"
#include "chat/tool_call_scanner.h"

namespace nanovllm::chat {

struct ToolCall {
  std::string id, name, arguments;
};

struct ToolCallDelta {
  int index = 0;
  std::string id, name;  // set only in a call's first delta
  std::string arguments;  // a piece of the arguments string
};

struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
};

class ToolCallStreamParser {
 public:
  // Call ids are id_prefix + index ("call_0", ...); pass a per-request random prefix.
  explicit ToolCallStreamParser(ToolCallFormat format, std::string id_prefix = "call_");
  ToolStreamDelta push(std::string_view text);
  ToolStreamDelta finish();
  int num_calls() const { return calls_; }  // calls started so far (finish_reason "tool_calls" if > 0)

 private:
  enum class Mode { kStart, kContent, kCall, kAfterCall, kSkipToEnd, kBetween, kPlain };
  ToolStreamDelta drain(bool final);
  void start_call();
  // Feeds buf_ to the scanner; returns true when the call ended (done, error or end of text).
  bool scan_call(bool final, ToolStreamDelta& out);
  void end_call(ToolStreamDelta& out);
  void add_args(const std::string& piece, ToolStreamDelta& out);

  ToolCallFormat format_;
  std::string id_prefix_;
  Mode mode_;
  std::string buf_;
  int calls_ = 0;
  // The call in progress.
  std::unique_ptr<ToolCallScanner> scanner_;
  std::string raw_;            // its text so far (content again if it breaks before the name)
  bool name_sent_ = false, args_sent_ = false;
  std::string early_args_;     // arguments seen before the name
};

struct ParsedToolCalls {
  std::string content;
  std::vector<ToolCall> calls;
};

// Accumulates stream deltas into the non-streaming result.
void accumulate(const ToolStreamDelta& d, ParsedToolCalls& into);
ParsedToolCalls parse_tool_calls(std::string_view text, ToolCallFormat format, const std::string& id_prefix = "call_");

}  // namespace nanovllm::chat
