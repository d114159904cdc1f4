// BlasTuner: after tuning a shape over several weights, BlasGemm with the
// tuner (whichever algorithm won: a cuBLASLt one or the default) still
// matches LinearRef, for overwrite (beta 0, y poisoned with NaN first) and
// accumulate (beta 1: y starts as the bias row, so acc + bias is rounded
// once, as LinearRef does), BF16 and F32 outputs, aligned and odd widths;
// the configuration search around the heuristic's choices ran. Split-K
// partials (BlasGemmParams::splits), untuned and tuned: the slices sum to the
// plain fp32 product. The tuning cache (BlasTunerCacheTest): choices saved
// by one tuner and loaded into a second give its products bit for bit.
#include "engine/kernels/blas_tuner.h"

#include <cublas_v2.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/kernels/linear.h"
#include "nlohmann/json.hpp"
#include "tests/gpu/gpu_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::testing {
namespace {

using engine::DType;

// x W^T as plain fp32 dots of the BF16 inputs (x [m, k], W [n, k]).
std::vector<float> Fp32Product(const std::vector<uint16_t>& x, const std::vector<uint16_t>& w,
                               int32_t m, int64_t n, int64_t k) {
  std::vector<float> y(m * n);
  for (int32_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) {
        acc += engine::Bf16ToFloat(x[r * k + i]) * engine::Bf16ToFloat(w[j * k + i]);
      }
      y[r * n + j] = acc;
    }
  }
  return y;
}

struct TunerCase {
  std::string name;
  int32_t m;
  int64_t n;
  int64_t k;
  bool accumulate;
  bool f32_out;
};

class BlasTunerTest : public ::testing::TestWithParam<TunerCase> {};

TEST_P(BlasTunerTest, TunedProductMatchesReference) {
  const TunerCase& c = GetParam();
  std::mt19937 rng = SeededRng(std::hash<std::string>()(c.name) & 0xffff, 33);
  constexpr int kWeights = 3;
  std::vector<uint16_t> x = RandomBf16(c.m * c.k, rng);
  std::vector<std::vector<uint16_t>> w;
  for (int i = 0; i < kWeights; ++i) w.push_back(RandomBf16(c.n * c.k, rng, -0.1f, 0.1f));
  std::vector<uint16_t> bias = RandomBf16(c.n, rng);
  std::vector<uint16_t> y_init(c.m * c.n);
  for (int32_t r = 0; r < c.m; ++r) std::copy(bias.begin(), bias.end(), &y_init[r * c.n]);

  // Reference: weight 1, with the bias row when accumulating.
  std::vector<uint16_t> y16(c.m * c.n);
  std::vector<float> y32(c.m * c.n);
  engine::LinearParams ref{.dtype = DType::kBF16,
                           .x = x.data(),
                           .weight = w[1].data(),
                           .bias = c.accumulate ? bias.data() : nullptr,
                           .y = y16.data(),
                           .num_rows = c.m,
                           .in_features = c.k,
                           .out_features = c.n};
  if (!c.f32_out) {
    ASSERT_TRUE(engine::LinearRef(ref).ok());
  } else {  // F32 logits: the plain fp32 dot of the BF16 inputs
    y32 = Fp32Product(x, w[1], c.m, c.n, c.k);
  }

  DeviceBuf<uint16_t> dx(x), dy16(y_init.size());
  DeviceBuf<float> dy32(y32.size());
  std::vector<std::unique_ptr<DeviceBuf<uint16_t>>> dw;
  std::vector<const void*> weights;
  for (const auto& host : w) {
    dw.push_back(std::make_unique<DeviceBuf<uint16_t>>(host));
    weights.push_back(dw.back()->get());
  }
  DeviceBuf<uint8_t> workspace(32 << 20);
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  absl::StatusOr<std::unique_ptr<engine::BlasTuner>> tuner =
      engine::BlasTuner::Create(workspace.get(), workspace.size());
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  engine::BlasGemmParams p{.y_dtype = c.f32_out ? DType::kF32 : DType::kBF16,
                           .x = dx.get(),
                           .w = weights[1],
                           .y = c.f32_out ? static_cast<void*>(dy32.get()) : dy16.get(),
                           .m = c.m,
                           .n = c.n,
                           .k = c.k,
                           .beta = c.accumulate ? 1.0f : 0.0f};
  const absl::Status tuned = (*tuner)->Tune(handle, p, weights, nullptr);
  ASSERT_TRUE(tuned.ok()) << tuned;
  EXPECT_NE((*tuner)->Summary().find(std::to_string(c.m) + " x " + std::to_string(c.n)),
            std::string::npos)
      << (*tuner)->Summary();
  if (c.name == "qkv_m128") {  // a layer product on an sm_90 cuBLAS: the search ran
    EXPECT_EQ((*tuner)->Summary().find(", 0 searched"), std::string::npos) << (*tuner)->Summary();
  }
  // The checked run: y reset (tuning accumulated into it, or left it set).
  if (c.accumulate) {
    dy16.Upload(y_init);
  } else {
    dy16.Poison();
    dy32.Poison();
  }
  const absl::Status ran = engine::BlasGemm(handle, p, nullptr, tuner->get());
  ASSERT_TRUE(ran.ok()) << ran;
  if (c.f32_out) {
    EXPECT_ALL_CLOSE(dy32.Download(), y32, (Tolerance{1e-3, 1e-3, 1e-7}));
  } else {
    EXPECT_ALL_CLOSE(ToFloats(dy16.Download()), ToFloats(y16), Tolerance::For(DType::kBF16));
  }
  cublasDestroy(handle);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BlasTunerTest,
    ::testing::Values(TunerCase{"qkv_m128", 128, 6144, 4096, false, false},
                      TunerCase{"o_m32_accumulate", 32, 4096, 4096, true, false},
                      TunerCase{"down_m8_accumulate", 8, 4096, 14336, true, false},
                      TunerCase{"smol_m33", 33, 1536, 576, false, false},
                      TunerCase{"odd_n_m12", 12, 1003, 64, false, false},
                      TunerCase{"lmhead_f32_m16", 16, 49152, 576, false, true}),
    [](const auto& info) { return info.param.name; });

struct SplitCase {
  std::string name;
  int32_t m;
  int64_t n;
  int64_t k;
  int32_t splits;
};

class BlasSplitTest : public ::testing::TestWithParam<SplitCase> {};

TEST_P(BlasSplitTest, PartialsSumToTheProduct) {
  const SplitCase& c = GetParam();
  std::mt19937 rng = SeededRng(std::hash<std::string>()(c.name) & 0xffff, 34);
  std::vector<uint16_t> x = RandomBf16(c.m * c.k, rng);
  std::vector<std::vector<uint16_t>> w;
  for (int i = 0; i < 2; ++i) w.push_back(RandomBf16(c.n * c.k, rng, -0.1f, 0.1f));
  const std::vector<float> want = Fp32Product(x, w[0], c.m, c.n, c.k);
  DeviceBuf<uint16_t> dx(x), dw0(w[0]), dw1(w[1]);
  DeviceBuf<float> dy(static_cast<size_t>(c.splits) * c.m * c.n);
  const std::vector<const void*> weights = {dw0.get(), dw1.get()};
  DeviceBuf<uint8_t> workspace(32 << 20);
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  absl::StatusOr<std::unique_ptr<engine::BlasTuner>> tuner =
      engine::BlasTuner::Create(workspace.get(), workspace.size());
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  const engine::BlasGemmParams p{.y_dtype = DType::kF32,
                                 .x = dx.get(),
                                 .w = dw0.get(),
                                 .y = dy.get(),
                                 .m = c.m,
                                 .n = c.n,
                                 .k = c.k,
                                 .splits = c.splits};
  auto check = [&](const engine::BlasTuner* with) {
    dy.Poison();
    const absl::Status ran = engine::BlasGemm(handle, p, nullptr, with);
    ASSERT_TRUE(ran.ok()) << ran;
    const std::vector<float> slices = dy.Download();
    std::vector<float> sum(want.size(), 0.0f);
    for (int32_t s = 0; s < c.splits; ++s) {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += slices[s * sum.size() + i];
    }
    EXPECT_ALL_CLOSE(sum, want, (Tolerance{1e-3, 1e-3, 1e-7}));
  };
  check(nullptr);  // cuBLAS's strided-batched default
  const absl::Status tuned = (*tuner)->Tune(handle, p, weights, nullptr);
  ASSERT_TRUE(tuned.ok()) << tuned;
  EXPECT_NE((*tuner)->Summary().find(" /" + std::to_string(c.splits) + ":"), std::string::npos)
      << (*tuner)->Summary();
  check(tuner->get());
  cublasDestroy(handle);
}

INSTANTIATE_TEST_SUITE_P(Cases, BlasSplitTest,
                         ::testing::Values(SplitCase{"o_m64_s2", 64, 4096, 4096, 2},
                                           SplitCase{"down_m8_s2", 8, 4096, 14336, 2},
                                           SplitCase{"smol_m33_s3", 33, 576, 1536, 3},
                                           SplitCase{"odd_n_m7_s4", 7, 1003, 256, 4}),
                         [](const auto& info) { return info.param.name; });

TEST(BlasSplitTest, SplitsThatDoNotDivideKAreRefused) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  DeviceBuf<float> y(8 * 64 * 3);
  DeviceBuf<uint16_t> x(8 * 4096), w(64 * 4096);
  const absl::Status status = engine::BlasGemm(handle,
                                               {.y_dtype = DType::kF32,
                                                .x = x.get(),
                                                .w = w.get(),
                                                .y = y.get(),
                                                .m = 8,
                                                .n = 64,
                                                .k = 4096,
                                                .splits = 3},
                                               nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("splits=3"), std::string::npos) << status;
  cublasDestroy(handle);
}

// One product of the cache test: inputs, weights and output on the device.
struct CachedCase {
  std::string name;
  engine::BlasGemmParams params;  // x, y set; w: weights[0]
  std::unique_ptr<DeviceBuf<uint16_t>> x;
  std::vector<std::unique_ptr<DeviceBuf<uint16_t>>> w;
  std::vector<const void*> weights;
  std::vector<uint8_t> y_init;  // NaN bytes, or the bias rows when accumulating
  std::unique_ptr<DeviceBuf<uint8_t>> y;
};

CachedCase MakeCachedCase(std::string name, int32_t m, int64_t n, int64_t k, bool accumulate,
                          bool f32_out, int32_t splits, int num_weights, std::mt19937& rng) {
  CachedCase c;
  c.name = std::move(name);
  c.x = std::make_unique<DeviceBuf<uint16_t>>(RandomBf16(m * k, rng));
  for (int i = 0; i < num_weights; ++i) {
    c.w.push_back(std::make_unique<DeviceBuf<uint16_t>>(RandomBf16(n * k, rng, -0.1f, 0.1f)));
    c.weights.push_back(c.w.back()->get());
  }
  const bool f32 = f32_out || splits > 1;
  const size_t bytes = static_cast<size_t>(splits) * m * n * (f32 ? 4 : 2);
  c.y_init.assign(bytes, 0xFF);
  if (accumulate) {  // BF16 bias rows
    const std::vector<uint16_t> bias = RandomBf16(n, rng);
    for (int32_t r = 0; r < m; ++r) std::memcpy(&c.y_init[r * n * 2], bias.data(), n * 2);
  }
  c.y = std::make_unique<DeviceBuf<uint8_t>>(bytes);
  c.params = {.y_dtype = f32 ? DType::kF32 : DType::kBF16,
              .x = c.x->get(),
              .w = c.weights[0],
              .y = c.y->get(),
              .m = m,
              .n = n,
              .k = k,
              .beta = accumulate ? 1.0f : 0.0f,
              .splits = splits};
  return c;
}

// y reset, then the product with `tuner` (null: cuBLAS's default): y's bytes.
std::vector<uint8_t> RunCachedCase(cublasHandle_t handle, CachedCase& c,
                                   const engine::BlasTuner* tuner) {
  c.y->Upload(c.y_init);
  const absl::Status ran = engine::BlasGemm(handle, c.params, nullptr, tuner);
  EXPECT_TRUE(ran.ok()) << c.name << ": " << ran;
  return c.y->Download();
}

std::vector<float> OutputFloats(const CachedCase& c, const std::vector<uint8_t>& bytes) {
  if (c.params.y_dtype == DType::kF32) {
    std::vector<float> out(bytes.size() / 4);
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
  std::vector<uint16_t> bf16(bytes.size() / 2);
  std::memcpy(bf16.data(), bytes.data(), bytes.size());
  return ToFloats(bf16);
}

// Where two outputs differ bit for bit ("" where they do not).
std::string ByteDifference(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  if (got.size() != want.size()) return "sizes differ";
  size_t differ = 0, first = 0;
  bool all_zero = true;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i] && differ++ == 0) first = i;
    all_zero = all_zero && got[i] == 0;
  }
  if (differ == 0) return "";
  return absl::StrFormat("%d of %d bytes differ, the first at %d%s", differ, got.size(), first,
                         all_zero ? "; the output is all zero" : "");
}

// Choices (and a note) saved with Serialize load into a second tuner with its
// own cuBLASLt handle (the first one still alive), which rebuilds every
// cuBLASLt configuration from the heuristic and runs each product bit for
// bit as the tuning tuner does (the same kernel and configuration sum in the
// same order), without timing; the tuned products themselves match cuBLAS's
// default within rounding. The count of rebuilt structs that equal the
// saved words is printed (information only). A choice whose algorithm the
// heuristic no longer gives is left out (and timed again by Tune); text from
// another context or format, or that is not the tuner's JSON, is refused,
// naming the field.
TEST(BlasTunerCacheTest, LoadedChoicesRunBitForBitAsTuned) {
  std::mt19937 rng = SeededRng(35, 36);
  std::vector<CachedCase> cases;
  cases.push_back(MakeCachedCase("qkv_m32", 32, 6144, 4096, false, false, 1, 3, rng));
  cases.push_back(MakeCachedCase("o_m32_accumulate", 32, 4096, 4096, true, false, 1, 3, rng));
  cases.push_back(MakeCachedCase("down_m8_accumulate", 8, 4096, 14336, true, false, 1, 3, rng));
  cases.push_back(MakeCachedCase("o_m64_s2", 64, 4096, 4096, false, false, 2, 3, rng));
  cases.push_back(MakeCachedCase("lmhead_f32_m16", 16, 49152, 576, false, true, 1, 1, rng));
  DeviceBuf<uint8_t> workspace(32 << 20);
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);

  auto tuner = engine::BlasTuner::Create(workspace.get(), workspace.size());
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  for (CachedCase& c : cases) {
    const absl::Status tuned = (*tuner)->Tune(handle, c.params, c.weights, nullptr);
    ASSERT_TRUE(tuned.ok()) << c.name << ": " << tuned;
  }
  (*tuner)->SetNote(cases[0].params, 3);
  const std::string text = (*tuner)->Serialize();
  const std::string summary = (*tuner)->Summary();
  EXPECT_EQ(summary.find("(cached)"), std::string::npos) << summary;
  int lt_choices = 0;
  for (size_t at = summary.find("cublasLt from"); at != std::string::npos;
       at = summary.find("cublasLt from", at + 1)) {
    ++lt_choices;
  }
  // At least one cuBLASLt configuration to rebuild, or the test shows nothing.
  EXPECT_GT(lt_choices, 0) << summary;

  std::vector<std::vector<uint8_t>> tuned;
  for (CachedCase& c : cases) {
    tuned.push_back(RunCachedCase(handle, c, tuner->get()));
    // The comparison below needs the tuned product to be reproducible, and
    // the product (not zeros): the default's, up to the summation order.
    EXPECT_EQ(ByteDifference(RunCachedCase(handle, c, tuner->get()), tuned.back()), "")
        << c.name << ": the tuned product differs between two runs";
    const std::vector<float> got = OutputFloats(c, tuned.back());
    const std::vector<float> want = OutputFloats(c, RunCachedCase(handle, c, nullptr));
    if (c.params.y_dtype == DType::kF32) {
      EXPECT_ALL_CLOSE(got, want, (Tolerance{1e-3, 1e-3, 1e-7})) << c.name;
    } else {
      EXPECT_ALL_CLOSE(got, want, Tolerance::For(DType::kBF16)) << c.name;
    }
  }

  auto loaded = engine::BlasTuner::Create(workspace.get(), workspace.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  absl::StatusOr<engine::BlasTuner::Loaded> count = (*loaded)->Deserialize(text);
  ASSERT_TRUE(count.ok()) << count.status();
  std::printf(
      "[cache] %zu products, %d chose cuBLASLt; loaded %d, rebuilt %d, of which %d word for word "
      "as saved; %zu left out\n",
      cases.size(), lt_choices, count->products, count->rebuilt, count->rebuilt_identical,
      count->left_out.size());
  for (const std::string& why : count->left_out) ADD_FAILURE() << "left out: " << why;
  EXPECT_EQ(count->products, static_cast<int>(cases.size()));
  EXPECT_EQ(count->rebuilt, lt_choices);
  EXPECT_EQ((*loaded)->Note(cases[0].params), std::optional<int32_t>(3));
  EXPECT_NE((*loaded)->Summary().find("(cached)"), std::string::npos) << (*loaded)->Summary();
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE((*loaded)->Tuned(cases[i].params)) << cases[i].name;
    const std::vector<uint8_t> got = RunCachedCase(handle, cases[i], loaded->get());
    EXPECT_EQ(ByteDifference(got, tuned[i]), "")
        << cases[i].name << ": the loaded tuner's product is not the tuning tuner's\n"
        << "tuned:\n"
        << summary << "loaded:\n"
        << (*loaded)->Summary();
  }

  // A choice whose algorithm the heuristic does not give at its index (here:
  // another id) is left out, and only it.
  nlohmann::json edited = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(edited.is_discarded());
  size_t first_lt = 0;
  while (first_lt < edited["products"].size() && !edited["products"][first_lt].contains("algo")) {
    ++first_lt;
  }
  if (first_lt < edited["products"].size() && edited["products"][first_lt]["algo"].contains("id")) {
    nlohmann::json& algo = edited["products"][first_lt]["algo"];
    algo["id"] = algo["id"].get<int32_t>() + 100000;
    auto third = engine::BlasTuner::Create(workspace.get(), workspace.size());
    ASSERT_TRUE(third.ok()) << third.status();
    absl::StatusOr<engine::BlasTuner::Loaded> partial = (*third)->Deserialize(edited.dump());
    ASSERT_TRUE(partial.ok()) << partial.status();
    EXPECT_EQ(partial->products, static_cast<int>(cases.size()) - 1);
    ASSERT_EQ(partial->left_out.size(), 1u);
    EXPECT_NE(partial->left_out[0].find(absl::StrCat("products[", first_lt, "]")),
              std::string::npos)
        << partial->left_out[0];

    // A missing field is named.
    algo.erase("candidate");
    const absl::Status missing = (*third)->Deserialize(edited.dump()).status();
    EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(
        missing.message().find(absl::StrCat("products[", first_lt, "].algo.candidate is missing")),
        std::string::npos)
        << missing;
  }

  std::string elsewhere = text;
  const std::string context = (*loaded)->Context();
  elsewhere.replace(elsewhere.find(context), context.size(), "cuBLASLt 1 on another card");
  EXPECT_EQ((*loaded)->Deserialize(elsewhere).status().code(),
            absl::StatusCode::kFailedPrecondition);
  nlohmann::json old_format = nlohmann::json::parse(text, nullptr, false);
  old_format["format"] = 1;  // the raw structs: no longer loaded
  const absl::Status old = (*loaded)->Deserialize(old_format.dump()).status();
  EXPECT_EQ(old.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(old.message().find("format 1"), std::string::npos) << old;
  EXPECT_EQ((*loaded)->Deserialize("{ not json").status().code(),
            absl::StatusCode::kInvalidArgument);
  cublasDestroy(handle);
}

TEST(BlasTunerTest, UntunedShapeRunsTheDefault) {
  DeviceBuf<uint8_t> workspace(1 << 20);
  absl::StatusOr<std::unique_ptr<engine::BlasTuner>> tuner =
      engine::BlasTuner::Create(workspace.get(), workspace.size());
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  absl::StatusOr<bool> ran = (*tuner)->TryRun({.m = 8, .n = 64, .k = 64}, nullptr);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_FALSE(*ran);
}

}  // namespace
}  // namespace onecard::testing
