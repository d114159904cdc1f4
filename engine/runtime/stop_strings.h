// StopStringMatcher: finds stop strings in streamed text that arrives in
// pieces (one detokenized token at a time), so a stop string may span tokens.
// Text that could still be the start of a stop string is held back; the stop
// string itself and anything after it are never emitted.
// Tested by tests/engine/runtime/stop_strings_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_STOP_STRINGS_H_
#define ONECARD_ENGINE_RUNTIME_STOP_STRINGS_H_

#include <string>
#include <string_view>
#include <vector>

namespace onecard::engine {

class StopStringMatcher {
 public:
  // Empty stop strings are ignored (Submit rejects them).
  explicit StopStringMatcher(std::vector<std::string> stop_strings);

  // Adds the next piece of text. Sets *emit to the text that is safe to
  // stream now. Returns true when a stop string is complete: *emit then ends
  // just before it, and the matcher holds nothing more.
  bool Push(std::string_view text, std::string* emit);
  // The held-back text, given up at the end of generation (it did not become
  // a stop string).
  std::string TakeHeld();
  const std::string& held() const { return held_; }

 private:
  // Start of the earliest suffix of text that is a proper prefix of a stop
  // string; text.size() when none.
  size_t HoldFrom(std::string_view text) const;

  std::vector<std::string> stop_strings_;
  size_t max_stop_size_ = 0;
  std::string held_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_STOP_STRINGS_H_
