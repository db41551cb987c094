// What came back for one request `nanovllm replay --url` sent: each choice's text, finish reason
// and (for /v1/completions, which replay asks with return_token_ids) token ids, read from a whole
// JSON response or incrementally from a server-sent-event stream, for every generation route
// the server has (completions, chat, Responses, Anthropic Messages).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm::replay {

struct ChoiceOutput {
  int index = 0;
  std::string text;
  std::vector<int> token_ids;
  bool has_token_ids = false;
  std::string finish_reason;  // the engine's words: stop | length | abort | error
};

class ResponseReader {
 public:
  explicit ResponseReader(std::string route) : route_(std::move(route)) {}
  // One line of an SSE body ("data: {...}"; other lines are ignored). True when it carried
  // generated content (the first such line is the client's time to first token).
  bool feed_sse_line(std::string_view line);
  // A whole (non-streamed) JSON response body. Throws nanovllm::Error when it is not JSON.
  void read_whole(std::string_view body);
  const std::vector<ChoiceOutput>& choices() const { return choices_; }

 private:
  ChoiceOutput& choice(int index);
  std::string route_;
  std::vector<ChoiceOutput> choices_;
};

}  // namespace nanovllm::replay
