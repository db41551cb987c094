// One memory-mapped GGUF file (llama.cpp's model format, versions 2 and 3): the metadata
// key/values and the tensor directory, validated at open(). Tensor data stays in the mapping;
// gguf_quants.h turns a tensor's blocks into floats.
//
// Layout (little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv, then n_kv of
//   [string key][u32 value type][value]      string = u64 length + bytes (no NUL)
// then n_tensors of
//   [string name][u32 n_dims][u64 ne[n_dims]][u32 ggml type][u64 offset]
// and, at the next multiple of general.alignment (default 32), the data section; a tensor's
// offset is relative to it. ne[0] is the innermost (contiguous) dimension, so a linear weight
// [out, in] in Hugging Face terms has ne = {in, out}.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm {

enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8,
  ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);

// A metadata value. Scalars: integers in i (signed) or u (unsigned), floats in f, bools in b;
// strings point into the mapping. Arrays: `count` elements of elem_type; scalar elements stay
// in the mapping (raw, read with element()), strings are views (strs), nested arrays are
// values (items) - so a hostile file cannot make the parser allocate much more than its size.
struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  bool b = false;
  std::string_view str;
  GgufValueType elem_type = GgufValueType::U8;  // arrays
  uint64_t count = 0;                           // arrays: number of elements
  const uint8_t* raw = nullptr;                 // arrays of scalars
  std::vector<std::string_view> strs;           // arrays of strings
  std::vector<GgufValue> items;                 // arrays of arrays
  bool is_int() const;
  // Element i of an array of scalars, as a scalar value.
  GgufValue element(uint64_t i) const;
  bool is_float() const { return type == GgufValueType::F32 || type == GgufValueType::F64; }
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] innermost
  uint32_t type = 0;        // ggml type id (gguf_quants.h)
  uint64_t offset = 0;      // from the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // into the mapping
  int64_t numel() const;
  int64_t rows() const { return ne.empty() ? 1 : numel() / ne[0]; }  // rows of ne[0] elements
};

class GgufFile {
 public:
  // Throws nanovllm::Error naming the file (and key or tensor) for: unreadable or truncated
  // file, bad magic, unsupported version, value types out of range, strings or arrays past the
  // end, arrays nested deeper than 8, duplicate keys or tensor names, unknown tensor types,
  // dimensions <= 0 or more than 4, sizes that overflow, rows not a multiple of the block size,
  // offsets misaligned or past the end of the file. Nothing is read outside the file.
  static std::shared_ptr<GgufFile> open(const std::string& path);
  // The same checks over a copy of a buffer (tests, the fuzzer).
  static std::shared_ptr<GgufFile> parse(const uint8_t* buf, size_t size, const std::string& where);
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;

  // Typed metadata access. The getters throw naming the file and key when the key is missing
  // or has another type (integer getters accept every integer type whose value fits).
  bool has(const std::string& key) const { return kv_.count(key) > 0; }
  const GgufValue* find(const std::string& key) const;
  const GgufValue& require(const std::string& key) const;  // throws naming the file and key
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t dflt) const;
  double get_float(const std::string& key) const;  // integer values are accepted too
  double get_float(const std::string& key, double dflt) const;
  bool get_bool(const std::string& key, bool dflt) const;
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& dflt) const;
  // Arrays, checked element by element.
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;
  std::vector<double> get_float_array(const std::string& key) const;

 private:
  GgufFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::vector<uint8_t> owned_;  // parse(): the copy the tensors and strings point into
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  friend struct GgufParser;
};

}  // namespace nanovllm
