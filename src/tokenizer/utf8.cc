#include "tokenizer/utf8.h"

#include <array>

namespace nanovllm::utf8 {

int valid_seq_len(std::string_view s, size_t i, int* subpart) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t n = s.size();
  uint8_t b0 = p[i];
  if (b0 < 0x80) return 1;
  int need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no UTF-16 surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    if (subpart) *subpart = 1;
    return 0;
  }
  int k = 1;
  for (; k <= need; ++k) {
    if (i + k >= n) break;
    uint8_t b = p[i + k];
    uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) break;
  }
  if (k == need + 1) return need + 1;
  if (subpart) *subpart = k;
  return 0;
}

bool is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // Fast path over ASCII.
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    int len = valid_seq_len(s, i, nullptr);
    if (!len) return false;
    i += len;
  }
  return true;
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    int sub = 0;
    int len = valid_seq_len(s, i, &sub);
    if (len) {
      out.append(s.data() + i, len);
      i += len;
    } else {
      out.append(kReplacement);
      i += sub;
    }
  }
  return out;
}

int incomplete_tail(std::string_view s) {
  // A truncated sequence is at most 3 bytes long; look for its lead byte.
  size_t n = s.size();
  for (int back = 1; back <= 3 && back <= static_cast<int>(n); ++back) {
    size_t i = n - back;
    uint8_t b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) return 0;
    if (b >= 0xC0) {  // lead byte: truncated when it is a valid prefix reaching the end
      int sub = 0;
      int len = valid_seq_len(s, i, &sub);
      return (len == 0 && sub == back) ? back : 0;
    }
  }
  return 0;
}

uint32_t next_cp(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  uint8_t b = p[i];
  if (b < 0x80) {
    ++i;
    return b;
  }
  // Callers pass valid UTF-8; the bounds check only keeps a malformed string (e.g. raw bytes in
  // a tokenizer.json) from reading past its end.
  size_t need = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  if (b < 0xC0 || i + need > s.size()) {
    ++i;
    return 0xFFFD;
  }
  uint32_t cp;
  if (need == 2) {
    cp = ((b & 0x1F) << 6) | (p[i + 1] & 0x3F);
  } else if (need == 3) {
    cp = ((b & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F);
  } else {
    cp = ((b & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) | ((p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
  }
  i += need;
  return cp;
}

void append_cp(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {
// The GPT-2 table: printable Latin-1 bytes map to themselves; the other 68 bytes map, in byte
// order, to U+0100, U+0101, ...
struct ByteTable {
  std::array<std::string, 256> to_str;
  std::array<uint32_t, 256> to_cp;
  std::array<int16_t, 324> from_cp;  // code point (< 324) -> byte, -1 when not in the alphabet
  ByteTable() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint32_t cp = keep ? static_cast<uint32_t>(b) : next++;
      to_cp[b] = cp;
      from_cp[cp] = static_cast<int16_t>(b);
      append_cp(to_str[b], cp);
    }
  }
};
const ByteTable& table() {
  static const ByteTable t;
  return t;
}
}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return table().to_str[b]; }

int unicode_to_byte(uint32_t cp) { return cp < 324 ? table().from_cp[cp] : -1; }

}  // namespace nanovllm::utf8
