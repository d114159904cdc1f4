// GgufFile on malformed input: each corruption gives a clear error naming the
// file, the byte offset and the key or tensor; none crashes, hangs or
// allocates from an untrusted count. Truncation is tried at every length, and
// a seeded fuzz loop flips random bytes.
#include <random>

#include "engine/model/gguf.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/model_test_util.h"

namespace onecard::engine {
namespace {

using namespace ::onecard::testing;  // NOLINT: writer and type constants
using ::testing::AllOf;
using ::testing::HasSubstr;

// A small valid file: metadata of several kinds and two tensors whose data
// ends exactly at the end of the file (32-byte multiples: no trailing pad).
GgufTestWriter ValidWriter() {
  GgufTestWriter w;
  w.AddString("general.architecture", "llama");
  w.AddInt("llama.block_count", kMetaU32, 2);
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "c"});
  w.AddF32Array("scores", {0.5f, 1.5f});
  w.AddF32Tensor("first.weight", {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  w.AddF32Tensor("second.weight", {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  return w;
}

class GgufBadInputTest : public ::testing::Test {
 protected:
  absl::Status Open(const std::string& bytes) {
    path_ = dir_.Write("bad.gguf", bytes);
    auto gguf = GgufFile::Open(path_);
    return gguf.status();
  }
  // An InvalidArgument error that names the file, an offset and `what`.
  void ExpectError(const std::string& bytes, const std::string& what,
                   absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    absl::Status status = Open(bytes);
    ASSERT_FALSE(status.ok()) << "accepted; wanted: " << what;
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr(path_), HasSubstr("byte offset"), HasSubstr(what)));
  }

  ScratchDir dir_;
  std::string path_;
};

TEST_F(GgufBadInputTest, ValidFileOpens) { EXPECT_TRUE(Open(ValidWriter().Build().bytes).ok()); }

TEST_F(GgufBadInputTest, BadMagic) {
  std::string bytes = ValidWriter().Build().bytes;
  bytes.replace(0, 4, "GGML");
  ExpectError(bytes, "bad magic");
  ExpectError("", "magic");
}

TEST_F(GgufBadInputTest, UnsupportedVersions) {
  std::string bytes = ValidWriter().Build().bytes;
  PutU32(&bytes, 4, 1);
  ExpectError(bytes, "unsupported GGUF version 1", absl::StatusCode::kUnimplemented);
  PutU32(&bytes, 4, 4);
  ExpectError(bytes, "unsupported GGUF version 4");
  PutU32(&bytes, 4, 0x03000000);  // a big-endian v3 file
  ExpectError(bytes, "little-endian only");
}

TEST_F(GgufBadInputTest, TruncatedAtEveryLength) {
  GgufBytes built = ValidWriter().Build();
  for (size_t n = 0; n < built.bytes.size(); ++n) {
    SCOPED_TRACE(n);
    absl::Status status = Open(built.bytes.substr(0, n));
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), AllOf(HasSubstr(path_), HasSubstr("byte offset")));
  }
  // Representative points: the counts, a key, an array, the tensor infos,
  // the data (offsets from the layout of ValidWriter).
  ExpectError(built.bytes.substr(0, 30), "metadata count 4 cannot fit in the 6 bytes left");
  ExpectError(built.bytes.substr(0, 80), "file truncated: metadata key needs 17 bytes");
  ExpectError(built.bytes.substr(0, 171),
              "file truncated: array of key 'tokenizer.ggml.tokens' needs 8 bytes");
  ExpectError(built.bytes.substr(0, built.infos_offset + 10), "tensor count 2 cannot fit");
  ExpectError(built.bytes.substr(0, built.infos_offset + 70), "file truncated: tensor name");
  ExpectError(built.bytes.substr(0, built.bytes.size() - 4), "tensor 'second.weight' data");
}

TEST_F(GgufBadInputTest, DataOffsetPastTheEnd) {
  GgufBytes built = ValidWriter().Build();
  PutU64(&built.bytes, built.offset_fields[1], uint64_t{1} << 40);
  ExpectError(built.bytes, "tensor 'second.weight' data");
  PutU64(&built.bytes, built.offset_fields[1], ~uint64_t{31});  // would wrap around
  ExpectError(built.bytes, "runs past the end of the file");
}

TEST_F(GgufBadInputTest, MisalignedDataOffset) {
  GgufBytes built = ValidWriter().Build();
  PutU64(&built.bytes, built.offset_fields[0], 4);
  ExpectError(built.bytes,
              "tensor 'first.weight' data offset 4 is not a multiple of the alignment 32");
}

TEST_F(GgufBadInputTest, AbsurdCounts) {
  GgufBytes built = ValidWriter().Build();
  std::string bytes = built.bytes;
  PutU64(&bytes, 8, uint64_t{1} << 60);
  ExpectError(bytes, "tensor count 1152921504606846976 cannot fit");
  bytes = built.bytes;
  PutU64(&bytes, 16, ~uint64_t{0});
  ExpectError(bytes, "metadata count");
  bytes = built.bytes;
  PutU64(&bytes, 24, uint64_t{1} << 62);  // first key's length
  ExpectError(bytes, "metadata key: string length 4611686018427387904 exceeds");
  GgufTestWriter w;
  std::string array;
  AppendU32(&array, kMetaString);
  AppendU64(&array, uint64_t{1} << 58);
  w.AddRaw("huge", kMetaArray, array);
  ExpectError(w.Build().bytes, "array of key 'huge': 288230376151711744 elements cannot fit");
  GgufTestWriter s;
  s.AddRaw("long", kMetaString, std::string("\xff\xff\xff\xff\xff\xff\x00\x00", 8));
  ExpectError(s.Build().bytes, "value of key 'long'");
}

TEST_F(GgufBadInputTest, BadDimensions) {
  GgufTestWriter five;
  five.AddF32Tensor("t", {1, 1, 1, 1, 1}, {1});
  ExpectError(five.Build().bytes, "tensor 't' has 5 dimensions");
  GgufTestWriter zero;
  zero.AddF32Tensor("z", {0, 4}, {});
  ExpectError(zero.Build().bytes, "tensor 'z' dimension 1 has size 0");
  GgufTestWriter huge;
  huge.AddF32Tensor("h", {int64_t{1} << 30, int64_t{1} << 30}, {});
  ExpectError(huge.Build().bytes, "tensor 'h' has too many elements");
}

TEST_F(GgufBadInputTest, UnknownTensorType) {
  GgufBytes built = ValidWriter().Build();
  PutU32(&built.bytes, built.type_fields[0], 99);
  ExpectError(built.bytes, "tensor 'first.weight' has unknown ggml type 99");
  PutU32(&built.bytes, built.type_fields[0], 4);  // Q4_2, removed from ggml
  ExpectError(built.bytes, "unknown ggml type 4");
}

TEST_F(GgufBadInputTest, UnsupportedTensorTypeListsTheSupportedSet) {
  GgufTestWriter w;
  w.AddTensor("k", kGgmlQ5_0, {32}, std::string(22, '\0'));
  ExpectError(w.Build().bytes,
              "tensor 'k' has ggml type Q5_0; supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
              "Q4_K, Q5_K, Q6_K",
              absl::StatusCode::kUnimplemented);
}

TEST_F(GgufBadInputTest, RowNotAMultipleOfTheBlockSize) {
  GgufTestWriter w;
  w.AddTensor("q", kGgmlQ8_0, {2, 33}, std::string(136, '\0'));
  ExpectError(w.Build().bytes,
              "tensor 'q' has rows of 33 elements, not a multiple of the "
              "Q8_0 block size 32");
}

TEST_F(GgufBadInputTest, UnknownMetadataTypes) {
  GgufTestWriter w;
  w.AddRaw("weird", 99, "abcd");
  ExpectError(w.Build().bytes, "unknown metadata type 99 of key 'weird'");
  GgufTestWriter a;
  std::string array;
  AppendU32(&array, 42);
  AppendU64(&array, 1);
  a.AddRaw("arr", kMetaArray, array + "x");
  ExpectError(a.Build().bytes, "unknown array element type 42 of key 'arr'");
}

TEST_F(GgufBadInputTest, NestedArray) {
  GgufTestWriter w;
  std::string inner;
  AppendU32(&inner, kMetaI32);
  AppendU64(&inner, 1);
  AppendU32(&inner, 7);
  std::string outer;
  AppendU32(&outer, kMetaArray);
  AppendU64(&outer, 1);
  w.AddRaw("nested", kMetaArray, outer + inner);
  ExpectError(w.Build().bytes, "nested array in key 'nested'");
}

TEST_F(GgufBadInputTest, BadScalarValues) {
  GgufTestWriter b;
  b.AddRaw("flag", kMetaBool, "\x02");
  ExpectError(b.Build().bytes, "bool value 2 of key 'flag'");
  GgufTestWriter u;
  u.AddRaw("big", kMetaU64, std::string(8, '\xff'));
  ExpectError(u.Build().bytes, "uint64 value 18446744073709551615 of key 'big' is too large");
}

TEST_F(GgufBadInputTest, BadAlignment) {
  GgufTestWriter w;
  w.AddInt("general.alignment", kMetaU32, 3);
  w.AddF32Tensor("t", {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  absl::Status status = Open(w.Build().bytes);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr(path_), HasSubstr("'general.alignment'")));
  GgufTestWriter s;
  s.AddString("general.alignment", "32");
  EXPECT_THAT(std::string(Open(s.Build().bytes).message()), HasSubstr("'general.alignment'"));
}

TEST_F(GgufBadInputTest, Duplicates) {
  GgufTestWriter k;
  k.AddInt("x", kMetaU8, 1);
  k.AddInt("x", kMetaU8, 2);
  ExpectError(k.Build().bytes, "duplicate metadata key 'x'");
  GgufTestWriter t;
  t.AddF32Tensor("w", {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  t.AddF32Tensor("w", {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  ExpectError(t.Build().bytes, "duplicate tensor name 'w'");
}

TEST_F(GgufBadInputTest, RandomCorruptionNeverCrashes) {
  const std::string valid = ValidWriter().Build().bytes;
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int trial = 0; trial < 600; ++trial) {
    std::string bytes = valid;
    int flips = 1 + trial % 4;
    for (int f = 0; f < flips; ++f) {
      bytes[rng() % bytes.size()] = static_cast<char>(rng() & 0xff);
    }
    absl::Status status = Open(bytes);
    if (!status.ok()) {
      ++rejected;
      ASSERT_THAT(std::string(status.message()), HasSubstr(path_)) << "trial " << trial;
    }
  }
  EXPECT_GT(rejected, 60);  // most header flips are caught
}

}  // namespace
}  // namespace onecard::engine
