// ExpectAllClose: compares a computed float array with its reference and, on
// failure, reports max abs/rel error, NMSE and the first mismatches. One
// tolerance table per dtype (Tolerance::For). Tested by its users.
#ifndef ONECARD_TESTS_TESTING_ALL_CLOSE_H_
#define ONECARD_TESTS_TESTING_ALL_CLOSE_H_

#include <cstdint>
#include <span>
#include <string>

#include "engine/common/dtype.h"
#include "gtest/gtest.h"

namespace onecard::testing {

struct Tolerance {
  double atol = 1e-5;
  double rtol = 1e-5;
  double max_nmse = 1e-10;
  // fp32 math: ~1e-5; bf16 operands: ~1e-2 relative; fp16: ~2e-3.
  static Tolerance For(engine::DType dtype);
};

struct CloseReport {
  double max_abs_err = 0;
  double max_rel_err = 0;
  double nmse = 0;  // sum (a-b)^2 / sum b^2
  int64_t num_mismatches = 0;
  std::string first_mismatches;  // "i=.. got=.. want=..; ..."
};

CloseReport CompareAll(std::span<const float> got, std::span<const float> want,
                       const Tolerance& tol);

::testing::AssertionResult AllClose(std::span<const float> got,
                                    std::span<const float> want,
                                    const Tolerance& tol);

#define EXPECT_ALL_CLOSE(got, want, tol) \
  EXPECT_TRUE(::onecard::testing::AllClose((got), (want), (tol)))

// Path of a file under the source tree (tests run from the source root, but
// ONECARD_SOURCE_DIR wins when set).
std::string SourcePath(const std::string& relative);

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_TESTING_ALL_CLOSE_H_
