// Fuzz target helpers (see fuzz_util.h).
#include "tests/fuzz/fuzz_util.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model/dequantize.h"
#include "engine/model/gguf.h"

namespace onecard::fuzz {

std::string WriteScratchFile(const std::string& name, const uint8_t* data, size_t size) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                        "/onecard-fuzz-", getpid(), "-", name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

void TouchTensors(const engine::WeightSource& source) {
  volatile uint8_t sink = 0;
  for (const std::string& name : source.TensorNames()) {
    const engine::TensorView* t = source.Find(name);
    if (t == nullptr || t->size_bytes == 0) continue;
    sink = sink + t->data[0] + t->data[t->size_bytes - 1];
    const int64_t n = t->NumElements();
    if (n > 0 && n <= 4096) {
      std::vector<float> out(static_cast<size_t>(n));
      (void)engine::DequantizeInto(*t, out.data());
    }
  }
}

const engine::Tokenizer& SmolLm2Tokenizer() {
  static const engine::Tokenizer* tokenizer = [] {
    const char* path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    absl::StatusOr<std::unique_ptr<engine::GgufFile>> gguf = engine::GgufFile::Open(path);
    if (!gguf.ok()) {
      std::fprintf(stderr, "fuzz: %s (run scripts/fetch-model.sh)\n",
                   gguf.status().ToString().c_str());
      std::abort();
    }
    absl::StatusOr<std::unique_ptr<engine::Tokenizer>> t = engine::Tokenizer::FromGguf(**gguf);
    if (!t.ok()) {
      std::fprintf(stderr, "fuzz: %s\n", t.status().ToString().c_str());
      std::abort();
    }
    return t->release();
  }();
  return *tokenizer;
}

}  // namespace onecard::fuzz
