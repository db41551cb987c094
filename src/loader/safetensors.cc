// Reading one safetensors file through a read-only private mapping.
//
// Layout: [u64 little-endian N][N bytes of JSON header][data]. Each header entry is
//   "name": {"dtype": "BF16", "shape": [a, b], "data_offsets": [begin, end]}
// with offsets relative to the start of the data section, plus an optional "__metadata__"
// object of string -> string. Every check below runs before any tensor is handed out, so a
// broken file fails at open() with a message naming the file (and the tensor when relevant).
#include "loader/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "util/check.h"
#include "util/json_bounded.h"

namespace nanovllm {

namespace {

// Only the dtypes the engine computes with; anything else is rejected at open time so a
// model with e.g. F8 weights fails up front, not in the middle of loading.
bool parse_st_dtype(const std::string& s, DType* out) {
  if (s == "F32") *out = DType::F32;
  else if (s == "BF16") *out = DType::BF16;
  else if (s == "F16") *out = DType::F16;
  else if (s == "I32") *out = DType::I32;
  else if (s == "I64") *out = DType::I64;
  else return false;
  return true;
}

// Closes the fd on every exit path of open().
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

// Friend of SafetensorsFile: builds the object (private constructor) and fills it.
struct SafetensorsOpener {
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  static void parse_header(SafetensorsFile& f, const char* header, size_t header_len,
                           size_t data_size, size_t data_start);
};

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  return SafetensorsOpener::open(path);
}

std::shared_ptr<SafetensorsFile> SafetensorsOpener::open(const std::string& path) {
  FdGuard g{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (g.fd < 0) NV_THROW("cannot open safetensors file '", path, "': ", std::strerror(errno));
  struct stat st;
  if (::fstat(g.fd, &st) != 0)
    NV_THROW("cannot stat safetensors file '", path, "': ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) NV_THROW("safetensors path '", path, "' is not a regular file");
  size_t size = size_t(st.st_size);
  if (size < 8)
    NV_THROW("safetensors file '", path, "' is truncated: ", size,
             " bytes, shorter than the 8-byte header length");

  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->self_ = f;
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, g.fd, 0);
  if (m == MAP_FAILED) NV_THROW("cannot mmap safetensors file '", path, "': ", std::strerror(errno));
  // From here the destructor unmaps, also when parsing throws.
  f->map_ = m;
  f->map_size_ = size;

  const unsigned char* b = static_cast<const unsigned char*>(m);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | b[i];  // little-endian regardless of host
  if (n > size - 8)
    NV_THROW("safetensors file '", path, "' is corrupt or truncated: header length ", n,
             " goes beyond the file (", size, " bytes)");
  parse_header(*f, reinterpret_cast<const char*>(b + 8), size_t(n), size - 8 - size_t(n),
               8 + size_t(n));
  return f;
}

void SafetensorsOpener::parse_header(SafetensorsFile& f, const char* header, size_t header_len,
                                     size_t data_size, size_t data_start) {
  const std::string& path = f.path_;
  const nlohmann::json j =
      parse_json(std::string_view(header, header_len), "safetensors file '" + path + "' header");
  if (!j.is_object())
    NV_THROW("safetensors file '", path, "' has a malformed header: not a JSON object");

  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object())
        NV_THROW("safetensors file '", path, "': __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          NV_THROW("safetensors file '", path, "': __metadata__ value for '", m.key(),
                   "' is not a string");
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& why) {
      NV_THROW("safetensors file '", path, "': malformed entry for tensor '", name, "': ", why);
    };
    if (!v.is_object()) bad("not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) bad("missing string 'dtype'");
    if (!v.contains("shape") || !v["shape"].is_array()) bad("missing array 'shape'");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      bad("missing 'data_offsets' [begin, end]");

    TensorInfo info;
    std::string ds = v["dtype"].get<std::string>();
    if (!parse_st_dtype(ds, &info.dtype))
      NV_THROW("unknown dtype '", ds, "' for tensor '", name, "' in file '", path,
               "' (supported: F32, BF16, F16, I32, I64)");
    // numel with overflow checks: the header is untrusted input.
    uint64_t numel = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) bad("shape entries must be non-negative integers");
      uint64_t dim = d.get<uint64_t>();
      if (dim > uint64_t(std::numeric_limits<int64_t>::max())) bad("dimension too large");
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim) bad("shape overflows");
      numel *= dim;
      info.shape.push_back(int64_t(dim));
    }
    const auto& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      bad("data_offsets must be non-negative integers");
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size)
      NV_THROW("safetensors file '", path, "': data_offsets [", begin, ", ", end,
               "] of tensor '", name, "' are outside the data section (", data_size,
               " bytes); the file may be truncated");
    uint64_t esz = dtype_size(info.dtype);
    if (numel > std::numeric_limits<uint64_t>::max() / esz || end - begin != numel * esz)
      NV_THROW("safetensors file '", path, "': tensor '", name, "' ", ds,
               shape_str(info.shape), " needs ", numel * esz, " bytes but data_offsets [",
               begin, ", ", end, "] span ", end - begin);
    info.offset = data_start + size_t(begin);
    info.nbytes = size_t(end - begin);
    f.tensors_[name] = std::move(info);
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

Tensor SafetensorsFile::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) NV_THROW("missing tensor '", name, "' in file '", path_, "'");
  const TensorInfo& info = it->second;
  // The owner keeps the whole file (and so the mapping) alive while the tensor exists. The
  // mapping is PROT_READ: writing through the returned pointer faults; copy first.
  std::shared_ptr<void> owner = self_.lock();
  char* p = static_cast<char*>(map_) + info.offset;
  if (reinterpret_cast<uintptr_t>(p) % dtype_size(info.dtype) != 0) {
    // Files whose header length is not padded leave data misaligned for its type; kernels
    // assume natural alignment, so hand out an aligned heap copy instead.
    Tensor t = Tensor::empty(info.shape, info.dtype);
    if (info.nbytes) std::memcpy(t.raw(), p, info.nbytes);
    return t;
  }
  return Tensor::wrap(p, info.shape, info.dtype, Device::CPU, std::move(owner));
}

}  // namespace nanovllm
