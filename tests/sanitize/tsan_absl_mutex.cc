// TSan's view of absl::Mutex for scripts/sanitize.sh: Debian's Abseil is not
// built with -fsanitize=thread, so TSan cannot see that absl::Mutex orders
// the accesses it guards, and reports a race between two accesses made under
// the same mutex. This library, LD_PRELOADed into the TSan test processes
// (and the services they start), interposes absl::Mutex's and
// absl::CondVar's public entry points: each calls the real one
// (dlsym(RTLD_NEXT)) and tells TSan of the ordering with __tsan_acquire /
// __tsan_release on the mutex's address, as Abseil's own TSan annotations
// would:
//   Lock, ReaderLock, TryLock (held), LockWhen...: acquire after
//   Unlock, ReaderUnlock: release before
//   Await..., CondVar::Wait...: release before, acquire after (the mutex is
//   given up while waiting)
// Built as a shared library by scripts/sanitize.sh; not part of the CMake
// build.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);

namespace {

template <typename Fn>
Fn Real(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    std::fprintf(stderr, "tsan_absl_mutex: %s not found\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

#define ONECARD_REAL(type, mangled) static const auto real = Real<type>(mangled)

void Mutex::Lock() {
  ONECARD_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  ONECARD_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  ONECARD_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  const bool held = real(this);
  if (held) __tsan_acquire(this);
  return held;
}

bool Mutex::ReaderTryLock() {
  ONECARD_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const bool held = real(this);
  if (held) __tsan_acquire(this);
  return held;
}

void Mutex::Unlock() {
  ONECARD_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  ONECARD_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  ONECARD_REAL(void (*)(Mutex*, const Condition&),
               "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  ONECARD_REAL(void (*)(Mutex*, const Condition&),
               "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  ONECARD_REAL(bool (*)(Mutex*, const Condition&, Duration),
               "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = real(this, cond, timeout);
  __tsan_acquire(this);  // held either way
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  ONECARD_REAL(bool (*)(Mutex*, const Condition&, Time),
               "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const bool met = real(this, cond, deadline);
  __tsan_acquire(this);
  return met;
}

void Mutex::Await(const Condition& cond) {
  ONECARD_REAL(void (*)(Mutex*, const Condition&),
               "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  ONECARD_REAL(bool (*)(Mutex*, const Condition&, Duration),
               "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  const bool met = real(this, cond, timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  ONECARD_REAL(bool (*)(Mutex*, const Condition&, Time),
               "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  const bool met = real(this, cond, deadline);
  __tsan_acquire(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  ONECARD_REAL(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  ONECARD_REAL(bool (*)(CondVar*, Mutex*, Duration),
               "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  ONECARD_REAL(bool (*)(CondVar*, Mutex*, Time),
               "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

ABSL_NAMESPACE_END
}  // namespace absl
