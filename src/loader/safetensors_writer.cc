#include "loader/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "util/check.h"

namespace nanovllm {

size_t TensorSpec::nbytes() const {
  size_t n = dtype_size(dtype);
  for (auto d : shape) n *= size_t(d);
  return n;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<TensorSpec> specs,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), tmp_(path + ".tmp"), specs_(std::move(specs)) {
  std::sort(specs_.begin(), specs_.end(),
            [](const TensorSpec& a, const TensorSpec& b) { return a.name < b.name; });
  // ordered_json keeps the entries in data order, which is easier to read when debugging.
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = m;
  }
  size_t off = 0;
  for (size_t i = 0; i < specs_.size(); ++i) {
    const TensorSpec& s = specs_[i];
    NV_CHECK(!s.name.empty() && s.name != "__metadata__", "invalid tensor name '", s.name, "'");
    NV_CHECK(i == 0 || specs_[i - 1].name != s.name, "duplicate tensor name '", s.name, "'");
    for (auto d : s.shape) NV_CHECK_GE(d, 0, "negative dimension in tensor '", s.name, "'");
    nlohmann::ordered_json e;
    e["dtype"] = dtype_name(s.dtype);  // "F32", "BF16", ... are the safetensors spellings
    e["shape"] = s.shape;
    size_t n = s.nbytes();
    e["data_offsets"] = {off, off + n};
    h[s.name] = e;
    off += n;
  }
  expected_ = off;
  std::string header = h.dump();
  while ((8 + header.size()) % 8 != 0) header.push_back(' ');

  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) NV_THROW("cannot create '", tmp_, "': ", std::strerror(errno));
  std::setvbuf(f_, nullptr, _IOFBF, size_t(1) << 20);  // small appends coalesce
  unsigned char len[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  append(len, 8);
  append(header.data(), header.size());
  written_ = 0;  // count data bytes only
}

SafetensorsWriter::~SafetensorsWriter() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void SafetensorsWriter::append(const void* data, size_t n) {
  NV_CHECK(f_ != nullptr, "SafetensorsWriter for '", path_, "' is already finished");
  if (n == 0) return;
  if (std::fwrite(data, 1, n, f_) != n)
    NV_THROW("write to '", tmp_, "' failed: ", std::strerror(errno));
  written_ += n;
}

void SafetensorsWriter::finish() {
  NV_CHECK(f_ != nullptr, "SafetensorsWriter for '", path_, "' is already finished");
  NV_CHECK_EQ(written_, expected_, "safetensors data bytes written for '", path_, "'");
  std::FILE* f = f_;
  f_ = nullptr;
  if (std::fflush(f) != 0 || std::ferror(f)) {
    std::fclose(f);
    std::remove(tmp_.c_str());
    NV_THROW("write to '", tmp_, "' failed: ", std::strerror(errno));
  }
  if (std::fclose(f) != 0) {
    std::remove(tmp_.c_str());
    NV_THROW("closing '", tmp_, "' failed: ", std::strerror(errno));
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    NV_THROW("cannot rename '", tmp_, "' to '", path_, "': ", std::strerror(errno));
  }
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  for (const auto& [name, t] : tensors) {
    NV_CHECK(t.device() == Device::CPU, "write_safetensors: tensor '", name,
             "' must be on the host, got ", t.str());
    NV_CHECK(t.raw() != nullptr || t.numel() == 0, "write_safetensors: tensor '", name,
             "' is undefined");
    specs.push_back({name, t.dtype(), t.shape()});
  }
  SafetensorsWriter w(path, std::move(specs), metadata);
  for (const auto& s : w.order()) w.append(tensors.at(s.name).raw(), s.nbytes());
  w.finish();
}

}  // namespace nanovllm
