// kPendingToken: the token id that stands for a token a step in flight has
// not sampled yet (the engine's look-ahead, EngineOptions::async_scheduling).
// The scheduler keeps it in a sequence's tokens until the step's result comes
// back (Scheduler::AppendPendingToken); a runner's LaunchSample reads it as
// "the token the previous launched step sampled for this sequence"
// (engine/runtime/model_runner.h).
#ifndef ONECARD_ENGINE_COMMON_PENDING_TOKEN_H_
#define ONECARD_ENGINE_COMMON_PENDING_TOKEN_H_

#include <cstdint>

namespace onecard::engine {

inline constexpr int32_t kPendingToken = -1;

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_COMMON_PENDING_TOKEN_H_
