// safetensors read/write: round trips for every dtype, the on-disk layout the Python library
// expects, mapping lifetime, and a clear error for each kind of broken file.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "loader/safetensors.h"
#include "loader/safetensors_writer.h"
#include "test_util.h"

namespace nanovllm {
namespace {

using test::expect_error;
using test::st_bytes;
using test::TempDir;
using test::write_bytes;

template <class T>
Tensor make(const Shape& s, DType dt, const std::vector<T>& v) {
  Tensor t = Tensor::empty(s, dt);
  EXPECT_EQ(t.nbytes(), v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(T));
  return t;
}

std::map<std::string, Tensor> sample_tensors() {
  std::map<std::string, Tensor> m;
  m["f32"] = make<float>({2, 3}, DType::F32, {1.f, -2.5f, 3.25f, 0.f, 1e-7f, -1e30f});
  m["bf16"] = make<uint16_t>({4}, DType::BF16, {f32_to_bf16(1.f), f32_to_bf16(-0.5f),
                                                f32_to_bf16(3.f), f32_to_bf16(100.f)});
  m["f16"] = make<uint16_t>({3, 1}, DType::F16,
                            {f32_to_f16(0.25f), f32_to_f16(-8.f), f32_to_f16(65504.f)});
  m["i32"] = make<int32_t>({5}, DType::I32, {0, -1, 7, INT32_MAX, INT32_MIN});
  m["i64"] = make<int64_t>({2, 2}, DType::I64, {1, -1, int64_t(1) << 40, -(int64_t(1) << 50)});
  m["a.empty"] = Tensor::empty({0, 4}, DType::F32);
  m["scalar"] = make<float>({}, DType::F32, {42.f});
  return m;
}

TEST(Safetensors, RoundTripEveryDtype) {
  TempDir d;
  auto src = sample_tensors();
  write_safetensors(d / "m.safetensors", src, {{"format", "pt"}, {"note", "x y"}});
  auto f = SafetensorsFile::open(d / "m.safetensors");
  EXPECT_EQ(f->tensors().size(), src.size());
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->metadata().at("note"), "x y");
  for (const auto& [name, t] : src) {
    ASSERT_TRUE(f->has(name)) << name;
    Tensor r = f->get(name);
    EXPECT_EQ(r.dtype(), t.dtype()) << name;
    EXPECT_EQ(r.shape(), t.shape()) << name;
    EXPECT_EQ(r.device(), Device::CPU);
    ASSERT_EQ(r.nbytes(), t.nbytes()) << name;
    if (t.nbytes()) {
      EXPECT_EQ(std::memcmp(r.raw(), t.raw(), t.nbytes()), 0) << name;
    }
  }
  EXPECT_EQ(to_f32_vector(f->get("bf16"))[1], -0.5f);
}

// The layout rules the Python `safetensors` library checks, verified on the raw bytes.
TEST(Safetensors, WrittenLayoutIsSpecCompliant) {
  TempDir d;
  auto src = sample_tensors();
  write_safetensors(d / "m.safetensors", src);
  std::string b = test::read_bytes(d / "m.safetensors");
  ASSERT_GE(b.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(b[size_t(i)]);
  ASSERT_LE(8 + n, b.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "data must start 8-byte aligned";
  std::string header = b.substr(8, n);
  EXPECT_EQ(header[0], '{');
  size_t last = header.find_last_of('}');
  for (size_t i = last + 1; i < header.size(); ++i) EXPECT_EQ(header[i], ' ') << "padding";
  auto j = nlohmann::json::parse(header);
  EXPECT_FALSE(j.contains("__metadata__"));  // none given
  // Sorted by name, contiguous from 0 to the end of the file.
  uint64_t expect_begin = 0;
  for (const auto& [name, t] : src) {  // std::map iterates in name order
    ASSERT_TRUE(j.contains(name)) << name;
    auto off = j[name]["data_offsets"];
    EXPECT_EQ(off[0].get<uint64_t>(), expect_begin) << name;
    EXPECT_EQ(off[1].get<uint64_t>() - off[0].get<uint64_t>(), t.nbytes()) << name;
    expect_begin = off[1].get<uint64_t>();
    EXPECT_EQ(j[name]["dtype"].get<std::string>(), dtype_name(t.dtype()));
  }
  EXPECT_EQ(8 + n + expect_begin, b.size());
}

// A file built by hand (not by our writer), with a __metadata__ entry and an unaligned
// header length, read back.
TEST(Safetensors, ReadsHandWrittenFile) {
  TempDir d;
  std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
      R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})";
  float w[2] = {1.5f, -2.f};
  int32_t bias = -7;
  std::string data(12, '\0');
  std::memcpy(&data[0], &bias, 4);
  std::memcpy(&data[4], w, 8);
  write_bytes(d / "h.safetensors", st_bytes(header, data));
  auto f = SafetensorsFile::open(d / "h.safetensors");
  EXPECT_EQ(f->metadata().at("format"), "pt");
  Tensor t = f->get("w");
  EXPECT_EQ(t.shape(), Shape({2}));
  // The header length (odd) leaves the data misaligned: get() must return an aligned copy.
  ASSERT_NE((8 + header.size()) % 4, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 4, 0u);
  EXPECT_EQ(t.data<float>()[0], 1.5f);
  EXPECT_EQ(t.data<float>()[1], -2.f);
  EXPECT_EQ(f->get("b").data<int32_t>()[0], -7);
  EXPECT_EQ(f->tensors().at("w").offset, 8 + header.size() + 4);
}

TEST(Safetensors, TensorKeepsMappingAlive) {
  TempDir d;
  auto src = sample_tensors();
  write_safetensors(d / "m.safetensors", src);
  Tensor t;
  {
    auto f = SafetensorsFile::open(d / "m.safetensors");
    t = f->get("f32");
  }  // the file object is released here; the tensor's owner still holds it
  ASSERT_TRUE(t.owner());
  EXPECT_EQ(std::memcmp(t.raw(), src["f32"].raw(), t.nbytes()), 0);
}

TEST(Safetensors, Errors) {
  TempDir d;
  const std::string ok_entry = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data8(8, '\0');

  expect_error([&] { SafetensorsFile::open(d / "nope.safetensors"); },
               {"cannot open", "nope.safetensors"});

  write_bytes(d / "short.safetensors", std::string("\x05\0\0", 3));
  expect_error([&] { SafetensorsFile::open(d / "short.safetensors"); },
               {"truncated", "short.safetensors"});

  write_bytes(d / "len.safetensors", st_bytes("{" + ok_entry + "}", data8, 1000));
  expect_error([&] { SafetensorsFile::open(d / "len.safetensors"); },
               {"header length 1000", "beyond", "len.safetensors"});

  write_bytes(d / "json.safetensors", st_bytes("{\"w\": [1, 2", data8));
  expect_error([&] { SafetensorsFile::open(d / "json.safetensors"); },
               {"malformed JSON", "json.safetensors"});

  write_bytes(d / "dtype.safetensors",
              st_bytes(R"({"w":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", data8));
  expect_error([&] { SafetensorsFile::open(d / "dtype.safetensors"); },
               {"unknown dtype 'F8_E4M3' for tensor 'w'", "dtype.safetensors"});

  write_bytes(d / "range.safetensors",
              st_bytes(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data8));
  expect_error([&] { SafetensorsFile::open(d / "range.safetensors"); },
               {"'w'", "outside", "range.safetensors"});

  write_bytes(d / "size.safetensors",
              st_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8));
  expect_error([&] { SafetensorsFile::open(d / "size.safetensors"); },
               {"'w'", "needs 12 bytes", "size.safetensors"});

  write_bytes(d / "shape.safetensors",
              st_bytes(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8));
  expect_error([&] { SafetensorsFile::open(d / "shape.safetensors"); },
               {"'w'", "shape.safetensors"});

  write_bytes(d / "arr.safetensors", st_bytes("[1, 2]", data8));
  expect_error([&] { SafetensorsFile::open(d / "arr.safetensors"); }, {"arr.safetensors"});

  write_bytes(d / "ok.safetensors", st_bytes("{" + ok_entry + "}", data8));
  auto f = SafetensorsFile::open(d / "ok.safetensors");
  expect_error([&] { f->get("missing"); }, {"missing tensor 'missing'", "ok.safetensors"});

  // The directory itself is not a file.
  expect_error([&] { SafetensorsFile::open(d.path.string()); }, {d.path.string()});
}

// Corrupted and truncated variants of a valid file either open (and then every tensor is
// readable within the file) or throw nanovllm::Error; nothing crashes. Run under
// NANOVLLM_SANITIZE to catch out-of-bounds reads.
TEST(Safetensors, CorruptionNeverCrashes) {
  TempDir d;
  write_safetensors(d / "m.safetensors", sample_tensors(), {{"format", "pt"}});
  const std::string good = test::read_bytes(d / "m.safetensors");
  uint64_t state = 0x1234;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  int opened = 0, rejected = 0;
  const std::string junk = "{}[]\":,0123456789-e.FBIU \x00\xff";
  for (int iter = 0; iter < 240; ++iter) {
    std::string b = good;
    if (iter % 4 == 0) {
      b.resize(next() % b.size());  // truncation
    } else {
      for (int k = 0; k < 1 + iter % 3; ++k)  // 1-3 bytes replaced, mostly in the header
        b[size_t(next() % std::min<size_t>(b.size(), 8 + 600))] = junk[next() % junk.size()];
    }
    write_bytes(d / "c.safetensors", b);
    try {
      auto f = SafetensorsFile::open(d / "c.safetensors");
      for (const auto& [name, info] : f->tensors()) {
        ASSERT_LE(info.offset + info.nbytes, b.size()) << name;
        Tensor t = f->get(name);
        ASSERT_EQ(t.nbytes(), info.nbytes);
        // The tensor's bytes are the file's bytes at the recorded offset.
        if (info.nbytes) {
          EXPECT_EQ(std::memcmp(t.raw(), b.data() + info.offset, info.nbytes), 0) << name;
        }
      }
      ++opened;
    } catch (const nanovllm::Error&) {
      ++rejected;
    }
  }
  EXPECT_GE(rejected, 60);  // every truncation (60) must be rejected
  std::printf("corrupted files: %d opened, %d rejected with an error\n", opened, rejected);
}

// Write with our writer, read with an independent numpy reader (stands in for the Python
// `safetensors` package, which Debian lacks).
TEST(Safetensors, NumpyReaderAgrees) {
  if (!std::filesystem::exists("/usr/bin/python3") ||
      std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  TempDir d;
  auto src = sample_tensors();
  src.erase("scalar");
  write_safetensors(d / "m.safetensors", src, {{"format", "pt"}});
  const char* script = R"PY(
import json, struct, sys, numpy as np
raw = open(sys.argv[1], 'rb').read()
n, = struct.unpack('<Q', raw[:8])
h = json.loads(raw[8:8 + n])
data = raw[8 + n:]
meta = h.pop('__metadata__', {})
assert meta == {'format': 'pt'}, meta
kinds = {'F32': '<f4', 'F16': '<f2', 'I32': '<i4', 'I64': '<i8', 'BF16': '<u2'}
out = {}
end = 0
for name, e in sorted(h.items(), key=lambda kv: kv[1]['data_offsets'][0]):
    b, en = e['data_offsets']
    assert b == end, (name, b, end)
    end = en
    a = np.frombuffer(data[b:en], dtype=kinds[e['dtype']]).reshape(e['shape'])
    if e['dtype'] == 'BF16':
        a = (a.astype('<u4') << 16).view('<f4')
    out[name] = [float(x) for x in a.ravel()]
assert end == len(data)
json.dump(out, open(sys.argv[2], 'w'))
)PY";
  test::write_bytes(d / "read.py", script);
  std::string cmd = "/usr/bin/python3 " + (d / "read.py") + " " + (d / "m.safetensors") + " " +
                    (d / "out.json");
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto j = nlohmann::json::parse(test::read_bytes(d / "out.json"));
  for (const auto& [name, t] : src) {
    ASSERT_TRUE(j.contains(name)) << name;
    std::vector<double> got = j[name].get<std::vector<double>>();
    ASSERT_EQ(int64_t(got.size()), t.numel()) << name;
    for (int64_t i = 0; i < t.numel(); ++i) {
      double want = 0;
      switch (t.dtype()) {
        case DType::I32: want = t.data<int32_t>()[i]; break;
        case DType::I64: want = double(t.data<int64_t>()[i]); break;
        default: want = to_f32_vector(t)[size_t(i)];
      }
      EXPECT_EQ(got[size_t(i)], want) << name << "[" << i << "]";
    }
  }
}

}  // namespace
}  // namespace nanovllm
