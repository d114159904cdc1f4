// FinishReasonName (declared in engine.h). Tested by
// tests/engine/runtime/engine_impl_test.cc.
#include "engine/runtime/engine.h"

namespace onecard::engine {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kStopString:
      return "stop_string";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kDeadline:
      return "deadline";
    case FinishReason::kPreempted:
      return "preempted";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

}  // namespace onecard::engine
