// HTTP POST for the chat client. An interface so unit tests can substitute a scripted one, plus the
// libcurl implementation.
//
// libcurl requires curl_global_init(CURL_GLOBAL_DEFAULT) to run once, before any other thread
// starts, and curl_global_cleanup() at exit. That is the caller's job (cli's main; the tests do
// it in a gtest Environment): the library keeps no global state.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ptxevo::agents {

struct HttpRequest {
  std::string url;
  // Name/value pairs. May carry the API key: never log this vector.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds timeout{600'000};         // whole transfer (CURLOPT_TIMEOUT_MS)
  std::chrono::milliseconds connect_timeout{5'000};  // CURLOPT_CONNECTTIMEOUT_MS
  // When set and true, the transfer is aborted within about a second (curl's progress callback):
  // a campaign stopping on Ctrl-C does not wait out a slow model.
  const std::atomic<bool>* cancel = nullptr;
};

struct HttpResponse {
  int status = 0;                              // 0: no HTTP response (see error)
  std::map<std::string, std::string> headers;  // names lower-cased; last value wins
  std::string body;
  std::string error;       // empty on success; the transport's description otherwise
  bool timed_out = false;  // the deadline or the connect timeout expired
  bool cancelled = false;  // HttpRequest::cancel turned true
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  // Must be safe to call from several threads at once.
  virtual HttpResponse post(const HttpRequest& request) = 0;
};

// One CURL easy handle per call, so concurrent calls share nothing. Redirects stay off (a 3xx
// must not forward the key elsewhere), TLS verification stays on, only http/https are allowed,
// and response bodies are capped.
class CurlTransport final : public HttpTransport {
 public:
  explicit CurlTransport(std::size_t max_body_bytes = 4U << 20U) : max_body_bytes_(max_body_bytes) {}
  HttpResponse post(const HttpRequest& request) override;

 private:
  std::size_t max_body_bytes_;
};

}  // namespace ptxevo::agents
