// HttpExchange (see http_exchange.h). Tested by tests/router/http_server_test.cc.
#include "router/http_exchange.h"

#include <utility>

namespace onecard::router {

std::shared_ptr<HttpExchange> HttpExchange::Start(RouterCore* core, ClientInfo client,
                                                  onecard::v1::GenerateRequest request,
                                                  absl::Status parsed) {
  std::shared_ptr<HttpExchange> exchange(new HttpExchange());
  exchange->call_ = new GenerateCall(core, exchange.get(), std::move(client), std::move(request),
                                     std::move(parsed));
  {
    absl::MutexLock lock(&exchange->mu_);
    exchange->self_ = exchange;
  }
  exchange->CallIn([&exchange] { exchange->call_->Start(); });
  return exchange;
}

HttpExchange::Event HttpExchange::Next() {
  std::optional<Event> event;
  while (!event.has_value()) event = NextFor(absl::InfiniteDuration());
  return *std::move(event);
}

std::optional<HttpExchange::Event> HttpExchange::NextFor(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return chunk_.has_value() || end_.has_value();
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) return std::nullopt;
  if (chunk_.has_value()) {
    Event event{std::move(chunk_), absl::OkStatus()};
    chunk_.reset();
    return event;
  }
  return Event{std::nullopt, *end_};
}

void HttpExchange::Sent(bool ok) {
  CallIn([this, ok] { call_->OnWriteDone(ok); });
}

void HttpExchange::Cancel() {
  CallIn([this] { call_->OnClientCancel(); });
}

void HttpExchange::Send(const onecard::v1::GenerateResponse& chunk) {
  absl::MutexLock lock(&mu_);
  chunk_ = chunk;
}

void HttpExchange::End(const absl::Status& status) {
  std::shared_ptr<HttpExchange> keep;  // may be the last reference: released on return
  bool release;
  {
    absl::MutexLock lock(&mu_);
    end_ = status;
    release = TakeRelease();
    keep = std::move(self_);
  }
  if (release) call_->Release();
}

template <typename Fn>
void HttpExchange::CallIn(Fn fn) {
  {
    absl::MutexLock lock(&mu_);
    if (end_.has_value() || released_) return;
    ++busy_;
  }
  fn();
  bool release;
  {
    absl::MutexLock lock(&mu_);
    --busy_;
    release = TakeRelease();
  }
  if (release) call_->Release();
}

bool HttpExchange::TakeRelease() {
  if (!end_.has_value() || busy_ > 0 || released_) return false;
  released_ = true;
  return true;
}

}  // namespace onecard::router
