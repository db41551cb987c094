#include "chat/tool_parser.h"

#include "chat/text_scan.h"

namespace nanovllm::chat {

namespace {
constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>", kPythonTag = "<|python_tag|>";

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
// True when s is a proper prefix of one of the tags (more text may complete it).
bool may_become(std::string_view s, std::string_view tag) { return s.size() < tag.size() && starts_with(tag, s); }
}  // namespace

ToolCallStreamParser::ToolCallStreamParser(ToolCallFormat format, std::string id_prefix)
    : format_(format), id_prefix_(std::move(id_prefix)),
      mode_(format == ToolCallFormat::kHermes ? Mode::kContent : Mode::kStart) {}

ToolStreamDelta ToolCallStreamParser::push(std::string_view text) {
  buf_.append(text);
  return drain(false);
}

ToolStreamDelta ToolCallStreamParser::finish() { return drain(true); }

void ToolCallStreamParser::start_call() {
  scanner_ = std::make_unique<ToolCallScanner>();
  raw_.clear();
  name_sent_ = args_sent_ = false;
  early_args_.clear();
}

void ToolCallStreamParser::add_args(const std::string& piece, ToolStreamDelta& out) {
  if (piece.empty()) return;
  if (!name_sent_) {
    early_args_ += piece;
    return;
  }
  args_sent_ = true;
  int index = calls_ - 1;
  // A call's first delta (id, name) keeps arguments "", as OpenAI streams it.
  if (!out.tool_calls.empty() && out.tool_calls.back().index == index && out.tool_calls.back().id.empty())
    out.tool_calls.back().arguments += piece;
  else out.tool_calls.push_back({index, "", "", piece});
}

void ToolCallStreamParser::end_call(ToolStreamDelta& out) {
  if (!scanner_->saw_arguments()) add_args("{}", out);
  scanner_.reset();
}

bool ToolCallStreamParser::scan_call(bool final, ToolStreamDelta& out) {
  for (size_t i = 0; i < buf_.size(); ++i) {
    std::string piece;
    ToolCallScanner::Status st = scanner_->feed(buf_[i], &piece);
    if (st == ToolCallScanner::Status::kError || (st == ToolCallScanner::Status::kDone && !scanner_->has_name())) {
      // Broken: buf_[i] stays unconsumed (it may start the closing tag or more content).
      if (st == ToolCallScanner::Status::kDone) raw_ += buf_[i++];
      buf_.erase(0, i);
      bool hermes = format_ == ToolCallFormat::kHermes;
      if (name_sent_) {
        scanner_.reset();
        mode_ = hermes ? Mode::kSkipToEnd : Mode::kPlain;
      } else {
        out.content += raw_;
        mode_ = hermes ? Mode::kContent : Mode::kPlain;
      }
      return true;
    }
    raw_ += buf_[i];
    if (!name_sent_ && scanner_->has_name()) {
      int index = calls_++;
      out.tool_calls.push_back({index, id_prefix_ + std::to_string(index), scanner_->name(), ""});
      name_sent_ = true;
      add_args(early_args_, out);
    }
    add_args(piece, out);
    if (st == ToolCallScanner::Status::kDone) {
      buf_.erase(0, i + 1);
      end_call(out);
      mode_ = format_ == ToolCallFormat::kHermes ? Mode::kAfterCall : Mode::kBetween;
      return true;
    }
  }
  buf_.clear();
  if (!final) return false;
  if (name_sent_) scanner_.reset();  // cut off: the call keeps what was streamed
  else out.content += raw_;
  mode_ = Mode::kPlain;
  return true;
}

ToolStreamDelta ToolCallStreamParser::drain(bool final) {
  ToolStreamDelta out;
  for (;;) {
    switch (mode_) {
      case Mode::kStart: {  // Llama-3: tool calls iff the output starts with '{' or the python tag
        size_t i = 0;
        while (i < buf_.size() && is_json_ws(buf_[i])) ++i;
        std::string_view rest = std::string_view(buf_).substr(i);
        if (starts_with(rest, kPythonTag)) {
          buf_.erase(0, i + kPythonTag.size());
          mode_ = Mode::kBetween;
        } else if (!rest.empty() && rest[0] == '{') {
          mode_ = Mode::kBetween;
        } else if (!final && (rest.empty() || may_become(rest, kPythonTag))) {
          return out;
        } else {
          mode_ = Mode::kPlain;
        }
        continue;
      }
      case Mode::kPlain:
        out.content += buf_;
        buf_.clear();
        return out;
      case Mode::kContent: {
        size_t pos = buf_.find(kOpen);
        if (pos != std::string::npos) {
          out.content.append(buf_, 0, pos);
          buf_.erase(0, pos + kOpen.size());
          start_call();
          raw_ = kOpen;
          mode_ = Mode::kCall;
          continue;
        }
        size_t keep = final ? 0 : partial_tag_suffix(buf_, kOpen);
        out.content.append(buf_, 0, buf_.size() - keep);
        buf_.erase(0, buf_.size() - keep);
        return out;
      }
      case Mode::kCall:
        if (!scan_call(final, out)) return out;
        continue;
      case Mode::kAfterCall: {  // Hermes: between the object's '}' and </tool_call>
        size_t i = 0;
        while (i < buf_.size() && is_json_ws(buf_[i])) ++i;
        buf_.erase(0, i);
        if (buf_.empty()) return out;
        if (starts_with(buf_, kClose)) {
          buf_.erase(0, kClose.size());
          mode_ = Mode::kBetween;
        } else if (starts_with(buf_, kOpen)) {
          mode_ = Mode::kContent;  // a missing </tool_call>: the next call starts
        } else if (!final && (may_become(buf_, kClose) || may_become(buf_, kOpen))) {
          return out;
        } else {
          mode_ = Mode::kSkipToEnd;
        }
        continue;
      }
      case Mode::kSkipToEnd: {
        size_t pos = buf_.find(kClose);
        if (pos != std::string::npos) {
          buf_.erase(0, pos + kClose.size());
          mode_ = Mode::kBetween;
          continue;
        }
        buf_.erase(0, buf_.size() - partial_tag_suffix(buf_, kClose));
        return out;
      }
      case Mode::kBetween: {  // whitespace after a call (and ';' between Llama-3 calls) is dropped
        bool llama = format_ == ToolCallFormat::kLlama3Json;
        size_t i = 0;
        while (i < buf_.size() && (is_json_ws(buf_[i]) || (llama && buf_[i] == ';'))) ++i;
        buf_.erase(0, i);
        if (buf_.empty()) return out;
        if (llama && buf_[0] == '{') {
          start_call();
          mode_ = Mode::kCall;
        } else {
          mode_ = llama ? Mode::kPlain : Mode::kContent;
        }
        continue;
      }
    }
  }
}

void accumulate(const ToolStreamDelta& d, ParsedToolCalls& into) {
  into.content += d.content;
  for (const ToolCallDelta& t : d.tool_calls) {
    if (t.index == static_cast<int>(into.calls.size())) into.calls.push_back({t.id, t.name, ""});
    into.calls.at(t.index).arguments += t.arguments;
  }
}

ParsedToolCalls parse_tool_calls(std::string_view text, ToolCallFormat format, const std::string& id_prefix) {
  ToolCallStreamParser p(format, id_prefix);
  ParsedToolCalls r;
  accumulate(p.push(text), r);
  accumulate(p.finish(), r);
  return r;
}

}  // namespace nanovllm::chat
