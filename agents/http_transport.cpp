#include "agents/http_transport.hpp"

#include <algorithm>
#include <cctype>
#include <memory>
#include <string_view>

#include <curl/curl.h>

namespace ptxevo::agents {
namespace {

struct Sink {
  HttpResponse* response;
  std::size_t max_body_bytes;
  bool overflow = false;
};

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const std::size_t bytes = size * count;
  if (sink->response->body.size() + bytes > sink->max_body_bytes) {
    sink->overflow = true;
    return 0;  // aborts the transfer with CURLE_WRITE_ERROR
  }
  sink->response->body.append(data, bytes);
  return bytes;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const std::size_t bytes = size * count;
  const std::string_view line(data, bytes);
  if (line.rfind("HTTP/", 0) == 0) {
    sink->response->headers.clear();  // a new status line (e.g. after 100 Continue)
    return bytes;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return bytes;
  std::string name(trim(line.substr(0, colon)));
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  sink->response->headers[name] = std::string(trim(line.substr(colon + 1)));
  return bytes;
}

// Non-zero aborts the transfer (CURLE_ABORTED_BY_CALLBACK).
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* cancel = static_cast<const std::atomic<bool>*>(user);
  return cancel->load() ? 1 : 0;
}

struct CurlDeleter {
  void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

}  // namespace

HttpResponse CurlTransport::post(const HttpRequest& request) {
  HttpResponse response;
  std::unique_ptr<CURL, CurlDeleter> handle(curl_easy_init());
  if (!handle) {
    response.error = "curl_easy_init failed";
    return response;
  }
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  for (const auto& [name, value] : request.headers) {
    const std::string line = name + ": " + value;
    curl_slist* appended = curl_slist_append(headers.get(), line.c_str());
    if (appended == nullptr) {
      response.error = "curl_slist_append failed";
      return response;
    }
    static_cast<void>(headers.release());
    headers.reset(appended);
  }
  Sink sink{&response, max_body_bytes_};
  char error_buffer[CURL_ERROR_SIZE] = {};
  CURL* h = handle.get();
  curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM: required for multi-threaded use
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<long long>(1, request.timeout.count())));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::max<long long>(1, request.connect_timeout.count())));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &sink);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  if (request.cancel != nullptr) {
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(request.cancel));
  }

  const CURLcode code = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  if (code != CURLE_OK) {
    // A partial response is not a response: report the transport failure only.
    response.status = 0;
    response.timed_out = code == CURLE_OPERATION_TIMEDOUT;
    response.cancelled = code == CURLE_ABORTED_BY_CALLBACK;
    response.error = sink.overflow ? "response body exceeds " + std::to_string(max_body_bytes_) + " bytes"
                     : error_buffer[0] != '\0' ? std::string(error_buffer)
                                               : std::string(curl_easy_strerror(code));
    return response;
  }
  response.status = static_cast<int>(status);
  return response;
}

}  // namespace ptxevo::agents
