// A minimal HTTP GET for tests. See http_get.h.
#include "tests/services/testing/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace onecard::testing {
namespace {

class Socket {
 public:
  Socket() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

absl::StatusOr<sockaddr_in> ParseAddress(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  int port = 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (colon == std::string::npos || !absl::SimpleAtoi(host_port.substr(colon + 1), &port) ||
      inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("bad address ", host_port));
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

absl::StatusOr<HttpResponse> ParseResponse(const std::string& raw) {
  const size_t header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos) return absl::DataLossError("no end of HTTP headers");
  std::vector<std::string> lines = absl::StrSplit(raw.substr(0, header_end), "\r\n");
  std::vector<std::string> status_line = absl::StrSplit(lines[0], ' ');
  HttpResponse out;
  if (status_line.size() < 2 || !absl::SimpleAtoi(status_line[1], &out.status_code)) {
    return absl::DataLossError(absl::StrCat("bad status line: ", lines[0]));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    if (absl::StartsWithIgnoreCase(lines[i], "content-type:")) {
      out.content_type =
          std::string(absl::StripAsciiWhitespace(absl::string_view(lines[i]).substr(13)));
    }
  }
  out.body = raw.substr(header_end + 4);
  return out;
}

}  // namespace

absl::StatusOr<HttpResponse> HttpGet(const std::string& host_port, const std::string& path,
                                     absl::Duration timeout) {
  absl::StatusOr<sockaddr_in> addr = ParseAddress(host_port);
  if (!addr.ok()) return addr.status();
  Socket sock;
  if (sock.fd() < 0) return absl::InternalError(std::strerror(errno));
  timeval tv = absl::ToTimeval(timeout);
  setsockopt(sock.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(sock.fd(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (::connect(sock.fd(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("connect ", host_port, ": ", std::strerror(errno)));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host_port, "\r\n\r\n");
  if (::send(sock.fd(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
  }
  std::string raw;
  char buf[16384];
  while (true) {
    const ssize_t n = ::recv(sock.fd(), buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) return absl::DeadlineExceededError(absl::StrCat("recv: ", std::strerror(errno)));
    raw.append(buf, static_cast<size_t>(n));
  }
  return ParseResponse(raw);
}

}  // namespace onecard::testing
