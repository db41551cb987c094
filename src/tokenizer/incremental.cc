// IncrementalDetokenizer: streaming decode with the guarantee that the pushed pieces concatenate
// to the full decode.
//
// How: ids [ctx_, n) are decoded as a window; the text that ids [read_, n) add is the window's
// text after base_ = decode(ids [ctx_, read_)). The window starts one kept id before read_ so
// that rules applied at the start of a decode (Strip / Metaspace dropping a leading space) hit
// context, not new text. New text is held back while it may still change:
//   - it ends with U+FFFD (an incomplete UTF-8 character that later ids may complete), or
//   - the last kept id is a byte-fallback "<0xAB>" token (the run's validity decides its text).
// clean_up_tokenization_spaces (" ." -> "." etc.) can remove a space already decoded, so
// cleaned text is released only up to a point where no rule can span the cut: every rule's
// pattern starts with a space and is at most 4 bytes, so a cut with no space in the 3 bytes
// before it splits the cleanup exactly.
#include "tokenizer/incremental.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace nanovllm {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens,
                                               std::vector<int> prompt_ids)
    : tok_(tok), skip_(skip_special_tokens), ids_(std::move(prompt_ids)) {
  cleanup_ = tok.clean_up_tokenization_spaces();
  read_ = ids_.size();
  // Context: back up over two kept prompt ids (dropped ones decode to nothing).
  ctx_ = read_;
  int kept = 0;
  while (ctx_ > 0 && kept < 2) {
    --ctx_;
    if (!tok.is_dropped(ids_[ctx_], skip_)) ++kept;
  }
  base_ = tok.decode_raw(ids_.data() + ctx_, read_ - ctx_, skip_);
}

std::string IncrementalDetokenizer::push(int id) {
  ids_.push_back(id);
  return emit(false);
}

std::string IncrementalDetokenizer::finish() { return emit(true); }

std::string IncrementalDetokenizer::emit(bool final) {
  std::string raw;
  size_t n = ids_.size();
  if (n > read_) {
    // The last id that decode keeps decides (dropped ids do not end a byte-fallback run).
    size_t last = n;
    while (last > read_ && tok_.is_dropped(ids_[last - 1], skip_)) --last;
    bool hold = !final && last > read_ && tok_.is_fallback_byte(ids_[last - 1]);
    std::string full;
    if (!hold) {
      full = tok_.decode_raw(ids_.data() + ctx_, n - ctx_, skip_);
      std::string_view f(full);
      if (!final && f.size() >= 3 && f.substr(f.size() - 3) == utf8::kReplacement) hold = true;
    }
    if (!hold) {
      size_t common = 0;
      if (full.compare(0, base_.size(), base_) == 0) {
        common = base_.size();
      } else {
        // Only at the prompt boundary (a prompt ending inside a character): emit from the first
        // difference, backed up to a character start.
        while (common < base_.size() && common < full.size() && base_[common] == full[common]) ++common;
        while (common > 0 && (static_cast<unsigned char>(full[common]) & 0xC0) == 0x80) --common;
      }
      raw = full.substr(common);
      bool any_kept = false;
      for (size_t k = read_; k < n && !any_kept; ++k) any_kept = !tok_.is_dropped(ids_[k], skip_);
      if (any_kept) {
        ctx_ = read_;
        base_ = tok_.decode_raw(ids_.data() + ctx_, n - ctx_, skip_);
      } else {
        base_ = std::move(full);
      }
      read_ = n;
    }
  }
  if (!cleanup_) return raw;
  pending_ += raw;
  if (final) {
    std::string out = Tokenizer::clean_up_spaces(pending_);
    pending_.clear();
    return out;
  }
  size_t cut = pending_.size();
  while (cut > 0) {
    size_t from = cut >= 3 ? cut - 3 : 0;
    if (pending_.find(' ', from) >= cut) break;
    --cut;
  }
  std::string out = Tokenizer::clean_up_spaces(std::string_view(pending_).substr(0, cut));
  pending_.erase(0, cut);
  return out;
}

}  // namespace nanovllm
