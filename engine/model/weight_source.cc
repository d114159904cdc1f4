// TensorView helpers. Tested through the loaders' tests
// (tests/engine/model/gguf_test.cc, safetensors_test.cc).
#include "engine/model/weight_source.h"

namespace onecard::engine {

int64_t TensorView::NumElements() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

}  // namespace onecard::engine
