// GGUF parser and dequantization: files built byte by byte here, every corruption the parser
// must refuse, and hand-worked blocks of each block format.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "loader/gguf.h"
#include "loader/gguf_quants.h"
#include "util/check.h"
#include "util/dtype.h"

namespace nanovllm {
namespace {

// Little-endian GGUF writer for tests.
struct Bytes {
  std::vector<uint8_t> b;
  template <class T>
  Bytes& put(T v) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  void pad(size_t a) {
    while (b.size() % a) b.push_back(0);
  }
};

uint16_t f16(float f) { return f32_to_f16(f); }

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type;
  std::vector<uint8_t> data;
};

// header + kv (given as raw bytes, n_kv entries) + tensors, data aligned to 32.
std::vector<uint8_t> make_file(const Bytes& kv, uint64_t n_kv, const std::vector<TensorSpec>& ts,
                               uint32_t version = 3) {
  Bytes f;
  f.b = {'G', 'G', 'U', 'F'};
  f.put<uint32_t>(version).put<uint64_t>(ts.size()).put<uint64_t>(n_kv);
  f.b.insert(f.b.end(), kv.b.begin(), kv.b.end());
  uint64_t off = 0;
  for (const auto& t : ts) {
    f.str(t.name).put<uint32_t>(uint32_t(t.ne.size()));
    for (uint64_t d : t.ne) f.put<uint64_t>(d);
    f.put<uint32_t>(t.type).put<uint64_t>(off);
    off += (t.data.size() + 31) / 32 * 32;
  }
  f.pad(32);
  for (const auto& t : ts) {
    f.b.insert(f.b.end(), t.data.begin(), t.data.end());
    f.pad(32);
  }
  return f.b;
}

std::shared_ptr<GgufFile> parse(const std::vector<uint8_t>& b) {
  return GgufFile::parse(b.data(), b.size(), "test.gguf");
}

std::string parse_error(const std::vector<uint8_t>& b) {
  try {
    parse(b);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<uint8_t> f32_data(std::vector<float> v) {
  std::vector<uint8_t> d(v.size() * 4);
  std::memcpy(d.data(), v.data(), d.size());
  return d;
}

Bytes sample_kv() {
  Bytes kv;
  kv.str("general.architecture").put<uint32_t>(8).str("qwen3");
  kv.str("a.u8").put<uint32_t>(0).put<uint8_t>(200);
  kv.str("a.i32").put<uint32_t>(5).put<int32_t>(-7);
  kv.str("a.f32").put<uint32_t>(6).put<float>(0.25f);
  kv.str("a.bool").put<uint32_t>(7).put<uint8_t>(1);
  kv.str("a.u64").put<uint32_t>(10).put<uint64_t>(1ull << 40);
  kv.str("a.f64").put<uint32_t>(12).put<double>(1e-6);
  kv.str("a.strs").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2).str("x").str("yz");
  kv.str("a.ints").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(3).put<uint32_t>(1).put<uint32_t>(2).put<uint32_t>(3);
  // an array of two arrays of i16
  kv.str("a.nested").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(2);
  kv.put<uint32_t>(3).put<uint64_t>(1).put<int16_t>(-1);
  kv.put<uint32_t>(3).put<uint64_t>(2).put<int16_t>(5).put<int16_t>(6);
  return kv;
}
constexpr uint64_t kSampleKv = 10;

std::vector<TensorSpec> sample_tensors() {
  return {{"w", {2, 3}, 0, f32_data({1, 2, 3, 4, 5, 6})}, {"v", {4}, 0, f32_data({7, 8, 9, 10})}};
}

TEST(Gguf, ParsesMetadataAndTensors) {
  auto f = parse(make_file(sample_kv(), kSampleKv, sample_tensors()));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture"), "qwen3");
  EXPECT_EQ(f->get_int("a.u8"), 200);
  EXPECT_EQ(f->get_int("a.i32"), -7);
  EXPECT_DOUBLE_EQ(f->get_float("a.f32"), 0.25);
  EXPECT_DOUBLE_EQ(f->get_float("a.i32"), -7.0);  // integers read as numbers
  EXPECT_TRUE(f->get_bool("a.bool", false));
  EXPECT_EQ(f->get_int("a.u64"), int64_t(1) << 40);
  EXPECT_DOUBLE_EQ(f->get_float("a.f64"), 1e-6);
  EXPECT_EQ(f->get_string_array("a.strs"), (std::vector<std::string>{"x", "yz"}));
  EXPECT_EQ(f->get_int_array("a.ints"), (std::vector<int64_t>{1, 2, 3}));
  const GgufValue* n = f->find("a.nested");
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->items.size(), 2u);
  EXPECT_EQ(n->items[1].element(1).i, 6);
  EXPECT_EQ(f->get_int("missing", 42), 42);
  ASSERT_EQ(f->tensors().size(), 2u);
  const GgufTensor* w = f->find_tensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->ne, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w->nbytes, 24u);
  float v[6];
  std::memcpy(v, w->data, 24);
  EXPECT_EQ(v[5], 6.f);
  float r[4];
  const GgufTensor* vt = f->find_tensor("v");
  dequantize_row(GgmlType::F32, vt->data, r, 4);
  EXPECT_EQ(r[3], 10.f);
}

TEST(Gguf, TypedGettersNameTheKey) {
  auto f = parse(make_file(sample_kv(), kSampleKv, {}));
  auto msg = [&](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(msg([&] { f->get_int("general.architecture"); }).find("key 'general.architecture' is string, expected an integer"), std::string::npos);
  EXPECT_NE(msg([&] { f->get_string("nope"); }).find("lacks the metadata key 'nope'"), std::string::npos);
  EXPECT_NE(msg([&] { f->get_string_array("a.ints"); }).find("array of u32, expected an array of strings"), std::string::npos);
  EXPECT_NE(msg([&] { f->get_bool("a.u8", false); }).find("expected a bool"), std::string::npos);
}

TEST(Gguf, EveryTruncationIsAnError) {
  const std::vector<uint8_t> full = make_file(sample_kv(), kSampleKv, sample_tensors());
  parse(full);  // the whole file is fine
  for (size_t n = 0; n < full.size() - 1; ++n) {
    // Cut inside the padding after the last tensor's data is still a complete file
    // (the last tensor ends at 24 + 16 bytes into the data section).
    std::vector<uint8_t> cut(full.begin(), full.begin() + n);
    std::string e = parse_error(cut);
    if (e == "(no error)") {
      // only acceptable once all tensor bytes are present
      EXPECT_GE(n, full.size() - 32 + 16) << "prefix of " << n << " bytes parsed";
    } else {
      EXPECT_NE(e.find("test.gguf"), std::string::npos) << e;
    }
  }
}

TEST(Gguf, RefusesCorruptHeaders) {
  auto corrupt = [&](size_t at, std::vector<uint8_t> bytes) {
    std::vector<uint8_t> f = make_file(sample_kv(), kSampleKv, sample_tensors());
    std::memcpy(f.data() + at, bytes.data(), bytes.size());
    return parse_error(f);
  };
  EXPECT_NE(corrupt(0, {'G', 'G', 'M', 'L'}).find("bad magic"), std::string::npos);
  EXPECT_NE(corrupt(4, {1, 0, 0, 0}).find("version 1"), std::string::npos);
  EXPECT_NE(corrupt(8, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}).find("tensors, more than fit"), std::string::npos);
  EXPECT_NE(corrupt(16, {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}).find("metadata entries, more than fit"), std::string::npos);
  // the first key's length
  EXPECT_NE(corrupt(24, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}).find("truncated"), std::string::npos);
}

TEST(Gguf, RefusesBadValues) {
  auto one = [&](const Bytes& kv) { return parse_error(make_file(kv, 1, {})); };
  Bytes t;
  t.str("k").put<uint32_t>(13).put<uint8_t>(0);
  EXPECT_NE(one(t).find("unknown value type 13"), std::string::npos);
  Bytes b;
  b.str("k").put<uint32_t>(7).put<uint8_t>(2);
  EXPECT_NE(one(b).find("bool value 2"), std::string::npos);
  Bytes big;  // 2^60 u32 elements
  big.str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(1ull << 60);
  EXPECT_NE(one(big).find("array elements but only"), std::string::npos);
  Bytes et;
  et.str("k").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0);
  EXPECT_NE(one(et).find("unknown array element type 77"), std::string::npos);
  Bytes deep;  // arrays nested 9 deep
  deep.str("k").put<uint32_t>(9);
  for (int i = 0; i < 9; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  deep.put<uint32_t>(0).put<uint64_t>(0);
  EXPECT_NE(one(deep).find("nests arrays deeper than 8"), std::string::npos);
  Bytes dup;
  dup.str("k").put<uint32_t>(0).put<uint8_t>(1).str("k").put<uint32_t>(0).put<uint8_t>(2);
  EXPECT_NE(parse_error(make_file(dup, 2, {})).find("duplicate metadata key 'k'"), std::string::npos);
  Bytes al;
  al.str("general.alignment").put<uint32_t>(4).put<uint32_t>(48);
  EXPECT_NE(one(al).find("power of two"), std::string::npos);
}

TEST(Gguf, RefusesBadTensors) {
  Bytes none;
  auto err = [&](std::vector<TensorSpec> ts) { return parse_error(make_file(none, 0, ts)); };
  EXPECT_NE(err({{"t", {4}, 99, f32_data({1, 2, 3, 4})}}).find("tensor 't' has unknown ggml type 99"), std::string::npos);
  EXPECT_NE(err({{"t", {16}, 8, std::vector<uint8_t>(34)}}).find("not a multiple of the block size 32"), std::string::npos);
  EXPECT_NE(err({{"t", {0}, 0, {}}}).find("dimension 0"), std::string::npos);
  EXPECT_NE(err({{"t", {1, 1, 1, 1, 1}, 0, f32_data({1})}}).find("5 dimensions"), std::string::npos);
  EXPECT_NE(err({{"t", {1ull << 40, 1ull << 40}, 0, {}}}).find("too large"), std::string::npos);
  EXPECT_NE(err({{"t", {64}, 0, f32_data({1, 2})}}).find("extends past the end"), std::string::npos);
  EXPECT_NE(err({{"t", {1}, 0, f32_data({1})}, {"t", {1}, 0, f32_data({1})}}).find("duplicate tensor 't'"), std::string::npos);
  // misaligned offset: patch the tensor offset (last 8 bytes of its info) to 4
  std::vector<uint8_t> f = make_file(none, 0, {{"t", {1}, 0, f32_data({1})}});
  const size_t off_at = 24 + 8 + 1 + 4 + 8 + 4;
  f[off_at] = 4;
  EXPECT_NE(parse_error(f).find("not a multiple of the alignment 32"), std::string::npos);
}

// ---- dequantization: one hand-built block per format, expected values worked out here ----

std::vector<float> deq(GgmlType t, const std::vector<uint8_t>& blk, int n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t, blk.data(), out.data(), n);
  return out;
}
void put16(std::vector<uint8_t>& b, size_t at, uint16_t v) { std::memcpy(&b[at], &v, 2); }

TEST(GgufQuants, Q4_0AndQ4_1AndQ8_0) {
  std::vector<uint8_t> b(18, 0);
  put16(b, 0, f16(0.5f));
  for (int j = 0; j < 16; ++j) b[2 + j] = uint8_t(j | ((15 - j) << 4));
  auto y = deq(GgmlType::Q4_0, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * float(j - 8));
    EXPECT_EQ(y[j + 16], 0.5f * float(7 - j));
  }
  std::vector<uint8_t> b1(20, 0);
  put16(b1, 0, f16(0.25f));
  put16(b1, 2, f16(-1.f));
  for (int j = 0; j < 16; ++j) b1[4 + j] = uint8_t(j | (3 << 4));
  auto y1 = deq(GgmlType::Q4_1, b1, 32);
  EXPECT_EQ(y1[5], 0.25f * 5 - 1.f);
  EXPECT_EQ(y1[20], 0.25f * 3 - 1.f);
  std::vector<uint8_t> b8(34, 0);
  put16(b8, 0, f16(2.f));
  for (int j = 0; j < 32; ++j) b8[2 + j] = uint8_t(int8_t(j - 16));
  auto y8 = deq(GgmlType::Q8_0, b8, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y8[j], 2.f * float(j - 16));
}

TEST(GgufQuants, Q5_0HighBits) {
  std::vector<uint8_t> b(22, 0);
  put16(b, 0, f16(1.f));
  const uint32_t qh = (1u << 3) | (1u << (16 + 5));  // element 3 and element 16 + 5 get bit 4
  std::memcpy(&b[2], &qh, 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = 0x11;  // low nibbles 1 everywhere
  auto y = deq(GgmlType::Q5_0, b, 32);
  EXPECT_EQ(y[0], 1.f - 16.f);
  EXPECT_EQ(y[3], 17.f - 16.f);
  EXPECT_EQ(y[21], 17.f - 16.f);
  EXPECT_EQ(y[20], 1.f - 16.f);
}

TEST(GgufQuants, Q4_KSubBlockScales) {
  // d = 1, dmin = 0.5; sub-block j: scale j + 1, min j (6-bit packing), all q = 2.
  std::vector<uint8_t> b(144, 0);
  put16(b, 0, f16(1.f));
  put16(b, 2, f16(0.5f));
  uint8_t* sc = &b[4];
  for (int j = 0; j < 8; ++j) {
    const int s = j + 1 + (j >= 4 ? 40 : 0), m = j + (j >= 4 ? 20 : 0);  // some >= 16 use the high bits
    if (j < 4) {
      sc[j] = uint8_t(s);
      sc[j + 4] = uint8_t(m);
    } else {
      sc[j + 4] = uint8_t((s & 0xF) | ((m & 0xF) << 4));
      sc[j - 4] |= uint8_t((s >> 4) << 6);
      sc[j] |= uint8_t((m >> 4) << 6);
    }
  }
  for (int i = 0; i < 128; ++i) b[16 + i] = 0x22;
  auto y = deq(GgmlType::Q4_K, b, 256);
  for (int j = 0; j < 8; ++j) {
    const int s = j + 1 + (j >= 4 ? 40 : 0), m = j + (j >= 4 ? 20 : 0);
    EXPECT_EQ(y[size_t(32 * j + 7)], float(s) * 2.f - 0.5f * float(m)) << "sub-block " << j;
  }
}

// unpack_row_q4_k (the int4 kernels' lossless repack): for random blocks, every element is
// scale * q + min bitwise what dequantize_row gives, scale = d * sc and min = -(dmin * m).
TEST(GgufQuants, Q4_KUnpackIsDequantizeRow) {
  uint32_t x = 12345;
  auto rnd = [&] { return x = x * 1664525u + 1013904223u, x >> 8; };
  const int n = 512;  // two blocks
  std::vector<uint8_t> b(2 * 144);
  for (auto& v : b) v = uint8_t(rnd());
  for (int k = 0; k < 2; ++k) {  // finite f16 d / dmin of both signs and many magnitudes
    put16(b, size_t(144 * k), uint16_t((rnd() & 0x83FF) | ((4 + rnd() % 22) << 10)));
    put16(b, size_t(144 * k + 2), uint16_t((rnd() & 0x83FF) | ((4 + rnd() % 22) << 10)));
  }
  const std::vector<float> ref = deq(GgmlType::Q4_K, b, n);
  std::vector<uint8_t> q(n), sc(n / 32), m(n / 32);
  std::vector<float> scale(n / 32), mn(n / 32), d(n / 256), dmin(n / 256);
  unpack_row_q4_k(b.data(), n, q.data(), scale.data(), mn.data(), d.data(), dmin.data(), sc.data(), m.data());
  for (int k = 0; k < n; ++k) {
    ASSERT_LT(q[size_t(k)], 16);
    EXPECT_EQ(scale[size_t(k / 32)] * float(q[size_t(k)]) + mn[size_t(k / 32)], ref[size_t(k)]) << k;
  }
  for (int g = 0; g < n / 32; ++g) {
    ASSERT_LT(sc[size_t(g)], 64);
    ASSERT_LT(m[size_t(g)], 64);
    EXPECT_EQ(d[size_t(g / 8)] * float(sc[size_t(g)]), scale[size_t(g)]) << g;
    EXPECT_EQ(-(dmin[size_t(g / 8)] * float(m[size_t(g)])), mn[size_t(g)]) << g;
  }
}

// Q5_K as the int5 kernels take it: 5-bit codes (qh's bit per element joined), per-32 scale and
// min, that dequantize_row equals bit for bit, and their factors.
TEST(GgufQuants, Q5_KUnpackIsDequantizeRow) {
  uint32_t x = 4242;
  auto rnd = [&] { return x = x * 1664525u + 1013904223u, x >> 8; };
  const int n = 512;  // two blocks
  std::vector<uint8_t> b(2 * 176);
  for (auto& v : b) v = uint8_t(rnd());
  for (int k = 0; k < 2; ++k) {  // finite f16 d / dmin of both signs and many magnitudes
    put16(b, size_t(176 * k), uint16_t((rnd() & 0x83FF) | ((4 + rnd() % 22) << 10)));
    put16(b, size_t(176 * k + 2), uint16_t((rnd() & 0x83FF) | ((4 + rnd() % 22) << 10)));
  }
  const std::vector<float> ref = deq(GgmlType::Q5_K, b, n);
  std::vector<uint8_t> q(n), sc(n / 32), m(n / 32);
  std::vector<float> scale(n / 32), mn(n / 32), d(n / 256), dmin(n / 256);
  unpack_row_q5_k(b.data(), n, q.data(), scale.data(), mn.data(), d.data(), dmin.data(), sc.data(), m.data());
  int high = 0;
  for (int k = 0; k < n; ++k) {
    ASSERT_LT(q[size_t(k)], 32);
    high += q[size_t(k)] >= 16;
    EXPECT_EQ(scale[size_t(k / 32)] * float(q[size_t(k)]) + mn[size_t(k / 32)], ref[size_t(k)]) << k;
  }
  EXPECT_GT(high, n / 4);  // the fifth bit is exercised
  for (int g = 0; g < n / 32; ++g) {
    EXPECT_EQ(d[size_t(g / 8)] * float(sc[size_t(g)]), scale[size_t(g)]) << g;
    EXPECT_EQ(-(dmin[size_t(g / 8)] * float(m[size_t(g)])), mn[size_t(g)]) << g;
  }
}

// Q6_K as the int6 kernels take it: codes and per-16 scales d x sc that dequantize_row equals
// bit for bit, element k at q[k] (ggml's ql / qh interleave undone).
TEST(GgufQuants, Q6_KUnpackIsDequantizeRow) {
  uint32_t x = 777;
  auto rnd = [&] { return x = x * 1664525u + 1013904223u, x >> 8; };
  const int n = 512;  // two blocks
  std::vector<uint8_t> b(2 * 210);
  for (auto& v : b) v = uint8_t(rnd());
  for (int k = 0; k < 2; ++k)  // finite f16 d of both signs and many magnitudes
    put16(b, size_t(210 * k + 208), uint16_t((rnd() & 0x83FF) | ((4 + rnd() % 22) << 10)));
  const std::vector<float> ref = deq(GgmlType::Q6_K, b, n);
  std::vector<uint8_t> q(n), sc(n / 16);
  std::vector<float> scale(n / 16), d(n / 256);
  unpack_row_q6_k(b.data(), n, q.data(), scale.data(), d.data(), sc.data());
  for (int k = 0; k < n; ++k) {
    ASSERT_LT(q[size_t(k)], 64);
    EXPECT_EQ(scale[size_t(k / 16)] * float(int(q[size_t(k)]) - 32), ref[size_t(k)]) << k;
  }
  for (int g = 0; g < n / 16; ++g) EXPECT_EQ(d[size_t(g / 16)] * float(int8_t(sc[size_t(g)])), scale[size_t(g)]) << g;
}

// Q3_K as 3-bit codes (the int3-g16-k kernels): codes v + 4 for its values v in [-4, 3], its
// signed 6-bit scales as i8, its d: dequantize_row equal bit for bit, element k at q[k].
TEST(GgufQuants, Q3_KUnpackIsDequantizeRow) {
  uint32_t x = 4242;
  auto rnd = [&] { return x = x * 1664525u + 1013904223u, x >> 8; };
  const int n = 512;  // two blocks
  std::vector<uint8_t> b(2 * 110);
  for (auto& v : b) v = uint8_t(rnd());
  for (int k = 0; k < 2; ++k)  // finite f16 d of both signs and many magnitudes
    put16(b, size_t(110 * k + 108), uint16_t((rnd() & 0x83FF) | ((4 + rnd() % 22) << 10)));
  const std::vector<float> ref = deq(GgmlType::Q3_K, b, n);
  std::vector<uint8_t> q(n), sc(n / 16);
  std::vector<float> scale(n / 16), d(n / 256);
  unpack_row_q3_k(b.data(), n, q.data(), scale.data(), d.data(), sc.data());
  int seen_lo = 0, seen_hi = 0;
  for (int k = 0; k < n; ++k) {
    ASSERT_LE(q[size_t(k)], 7);
    seen_lo += q[size_t(k)] == 0, seen_hi += q[size_t(k)] == 7;
    EXPECT_EQ(scale[size_t(k / 16)] * float(int(q[size_t(k)]) - 4), ref[size_t(k)]) << k;
  }
  EXPECT_GT(seen_lo, 0);  // both ends of the 3-bit range occur in random bytes
  EXPECT_GT(seen_hi, 0);
  for (int g = 0; g < n / 16; ++g) {
    EXPECT_EQ(d[size_t(g / 16)] * float(int8_t(sc[size_t(g)])), scale[size_t(g)]) << g;
    EXPECT_GE(int8_t(sc[size_t(g)]), -32);
    EXPECT_LE(int8_t(sc[size_t(g)]), 31);
  }
  EXPECT_THROW(unpack_row_q3_k(b.data(), 300, q.data(), scale.data(), d.data(), sc.data()), Error);
}

TEST(GgufQuants, Q6_KSigned) {
  std::vector<uint8_t> b(210, 0);
  put16(b, 208, f16(0.125f));
  for (int i = 0; i < 16; ++i) b[192 + i] = uint8_t(int8_t(i - 8));
  // element 0: ql low nibble 5, qh bits 0-1 = 3 -> q = 5 | 48 = 53 - 32 = 21, scale index 0
  b[0] = 5;
  b[128] = 3;
  auto y = deq(GgmlType::Q6_K, b, 256);
  EXPECT_EQ(y[0], 0.125f * -8.f * 21.f);
  EXPECT_EQ(y[1], 0.125f * -8.f * -32.f);  // q = 0 - 32
}

TEST(GgufQuants, IQ4NonLinearTable) {
  std::vector<uint8_t> b(18, 0);
  put16(b, 0, f16(1.f));
  b[2] = 0xF0;  // element 0 -> index 0 (-127), element 16 -> index 15 (113)
  auto y = deq(GgmlType::IQ4_NL, b, 32);
  EXPECT_EQ(y[0], -127.f);
  EXPECT_EQ(y[16], 113.f);
}

TEST(GgufQuants, TypeTable) {
  EXPECT_STREQ(ggml_type_info(12).name, "Q4_K");
  EXPECT_EQ(ggml_type_info(12).type_size, 144);
  EXPECT_EQ(ggml_type_info(99).name, nullptr);
  EXPECT_EQ(ggml_type_name(99), "type 99");
  EXPECT_FALSE(ggml_type_info(16).dequantizable);  // IQ2_XXS: refused with a message
  std::vector<float> out(256);
  std::vector<uint8_t> blk(66);
  EXPECT_THROW(dequantize_row(GgmlType::IQ2_XXS, blk.data(), out.data(), 256), Error);
}

}  // namespace
}  // namespace nanovllm
