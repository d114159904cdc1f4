// BlasTuner: after tuning a shape over several weights, BlasGemm with the
// tuner (whichever algorithm won: a cuBLASLt one or the default) still
// matches LinearRef, for overwrite (beta 0, y poisoned with NaN first) and
// accumulate (beta 1: y starts as the bias row, so acc + bias is rounded
// once, as LinearRef does), BF16 and F32 outputs, aligned and odd widths;
// the configuration search around the heuristic's choices ran. Split-K
// partials (BlasGemmParams::splits), untuned and tuned: the slices sum to the
// plain fp32 product.
#include "engine/kernels/blas_tuner.h"

#include <cublas_v2.h>

#include <optional>
#include <string>

#include "engine/kernels/linear.h"
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

// Choices (and a note) saved with Serialize load into another tuner, which
// then runs the same products without timing them; text from another
// context or that is not the tuner's JSON is refused, naming why.
TEST(BlasTunerCacheTest, ChoicesSurviveSerializeAndDeserialize) {
  constexpr int32_t kM = 32;
  constexpr int64_t kN = 4096, kK = 4096;
  std::mt19937 rng = SeededRng(35, 36);
  std::vector<uint16_t> x = RandomBf16(kM * kK, rng);
  std::vector<std::vector<uint16_t>> w;
  for (int i = 0; i < 3; ++i) w.push_back(RandomBf16(kN * kK, rng, -0.1f, 0.1f));
  std::vector<uint16_t> want(kM * kN);
  ASSERT_TRUE(engine::LinearRef({.dtype = DType::kBF16,
                                 .x = x.data(),
                                 .weight = w[2].data(),
                                 .y = want.data(),
                                 .num_rows = kM,
                                 .in_features = kK,
                                 .out_features = kN})
                  .ok());
  DeviceBuf<uint16_t> dx(x), dy(want.size());
  std::vector<std::unique_ptr<DeviceBuf<uint16_t>>> dw;
  std::vector<const void*> weights;
  for (const auto& host : w) {
    dw.push_back(std::make_unique<DeviceBuf<uint16_t>>(host));
    weights.push_back(dw.back()->get());
  }
  DeviceBuf<uint8_t> workspace(32 << 20);
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const engine::BlasGemmParams p{
      .x = dx.get(), .w = weights[2], .y = dy.get(), .m = kM, .n = kN, .k = kK};
  std::string text;
  {
    auto tuner = engine::BlasTuner::Create(workspace.get(), workspace.size());
    ASSERT_TRUE(tuner.ok()) << tuner.status();
    ASSERT_TRUE((*tuner)->Tune(handle, p, weights, nullptr).ok());
    (*tuner)->SetNote(p, 3);
    text = (*tuner)->Serialize();
    EXPECT_EQ((*tuner)->Summary().find("(cached)"), std::string::npos);
  }
  auto loaded = engine::BlasTuner::Create(workspace.get(), workspace.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  absl::StatusOr<int> count = (*loaded)->Deserialize(text);
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 1);
  EXPECT_TRUE((*loaded)->Tuned(p));
  EXPECT_EQ((*loaded)->Note(p), std::optional<int32_t>(3));
  EXPECT_NE((*loaded)->Summary().find("(cached)"), std::string::npos) << (*loaded)->Summary();
  dy.Poison();
  const absl::Status ran = engine::BlasGemm(handle, p, nullptr, loaded->get());
  ASSERT_TRUE(ran.ok()) << ran;
  EXPECT_ALL_CLOSE(ToFloats(dy.Download()), ToFloats(want), Tolerance::For(DType::kBF16));

  std::string elsewhere = text;
  const std::string context = (*loaded)->Context();
  elsewhere.replace(elsewhere.find(context), context.size(), "cuBLASLt 1 on another card");
  EXPECT_EQ((*loaded)->Deserialize(elsewhere).status().code(),
            absl::StatusCode::kFailedPrecondition);
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
