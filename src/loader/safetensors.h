// Memory-mapped safetensors reading (single file or sharded via model.safetensors.index.json)
// and writing (for make-model and tests). Tensors returned by get() point into the mapping
// (no copy); the mapping lives as long as any tensor or the store references it.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

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

// All weights of a model directory: model.safetensors, or the shards named by
// model.safetensors.index.json (weight_map), or every *.safetensors file.
class WeightStore {
 public:
  static WeightStore open_dir(const std::string& model_dir);
  bool has(const std::string& name) const;
  Tensor get(const std::string& name) const;  // throws "missing tensor 'x' in <dir>"
  // Same, and checks the shape: "tensor 'x' has shape [a, b], expected [c, d]".
  Tensor get(const std::string& name, const Shape& expected) const;
  std::vector<std::string> names() const;

 private:
  std::string dir_;
  std::map<std::string, std::shared_ptr<SafetensorsFile>> by_name_;
};

// Writes tensors (host, any dtype) to a safetensors file; names sorted, 8-byte aligned header.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Host-side helpers for name mapping and tensor-parallel sharding (copies).
Tensor concat_rows(const std::vector<Tensor>& parts);            // along dim 0, same dtype
Tensor shard_dim(const Tensor& t, int dim, int rank, int world);  // contiguous slice of dim 0 or 1
Tensor to_dtype(const Tensor& t, DType dtype);                    // host float conversion

}  // namespace nanovllm
