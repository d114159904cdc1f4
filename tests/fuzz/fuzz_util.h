// Helpers of the fuzz targets (tests/fuzz/*_fuzz.cc): the input written to a
// per-process scratch file (for readers that take a path and map the file),
// and the SmolLM2 tokenizer loaded once (models/, from scripts/fetch-model.sh,
// relative to the repository root the fuzzers run from).
#ifndef ONECARD_TESTS_FUZZ_FUZZ_UTIL_H_
#define ONECARD_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/model/weight_source.h"
#include "engine/tokenizer/tokenizer.h"

namespace onecard::fuzz {

// Writes data to <TMPDIR or /tmp>/onecard-fuzz-<pid>-<name> and returns the path.
std::string WriteScratchFile(const std::string& name, const uint8_t* data, size_t size);

// Touches every tensor view of `source` at both ends (an out-of-bounds view
// faults or trips ASan) and dequantizes the small ones.
void TouchTensors(const engine::WeightSource& source);

// The tokenizer of models/SmolLM2-135M-Instruct.Q4_1.gguf; aborts with a
// message when the model is missing (a setup error, not a finding).
const engine::Tokenizer& SmolLm2Tokenizer();

}  // namespace onecard::fuzz

#endif  // ONECARD_TESTS_FUZZ_FUZZ_UTIL_H_
