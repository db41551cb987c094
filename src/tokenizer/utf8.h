// UTF-8 helpers shared by the tokenizer: validation with U+FFFD replacement (the same result as
// Python's bytes.decode("utf-8", errors="replace") and Rust's String::from_utf8_lossy: each
// maximal invalid subpart becomes one U+FFFD), code point iteration, and the GPT-2 byte<->char
// table used by the ByteLevel pre-tokenizer and decoder.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace nanovllm::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is invalid or truncated.
// When 0, *subpart receives the length of the maximal invalid subpart (>= 1) to replace.
int valid_seq_len(std::string_view s, size_t i, int* subpart);

// True when the whole string is valid UTF-8.
bool is_valid(std::string_view s);

// Returns s with every invalid sequence replaced by U+FFFD (s itself when valid).
std::string sanitize(std::string_view s);

// Length in bytes of the incomplete (but so far valid) sequence at the end of s: 0 when s ends
// on a character boundary. Used by streaming decoders to hold bytes back.
int incomplete_tail(std::string_view s);

// Decodes the code point at s[i] (s must be valid UTF-8), advancing i.
uint32_t next_cp(std::string_view s, size_t& i);

// Appends the UTF-8 encoding of cp.
void append_cp(std::string& out, uint32_t cp);

// GPT-2 byte-level alphabet: byte b <-> a printable code point (as a UTF-8 string).
const std::string& byte_to_unicode(uint8_t b);
// Inverse: code point -> byte, or -1 when cp is not in the alphabet.
int unicode_to_byte(uint32_t cp);

}  // namespace nanovllm::utf8
