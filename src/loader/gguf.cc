// GGUF parsing: a bounds-checked cursor over the mapping. Every length, count and offset read
// from the file is checked against what is left before it is used, so a corrupt file fails
// with a message and never reads outside the buffer or allocates from an unchecked size.
#include "loader/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "loader/gguf_quants.h"
#include "util/check.h"

namespace nanovllm {

namespace {

constexpr int kMaxArrayDepth = 8;
constexpr int kMaxDims = 4;  // GGML_MAX_DIMS

// Little-endian reads through a cursor that knows the end of the buffer.
struct Cursor {
  const uint8_t* p;
  const uint8_t* end;
  const std::string& where;
  size_t left() const { return size_t(end - p); }
  size_t pos(const uint8_t* base) const { return size_t(p - base); }
  void need(size_t n, const char* what, const std::string& ctx) const {
    if (n > left())
      NV_THROW("GGUF file '", where, "' is truncated: ", what, ctx.empty() ? "" : " of ", ctx,
               " needs ", n, " bytes, ", left(), " left");
  }
  template <class T>
  T read(const char* what, const std::string& ctx) {
    need(sizeof(T), what, ctx);
    T v;
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  std::string_view string(const char* what, const std::string& ctx) {
    uint64_t n = read<uint64_t>(what, ctx);
    need(n, what, ctx);
    std::string_view s(reinterpret_cast<const char*>(p), size_t(n));
    p += n;
    return s;
  }
};

// Smallest encoding of one value of type t (bounds array counts before allocating).
size_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::STRING: case GgufValueType::U64: case GgufValueType::I64:
    case GgufValueType::F64: return 8;
    case GgufValueType::ARRAY: return 12;
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= uint32_t(GgufValueType::F64); }

void read_value(Cursor& c, GgufValueType t, GgufValue& v, const std::string& key, int depth) {
  v.type = t;
  switch (t) {
    case GgufValueType::U8: v.u = c.read<uint8_t>("value", key); v.i = int64_t(v.u); break;
    case GgufValueType::I8: v.i = c.read<int8_t>("value", key); v.u = uint64_t(v.i); break;
    case GgufValueType::U16: v.u = c.read<uint16_t>("value", key); v.i = int64_t(v.u); break;
    case GgufValueType::I16: v.i = c.read<int16_t>("value", key); v.u = uint64_t(v.i); break;
    case GgufValueType::U32: v.u = c.read<uint32_t>("value", key); v.i = int64_t(v.u); break;
    case GgufValueType::I32: v.i = c.read<int32_t>("value", key); v.u = uint64_t(v.i); break;
    case GgufValueType::U64: v.u = c.read<uint64_t>("value", key); v.i = int64_t(v.u); break;
    case GgufValueType::I64: v.i = c.read<int64_t>("value", key); v.u = uint64_t(v.i); break;
    case GgufValueType::F32: v.f = c.read<float>("value", key); break;
    case GgufValueType::F64: v.f = c.read<double>("value", key); break;
    case GgufValueType::BOOL: {
      uint8_t b = c.read<uint8_t>("value", key);
      if (b > 1) NV_THROW("GGUF file '", c.where, "': key '", key, "' has bool value ", int(b));
      v.b = b != 0;
      break;
    }
    case GgufValueType::STRING: v.str = c.string("string value", key); break;
    case GgufValueType::ARRAY: {
      if (depth >= kMaxArrayDepth)
        NV_THROW("GGUF file '", c.where, "': key '", key, "' nests arrays deeper than ",
                 kMaxArrayDepth);
      uint32_t et = c.read<uint32_t>("array type", key);
      if (!valid_value_type(et))
        NV_THROW("GGUF file '", c.where, "': key '", key, "' has unknown array element type ", et);
      v.elem_type = GgufValueType(et);
      uint64_t n = c.read<uint64_t>("array length", key);
      // Each element takes at least min_value_bytes: a count beyond that is a corrupt file
      // (checked before reserving memory for it).
      if (n > c.left() / min_value_bytes(v.elem_type))
        NV_THROW("GGUF file '", c.where, "': key '", key, "' claims ", n,
                 " array elements but only ", c.left(), " bytes are left");
      v.count = n;
      if (v.elem_type == GgufValueType::STRING) {
        v.strs.resize(size_t(n));
        for (auto& e : v.strs) e = c.string("string array element", key);
      } else if (v.elem_type == GgufValueType::ARRAY) {
        v.items.resize(size_t(n));
        for (auto& e : v.items) read_value(c, v.elem_type, e, key, depth + 1);
      } else {
        const size_t sz = min_value_bytes(v.elem_type);  // scalars: exactly this size
        v.raw = c.p;
        c.p += n * sz;  // n * sz <= left, checked above
        if (v.elem_type == GgufValueType::BOOL)
          for (uint64_t e = 0; e < n; ++e)
            if (v.raw[e] > 1)
              NV_THROW("GGUF file '", c.where, "': key '", key, "' has bool value ", int(v.raw[e]));
      }
      break;
    }
  }
}

std::string shape_text(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

bool GgufValue::is_int() const {
  switch (type) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::U16:
    case GgufValueType::I16: case GgufValueType::U32: case GgufValueType::I32:
    case GgufValueType::U64: case GgufValueType::I64: return true;
    default: return false;
  }
}

GgufValue GgufValue::element(uint64_t idx) const {
  NV_CHECK(type == GgufValueType::ARRAY && raw && idx < count, "GGUF array element ", idx,
           " out of range");
  const std::string where = "array";
  const size_t sz = min_value_bytes(elem_type);
  Cursor c{raw + idx * sz, raw + (idx + 1) * sz, where};
  GgufValue v;
  read_value(c, elem_type, v, "", 0);
  return v;
}

const char* gguf_value_type_name(GgufValueType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) <= 12 ? names[uint32_t(t)] : "unknown";
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // bounded at parse time
  return n;
}

struct GgufParser {
  static void parse(GgufFile& f, const uint8_t* base, size_t size);
};

void GgufParser::parse(GgufFile& f, const uint8_t* base, size_t size) {
  const std::string& where = f.path_;
  Cursor c{base, base + size, where};
  c.need(4, "magic", "");
  if (std::memcmp(base, "GGUF", 4) != 0)
    NV_THROW("'", where, "' is not a GGUF file (bad magic; expected \"GGUF\")");
  c.p += 4;
  f.version_ = c.read<uint32_t>("version", "");
  if (f.version_ != 2 && f.version_ != 3)
    NV_THROW("GGUF file '", where, "' has version ", f.version_, "; versions 2 and 3 are supported");
  const uint64_t n_tensors = c.read<uint64_t>("tensor count", "");
  const uint64_t n_kv = c.read<uint64_t>("metadata count", "");
  // A key/value takes >= 8 + 4 + 1 bytes, a tensor info >= 8 + 4 + 8 + 4 + 8.
  if (n_kv > c.left() / 13)
    NV_THROW("GGUF file '", where, "' claims ", n_kv, " metadata entries, more than fit in the file");
  if (n_tensors > c.left() / 32)
    NV_THROW("GGUF file '", where, "' claims ", n_tensors, " tensors, more than fit in the file");

  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key(c.string("metadata key", "entry " + std::to_string(k)));
    uint32_t t = c.read<uint32_t>("value type", key);
    if (!valid_value_type(t)) NV_THROW("GGUF file '", where, "': key '", key, "' has unknown value type ", t);
    GgufValue v;
    read_value(c, GgufValueType(t), v, key, 0);
    if (!f.kv_.emplace(key, std::move(v)).second)
      NV_THROW("GGUF file '", where, "': duplicate metadata key '", key, "'");
  }
  if (const GgufValue* a = f.find("general.alignment")) {
    if (!a->is_int() || a->u == 0 || a->u > (1u << 20) || (a->u & (a->u - 1)) != 0)
      NV_THROW("GGUF file '", where, "': general.alignment must be a power of two up to 1 MiB");
    f.alignment_ = a->u;
  }

  f.tensors_.resize(size_t(n_tensors));
  for (uint64_t ti = 0; ti < n_tensors; ++ti) {
    GgufTensor& t = f.tensors_[ti];
    t.name = std::string(c.string("tensor name", "tensor " + std::to_string(ti)));
    uint32_t nd = c.read<uint32_t>("dimension count", t.name);
    if (nd == 0 || nd > kMaxDims)
      NV_THROW("GGUF file '", where, "': tensor '", t.name, "' has ", nd, " dimensions (1 to ",
               kMaxDims, " allowed)");
    t.ne.resize(nd);
    for (auto& d : t.ne) {
      uint64_t v = c.read<uint64_t>("dimension", t.name);
      if (v == 0 || v > uint64_t(std::numeric_limits<int64_t>::max()))
        NV_THROW("GGUF file '", where, "': tensor '", t.name, "' has dimension ", v);
      d = int64_t(v);
    }
    t.type = c.read<uint32_t>("tensor type", t.name);
    t.offset = c.read<uint64_t>("tensor offset", t.name);
    const GgmlTypeInfo info = ggml_type_info(t.type);
    if (!info.name)
      NV_THROW("GGUF file '", where, "': tensor '", t.name, "' has unknown ggml type ", t.type);
    if (t.ne[0] % info.block_size != 0)
      NV_THROW("GGUF file '", where, "': tensor '", t.name, "' (", info.name, ") has rows of ",
               t.ne[0], " elements, not a multiple of the block size ", info.block_size);
    // nbytes = ne0 / block * type_size * ne1 * ne2 * ne3, refusing anything past 2^62.
    unsigned __int128 nb = (unsigned __int128)(t.ne[0] / info.block_size) * info.type_size;
    for (size_t d = 1; d < t.ne.size(); ++d) {
      nb *= (unsigned __int128)t.ne[d];
      if (nb > (unsigned __int128)(1ull << 62)) break;
    }
    unsigned __int128 numel = 1;
    for (int64_t d : t.ne) {
      numel *= (unsigned __int128)d;
      if (numel > (unsigned __int128)(1ull << 62)) break;
    }
    if (nb > (unsigned __int128)(1ull << 62) || numel > (unsigned __int128)(1ull << 62))
      NV_THROW("GGUF file '", where, "': tensor '", t.name, "' shape ", shape_text(t.ne),
               " is too large");
    t.nbytes = uint64_t(nb);
    if (t.offset % f.alignment_ != 0)
      NV_THROW("GGUF file '", where, "': tensor '", t.name, "' offset ", t.offset,
               " is not a multiple of the alignment ", f.alignment_);
    if (!f.tensor_index_.emplace(t.name, size_t(ti)).second)
      NV_THROW("GGUF file '", where, "': duplicate tensor '", t.name, "'");
  }

  // The data section starts at the next multiple of the alignment.
  size_t header_end = c.pos(base);
  size_t data_start = (header_end + f.alignment_ - 1) / f.alignment_ * f.alignment_;
  if (n_tensors > 0 && data_start > size)
    NV_THROW("GGUF file '", where, "' is truncated: the data section would start at byte ",
             data_start, " of ", size);
  const size_t data_size = n_tensors > 0 ? size - data_start : 0;
  for (auto& t : f.tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      NV_THROW("GGUF file '", where, "': tensor '", t.name, "' (", ggml_type_name(t.type), " ",
               shape_text(t.ne), ", ", t.nbytes, " bytes at offset ", t.offset,
               ") extends past the end of the file (data section of ", data_size, " bytes)");
    t.data = base + data_start + t.offset;
  }
}

std::shared_ptr<GgufFile> GgufFile::parse(const uint8_t* buf, size_t size, const std::string& where) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = where;
  f->owned_.assign(buf, buf + size);
  GgufParser::parse(*f, f->owned_.data(), f->owned_.size());
  return f;
}

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  FdGuard g{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (g.fd < 0) NV_THROW("cannot open GGUF file '", path, "': ", std::strerror(errno));
  struct stat st;
  if (::fstat(g.fd, &st) != 0) NV_THROW("cannot stat GGUF file '", path, "': ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) NV_THROW("GGUF path '", path, "' is not a regular file");
  const size_t size = size_t(st.st_size);
  if (size < 24) NV_THROW("GGUF file '", path, "' is truncated: ", size, " bytes, shorter than the header");
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, g.fd, 0);
  if (m == MAP_FAILED) NV_THROW("cannot mmap GGUF file '", path, "': ", std::strerror(errno));
  f->map_ = m;  // unmapped by the destructor, also when parsing throws
  f->map_size_ = size;
  GgufParser::parse(*f, static_cast<const uint8_t*>(m), size);
  return f;
}

GgufFile::~GgufFile() {
  if (map_) ::munmap(map_, map_size_);
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufValue& GgufFile::require(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) NV_THROW("GGUF file '", path_, "' lacks the metadata key '", key, "'");
  return *v;
}

namespace {
[[noreturn]] void wrong_type(const std::string& where, const std::string& key, const GgufValue& v,
                             const char* want) {
  NV_THROW("GGUF file '", where, "': key '", key, "' is ", gguf_value_type_name(v.type),
           v.type == GgufValueType::ARRAY ? std::string(" of ") + gguf_value_type_name(v.elem_type) : "",
           ", expected ", want);
}
int64_t as_int(const std::string& where, const std::string& key, const GgufValue& v) {
  if (!v.is_int()) wrong_type(where, key, v, "an integer");
  if (v.type == GgufValueType::U64 && v.u > uint64_t(std::numeric_limits<int64_t>::max()))
    NV_THROW("GGUF file '", where, "': key '", key, "' value ", v.u, " is out of range");
  return v.i;
}
double as_float(const std::string& where, const std::string& key, const GgufValue& v) {
  if (v.is_float()) return v.f;
  if (v.is_int()) return double(v.i);
  wrong_type(where, key, v, "a number");
}
}  // namespace

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = &require(key);
  return as_int(path_, key, *v);
}
int64_t GgufFile::get_int(const std::string& key, int64_t dflt) const {
  const GgufValue* v = find(key);
  return v ? as_int(path_, key, *v) : dflt;
}
double GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = &require(key);
  return as_float(path_, key, *v);
}
double GgufFile::get_float(const std::string& key, double dflt) const {
  const GgufValue* v = find(key);
  return v ? as_float(path_, key, *v) : dflt;
}
bool GgufFile::get_bool(const std::string& key, bool dflt) const {
  const GgufValue* v = find(key);
  if (!v) return dflt;
  if (v->type != GgufValueType::BOOL) wrong_type(path_, key, *v, "a bool");
  return v->b;
}
std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = &require(key);
  if (v->type != GgufValueType::STRING) wrong_type(path_, key, *v, "a string");
  return std::string(v->str);
}
std::string GgufFile::get_string(const std::string& key, const std::string& dflt) const {
  return has(key) ? get_string(key) : dflt;
}
std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue* v = &require(key);
  if (v->type != GgufValueType::ARRAY || v->elem_type != GgufValueType::STRING)
    wrong_type(path_, key, *v, "an array of strings");
  return std::vector<std::string>(v->strs.begin(), v->strs.end());
}
std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue* v = &require(key);
  if (v->type != GgufValueType::ARRAY || !v->raw) wrong_type(path_, key, *v, "an array of integers");
  std::vector<int64_t> out;
  out.reserve(size_t(v->count));
  for (uint64_t e = 0; e < v->count; ++e) out.push_back(as_int(path_, key, v->element(e)));
  return out;
}
std::vector<double> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue* v = &require(key);
  if (v->type != GgufValueType::ARRAY || !v->raw) wrong_type(path_, key, *v, "an array of numbers");
  std::vector<double> out;
  out.reserve(size_t(v->count));
  for (uint64_t e = 0; e < v->count; ++e) out.push_back(as_float(path_, key, v->element(e)));
  return out;
}

}  // namespace nanovllm
