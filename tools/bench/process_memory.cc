// ResidentBytes (see process_memory.h).
#include "tools/bench/process_memory.h"

#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace onecard::bench {

int64_t ResidentBytes(int pid) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status")
                            : absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view l = line;
    if (!absl::ConsumePrefix(&l, "VmRSS:")) continue;
    l = absl::StripAsciiWhitespace(l);
    absl::ConsumeSuffix(&l, " kB");
    int64_t kb = 0;
    return absl::SimpleAtoi(l, &kb) ? kb * 1024 : 0;
  }
  return 0;
}

}  // namespace onecard::bench
