// One memory-mapped safetensors file: header parsing and validation. Tensors returned by get()
// point into the mapping (no copy); the mapping lives as long as any tensor or the file object
// references it. A model directory (one file or shards) is a WeightStore (weight_store.h).
#pragma once
#include <map>
#include <memory>
#include <string>

#include "util/tensor.h"

namespace nanovllm {

struct TensorInfo {
  DType dtype;
  Shape shape;
  size_t offset = 0;  // byte offset of data from the start of the file
  size_t nbytes = 0;
};

class SafetensorsFile {
 public:
  // Throws nanovllm::Error naming the file for: missing file, truncated file, header length
  // beyond the file, malformed header JSON, unknown dtype, data offsets outside the file or
  // inconsistent with shape * dtype size.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  const std::string& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return tensors_.count(name) > 0; }
  Tensor get(const std::string& name) const;  // throws if missing
  ~SafetensorsFile();

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  std::weak_ptr<SafetensorsFile> self_;
  friend struct SafetensorsOpener;
};

}  // namespace nanovllm
