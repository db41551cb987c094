// Helpers shared by the loader tests: a self-deleting temp dir, raw file writing, and a check
// that a call throws nanovllm::Error whose message contains given pieces.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "util/check.h"

namespace nanovllm::test {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "nv_loader_XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    if (!p) throw std::runtime_error("mkdtemp failed");
    path = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A safetensors file from a header text and a data section, with the 8-byte length prefix
// (optionally lying about the header length).
inline std::string st_bytes(const std::string& header, const std::string& data,
                            int64_t len_override = -1) {
  uint64_t n = len_override >= 0 ? uint64_t(len_override) : header.size();
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return s + header + data;
}

// Expects fn() to throw nanovllm::Error mentioning every string in `parts`.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const nanovllm::Error& e) {
    std::string m = e.what();
    for (const auto& p : parts)
      EXPECT_NE(m.find(p), std::string::npos) << "message lacks '" << p << "': " << m;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-nanovllm exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "did not throw";
}

}  // namespace nanovllm::test
