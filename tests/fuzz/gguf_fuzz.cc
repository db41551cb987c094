// libFuzzer target (clang; `make fuzz`): arbitrary bytes as a GGUF file. The parser must
// either throw nanovllm::Error or hand out a file whose every tensor can be dequantized row by
// row and whose metadata can be read with every getter, without reading outside the buffer
// (ASan) or allocating from unchecked sizes. Seeds: tests/fuzz/corpus/gguf/.
#include <cstdint>
#include <vector>

#include "loader/gguf.h"
#include "loader/gguf_quants.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes, so ASan catches a read one past the end.
  std::vector<uint8_t> buf(data, data + size);
  try {
    auto f = nanovllm::GgufFile::parse(buf.data(), buf.size(), "fuzz.gguf");
    for (const auto& [key, v] : f->metadata()) {
      try {
        f->get_int(key);
      } catch (const nanovllm::Error&) {
      }
      try {
        f->get_float_array(key);
      } catch (const nanovllm::Error&) {
      }
      try {
        f->get_string_array(key);
      } catch (const nanovllm::Error&) {
      }
    }
    std::vector<float> row;
    for (const auto& t : f->tensors()) {
      const nanovllm::GgmlTypeInfo info = nanovllm::ggml_type_info(t.type);
      if (!info.dequantizable || t.ne[0] > (1 << 16)) continue;
      row.resize(size_t(t.ne[0]));
      const size_t row_bytes = size_t(t.ne[0] / info.block_size) * size_t(info.type_size);
      for (int64_t r = 0; r < t.rows() && r < 4; ++r)
        nanovllm::dequantize_row(nanovllm::GgmlType(t.type), t.data + size_t(r) * row_bytes,
                                 row.data(), t.ne[0]);
    }
  } catch (const nanovllm::Error&) {
  }
  return 0;
}
