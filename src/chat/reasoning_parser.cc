#include "chat/reasoning_parser.h"

#include "chat/text_scan.h"

namespace nanovllm::chat {

ReasoningStreamParser::ReasoningStreamParser(ReasoningOptions opt) : opt_(std::move(opt)) {}

ReasoningDelta ReasoningStreamParser::push(std::string_view text) {
  buf_.append(text);
  return drain(false);
}

ReasoningDelta ReasoningStreamParser::finish() { return drain(true); }

// Trailing newlines are held: they are dropped if the end tag (or the end) follows.
void ReasoningStreamParser::emit_reasoning(std::string_view s, ReasoningDelta& out) {
  size_t last = s.find_last_not_of('\n');
  if (last == std::string_view::npos) {
    held_newlines_ += s.size();
    return;
  }
  out.reasoning.append(held_newlines_, '\n');
  out.reasoning.append(s.substr(0, last + 1));
  held_newlines_ = s.size() - last - 1;
}

ReasoningDelta ReasoningStreamParser::drain(bool final) {
  ReasoningDelta out;
  for (;;) {
    if (mode_ == Mode::kStart) {
      size_t i = 0;
      while (i < buf_.size() && is_json_ws(buf_[i])) ++i;
      std::string_view rest = std::string_view(buf_).substr(i), tag = opt_.start_tag;
      if (rest.substr(0, tag.size()) == tag) {
        buf_.erase(0, i + tag.size());
        mode_ = Mode::kReasoning;
        strip_newlines_ = true;
        continue;
      }
      if (!final && tag.substr(0, rest.size()) == rest) return out;  // may still become the tag
      mode_ = opt_.prompt_opened ? Mode::kReasoning : Mode::kContent;
      strip_newlines_ = opt_.prompt_opened;
      continue;
    }
    if (strip_newlines_) {
      size_t k = buf_.find_first_not_of('\n');
      if (k == std::string::npos) {
        buf_.clear();
        return out;
      }
      buf_.erase(0, k);
      strip_newlines_ = false;
    }
    if (mode_ == Mode::kContent) {
      out.content += buf_;
      buf_.clear();
      return out;
    }
    size_t pos = buf_.find(opt_.end_tag);
    if (pos != std::string::npos) {
      emit_reasoning(std::string_view(buf_).substr(0, pos), out);
      held_newlines_ = 0;
      buf_.erase(0, pos + opt_.end_tag.size());
      mode_ = Mode::kContent;
      strip_newlines_ = true;
      continue;
    }
    size_t keep = final ? 0 : partial_tag_suffix(buf_, opt_.end_tag);
    emit_reasoning(std::string_view(buf_).substr(0, buf_.size() - keep), out);
    buf_.erase(0, buf_.size() - keep);
    if (final) held_newlines_ = 0;
    return out;
  }
}

ReasoningDelta parse_reasoning(std::string_view text, const ReasoningOptions& opt) {
  ReasoningStreamParser p(opt);
  ReasoningDelta a = p.push(text), b = p.finish();
  return {a.reasoning + b.reasoning, a.content + b.content};
}

}  // namespace nanovllm::chat
