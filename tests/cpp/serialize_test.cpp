// lz::save / lz::load: safetensors round trips, the file layout other readers rely on, and bad
// files, each of which must raise a clear error naming the file.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace lz::testing {
namespace {

namespace fs = std::filesystem;

class SerializeTest : public RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    dir_ = fs::temp_directory_path() /
           ("lazuli-serialize-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    RuntimeTest::TearDown();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A file of the 8-byte length, `header` and `data`, as any safetensors writer lays it out.
  std::string write_raw(const std::string& header, const std::string& data,
                        const std::string& name = "raw.safetensors") {
    std::string p = path(name);
    std::ofstream f(p, std::ios::binary);
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>(n >> (8 * i)));
    f << header << data;
    return p;
  }

  static std::string read_file(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

  // Loading `p` throws E whose message names the file and contains `what`.
  template <typename E>
  static void expect_load_error(const std::string& p, const std::string& what) {
    try {
      lz::load(p);
      ADD_FAILURE() << "load succeeded; expected an error containing: " << what;
    } catch (const E& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(p), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
    }
  }

  fs::path dir_;
};

std::string float_bytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

TEST_F(SerializeTest, RoundTripKeepsNamesOrderDtypesShapesValuesAndMetadata) {
  NamedTensors in = {
      {"w", lz::tensor<float>({1.5f, -2.f, 3.25f, 0.f, 1e-30f, -7.f}, {2, 3})},
      {"step", lz::tensor<double>({12.0}, {})},
      {"idx", lz::tensor<int64_t>({5, -1, 1LL << 40}, {3})},
      {"i32", lz::tensor<int32_t>({7, -8}, {2, 1})},
      {"mask", lz::tensor<bool>({true, false, true}, {3})},
      {"empty", lz::zeros({0, 4})},
  };
  lz::save(in, path("a.safetensors"), {{"format", "pt"}, {"note", "é"}});
  LoadedTensors out = lz::load(path("a.safetensors"));
  ASSERT_EQ(out.tensors.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out.tensors[i].first, in[i].first);
    EXPECT_EQ(out.tensors[i].second.dtype(), in[i].second.dtype()) << in[i].first;
    EXPECT_EQ(out.tensors[i].second.shape(), in[i].second.shape()) << in[i].first;
  }
  EXPECT_EQ(out.at("w").to_vector<float>(), in[0].second.to_vector<float>());
  EXPECT_EQ(out.at("step").item<double>(), 12.0);
  EXPECT_EQ(out.at("idx").to_vector<int64_t>(), (std::vector<int64_t>{5, -1, 1LL << 40}));
  EXPECT_EQ(out.at("i32").to_vector<int32_t>(), (std::vector<int32_t>{7, -8}));
  EXPECT_EQ(out.at("mask").to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(out.at("empty").numel(), 0);
  EXPECT_EQ(out.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"note", "é"}}));
  EXPECT_EQ(lz::load_metadata(path("a.safetensors")), out.metadata);
  EXPECT_THROW(out.at("nope"), IndexError);
}

TEST_F(SerializeTest, SaveComputesPendingTensorsAndViewsInOneProgram) {
  Tensor a = lz::arange(6).to(DType::Float32).reshape({2, 3});
  lz::sync();
  lz::debug::clear_counters();
  Tensor b = a * 2 + 1;          // pending IR
  Tensor c = a.transpose(0, 1);  // a view: saved as its (contiguous) values
  Tensor d = (a - 1).sum({1});   // pending IR
  lz::save({{"b", b}, {"c", c}, {"d", d}, {"a", a}}, path("p.safetensors"));
  EXPECT_EQ(counter("UncachedCompile") + counter("CachedCompile"), 1);
  LoadedTensors out = lz::load(path("p.safetensors"));
  EXPECT_EQ(out.at("b").to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(out.at("c").shape(), (IntList{3, 2}));
  EXPECT_EQ(out.at("c").to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(out.at("d").to_vector<float>(), (std::vector<float>{0, 9}));
}

TEST_F(SerializeTest, SavedTensorsKeepTheirValuesAndState) {
  Tensor w = lz::ones({3});
  lz::save({{"w", w}}, path("s.safetensors"));
  w.add_(1);  // the saved file holds the value at the save
  EXPECT_EQ(lz::load(path("s.safetensors")).at("w").to_vector<float>(),
            (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

TEST_F(SerializeTest, LoadedTensorsAreHostDataUntilUsed) {
  lz::save({{"x", lz::tensor<float>({1, 2, 3})}}, path("h.safetensors"));
  LoadedTensors out = lz::load(path("h.safetensors"));
  EXPECT_EQ(lz::debug::tensor_state(out.at("x")), "host");
  EXPECT_EQ(counter("UncachedCompile") + counter("CachedCompile"), 0);
  EXPECT_EQ((out.at("x") * 2).to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

TEST_F(SerializeTest, FileLayoutIsSafetensors) {
  lz::save({{"b", lz::tensor<bool>({true})},
            {"f", lz::tensor<float>({1.f, 2.f})},
            {"d", lz::tensor<double>({3.0})}},
           path("l.safetensors"), {{"k", "v"}});
  std::string bytes = read_file(path("l.safetensors"));
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u) << "the data section starts 8-byte aligned";
  std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.front(), '{');
  // Metadata first, then the entries in the caller's order; data largest dtype first.
  EXPECT_EQ(header.rfind("{\"__metadata__\":{\"k\":\"v\"},\"b\":", 0), 0u) << header;
  EXPECT_NE(header.find("\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find("\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find("\"b\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[16,17]}"),
            std::string::npos)
      << header;
  EXPECT_EQ(bytes.size(), 8 + n + 17);
  double d;
  std::memcpy(&d, bytes.data() + 8 + n, 8);
  EXPECT_EQ(d, 3.0);
  EXPECT_EQ(bytes.back(), '\1');
}

TEST_F(SerializeTest, LoadsAFileWrittenByAnotherWriter) {
  // Entries out of data order, a 0-d tensor and no padding (the data need not be aligned).
  std::string p = write_raw(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
                            R"("a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
                            float_bytes({9.f, 1.f, 2.f}));
  LoadedTensors out = lz::load(p);
  ASSERT_EQ(out.tensors.size(), 2u);
  EXPECT_EQ(out.tensors[0].first, "b");
  EXPECT_EQ(out.tensors[0].second.to_vector<float>(), (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(out.tensors[1].second.shape(), IntList{});
  EXPECT_EQ(out.tensors[1].second.item<float>(), 9.f);
  EXPECT_TRUE(out.metadata.empty());
}

TEST_F(SerializeTest, BoolBytesAreNormalizedToZeroOrOne) {
  std::string p = write_raw(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})",
                            std::string("\x00\x07\x01", 3));
  Tensor m = lz::load(p).at("m");
  EXPECT_EQ(m.to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(m.to(DType::Int32).sum().item<int32_t>(), 2);
}

TEST_F(SerializeTest, SaveReplacesAnExistingFileWholeAndLeavesNoTemporaryFile) {
  lz::save({{"x", lz::ones({1000})}}, path("r.safetensors"));
  LoadedTensors first = lz::load(path("r.safetensors"));
  lz::save({{"y", lz::zeros({2})}}, path("r.safetensors"));
  EXPECT_EQ(lz::load(path("r.safetensors")).tensors[0].first, "y");
  EXPECT_EQ(first.at("x").sum().item<float>(), 1000.f);  // loaded tensors own their memory
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
}

TEST_F(SerializeTest, SaveRefusesBadNamesAndUndefinedTensorsBeforeWriting) {
  lz::save({{"x", lz::ones({1})}}, path("n.safetensors"));
  std::string before = read_file(path("n.safetensors"));
  auto expect_value_error = [&](const NamedTensors& ts, const std::string& what) {
    try {
      lz::save(ts, path("n.safetensors"));
      ADD_FAILURE() << "save succeeded; expected " << what;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("n.safetensors"), std::string::npos) << e.what();
    }
  };
  expect_value_error({{"a", lz::ones({1})}, {"a", lz::ones({2})}}, "used twice");
  expect_value_error({{"__metadata__", lz::ones({1})}}, "reserved");
  expect_value_error({{"u", Tensor()}}, "undefined");
  EXPECT_EQ(read_file(path("n.safetensors")), before);
  EXPECT_THROW(lz::save({{"x", lz::ones({1})}}, path("no/such/dir/x.safetensors")), Error);
}

TEST_F(SerializeTest, MissingFileAndDirectoryRaiseNamingThePath) {
  expect_load_error<Error>(path("absent.safetensors"), "cannot open");
  expect_load_error<Error>(dir_.string(), "directory");
}

TEST_F(SerializeTest, MalformedHeadersRaiseValueErrorNamingTheFileAndTheProblem) {
  const std::string f32x2 = float_bytes({1.f, 2.f});
  struct Case {
    std::string header, data, what;
  };
  const Case cases[] = {
      {"[1, 2]", "", "does not start with '{'"},
      {"{\"a\": ", "", "not valid JSON"},
      {"  {}", "", "does not start with '{'"},
      {R"({"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", f32x2, "unknown dtype \"Q7\""},
      {R"({"a":{"dtype":"I16","shape":[4],"data_offsets":[0,8]}})", f32x2,
       "dtype \"I16\" is not supported"},
      {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f32x2, "needs 12"},
      {R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f32x2, "non-negative"},
      {R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", f32x2, "non-negative"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", f32x2, "end before"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", f32x2, "[begin, end]"},
      {R"({"a":{"dtype":"F32","shape":[2]}})", f32x2, "missing field \"data_offsets\""},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", f32x2,
       "unexpected field"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       f32x2, "overlap"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", f32x2, "gap"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", f32x2, "after the last"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", f32x2, "truncated"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       f32x2, "twice"},
      {R"({"a":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})", f32x2, "nests deeper"},
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", f32x2,
       "too large"},
      {R"({"__metadata__":{"k":1}})", "", "must be a string"},
      {R"({"a":[1]})", "", "expected an object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    expect_load_error<ValueError>(write_raw(c.header, c.data), c.what);
  }
}

TEST_F(SerializeTest, BadLengthFieldsAndShortFilesRaiseWithoutAllocating) {
  {
    std::ofstream f(path("short.safetensors"), std::ios::binary);
    f << "abc";
  }
  expect_load_error<ValueError>(path("short.safetensors"), "too short");
  // A length of 2^62: refused before any allocation.
  std::string huge(8, '\0');
  huge[7] = 0x40;
  {
    std::ofstream f(path("huge.safetensors"), std::ios::binary);
    f << huge << "{}";
  }
  expect_load_error<ValueError>(path("huge.safetensors"), "beyond the limit");
  // A length within the limit but past the end of the file.
  std::string past(8, '\0');
  past[0] = 100;
  {
    std::ofstream f(path("past.safetensors"), std::ios::binary);
    f << past << "{}";
  }
  expect_load_error<ValueError>(path("past.safetensors"), "past the end");
}

TEST_F(SerializeTest, TruncatedSaveIsRefused) {
  lz::save({{"w", lz::ones({64})}}, path("t.safetensors"));
  std::string bytes = read_file(path("t.safetensors"));
  for (size_t keep : {bytes.size() - 1, bytes.size() - 200, size_t{20}, size_t{8}}) {
    SCOPED_TRACE(keep);
    {
      std::ofstream f(path("cut.safetensors"), std::ios::binary | std::ios::trunc);
      f << bytes.substr(0, keep);
    }
    try {
      lz::load(path("cut.safetensors"));
      ADD_FAILURE() << "a truncated file loaded";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("cut.safetensors"), std::string::npos) << e.what();
    }
  }
}

TEST_F(SerializeTest, CorruptedFilesLoadOrRaiseButNeverCrash) {
  lz::save(
      {{"w", lz::ones({3, 4})}, {"i", lz::tensor<int64_t>({1, 2})}, {"m", lz::ones({2}).bool_()}},
      path("good.safetensors"), {{"k", "v"}});
  const std::string good = read_file(path("good.safetensors"));
  uint64_t state = 0x9E3779B97F4A7C15ull;  // a fixed xorshift stream: the same files every run
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const char pokes[] = {'0', '9', '[', ']', '{', '}', '"', ',', ':', '-', ' ', '\0', '\xff'};
  int loaded = 0, refused = 0;
  for (int round = 0; round < 300; ++round) {
    std::string bytes = good;
    for (int k = 1 + static_cast<int>(next() % 3); k > 0; --k) {
      size_t at = next() % bytes.size();
      bytes[at] = next() % 2 ? pokes[next() % sizeof(pokes)] : static_cast<char>(next());
    }
    if (next() % 8 == 0) bytes.resize(next() % bytes.size());
    {
      std::ofstream f(path("bad.safetensors"), std::ios::binary | std::ios::trunc);
      f << bytes;
    }
    try {
      LoadedTensors out = lz::load(path("bad.safetensors"));
      for (const auto& [name, t] : out.tensors) (void)t.sum().to(DType::Float64).item<double>();
      ++loaded;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos) << e.what();
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_EQ(loaded + refused, 300);
}

}  // namespace
}  // namespace lz::testing
