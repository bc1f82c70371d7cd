// A tiny scripted HTTP/1.1 server for the client's end-to-end tests: binds 127.0.0.1 on an
// ephemeral port and serves one scripted response per connection, in order (or, for a response
// with `when`, to the request it names), recording what it received. Loopback only, by
// construction.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ptxevo::agents::test {

struct ScriptedResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool stall = false;  // read the request, then never answer (until the client gives up)
  // Served to the first request whose last message contains this text (a fixer's turn quotes
  // its error), whatever its place; responses without it are served in order to the rest.
  std::string when{};
};

struct ReceivedRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

class LoopbackServer {
 public:
  // `on_request` runs on the server's thread for each request, before it is answered: the
  // client (a campaign) is blocked in its call, so the hook sees the caller's state at the call.
  explicit LoopbackServer(std::vector<ScriptedResponse> script,
                          std::function<void(const ReceivedRequest&)> on_request = {});
  ~LoopbackServer();
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  [[nodiscard]] std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] std::vector<ReceivedRequest> requests();

 private:
  void run();
  void serve(int client, std::vector<bool>& used);

  std::vector<ScriptedResponse> script_;
  std::function<void(const ReceivedRequest&)> on_request_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<ReceivedRequest> received_;
  std::thread thread_;
};

}  // namespace ptxevo::agents::test
