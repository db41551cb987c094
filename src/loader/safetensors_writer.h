// Streaming safetensors writer: the header is computed from names, dtypes and shapes up front,
// then the data is appended tensor by tensor in name order. This lets make-model write a
// multi-GB checkpoint without holding it in memory; write_safetensors() is built on it.
//
// Output matches what the Python `safetensors` library expects: header JSON padded with
// spaces so the data starts at an 8-byte boundary, tensors sorted by name, data contiguous
// in that order with no gaps. The file is written to "<path>.tmp" and renamed on finish(),
// so a crash never leaves a half-written file under the final name.
#pragma once
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "util/tensor.h"

namespace nanovllm {

struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  size_t nbytes() const;
};

class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, std::vector<TensorSpec> specs,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();  // an unfinished file is removed
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // The order in which data must be appended (sorted by name).
  const std::vector<TensorSpec>& order() const { return specs_; }
  // Appends raw bytes of the current tensor(s); may be called in pieces of any size.
  void append(const void* data, size_t n);
  // Checks that exactly the declared bytes were written, flushes and renames into place.
  void finish();

 private:
  std::string path_, tmp_;
  std::vector<TensorSpec> specs_;
  std::FILE* f_ = nullptr;
  size_t expected_ = 0, written_ = 0;
};

// Writes tensors (host, any dtype) to a safetensors file; names sorted, 8-byte aligned header.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace nanovllm
