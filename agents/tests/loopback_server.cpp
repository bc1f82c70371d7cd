#include "agents/tests/loopback_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace ptxevo::agents::test {
namespace {

// Waits up to `ms` for `fd` to become readable; false on timeout or stop.
// ms < 0: until `stop`.
bool wait_readable(int fd, int ms, const std::atomic<bool>& stop) {
  for (int waited = 0; (ms < 0 || waited < ms) && !stop.load(); waited += ms < 0 ? 0 : 20) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) > 0) return true;
  }
  return false;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

void send_all(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;  // the client went away; the test will notice
    sent += static_cast<std::size_t>(n);
  }
}

}  // namespace

LoopbackServer::LoopbackServer(std::vector<ScriptedResponse> script,
                               std::function<void(const ReceivedRequest&)> on_request)
    : script_(std::move(script)), on_request_(std::move(on_request)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 8) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("bind/listen on 127.0.0.1 failed");
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { run(); });
}

LoopbackServer::~LoopbackServer() {
  stop_.store(true);
  thread_.join();
  ::close(listen_fd_);
}

std::vector<ReceivedRequest> LoopbackServer::requests() {
  std::lock_guard lock(mutex_);
  return received_;
}

void LoopbackServer::run() {
  std::vector<bool> used(script_.size(), false);
  for (std::size_t served = 0; served < script_.size(); ++served) {
    // Wait for the next client until the test ends: a campaign may build for a while between
    // calls, and a server that gave up would leave its calls hanging in the listen backlog.
    if (!wait_readable(listen_fd_, -1, stop_)) return;
    const int client = ::accept(listen_fd_, nullptr, nullptr);
    if (client < 0) return;
    serve(client, used);
    ::close(client);
  }
}

namespace {

// The text of a chat request's last message (OpenAI or Anthropic shape; string or text blocks).
std::string last_message_text(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("messages") || !j["messages"].is_array() || j["messages"].empty()) return {};
  const auto& content = j["messages"].back().value("content", nlohmann::json());
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (content.is_array())
    for (const auto& block : content)
      if (block.is_object() && block.value("type", std::string()) == "text") text += block.value("text", std::string());
  return text;
}

}  // namespace

void LoopbackServer::serve(int client, std::vector<bool>& used) {
  std::string data;
  char buffer[4096];
  ReceivedRequest request;
  std::size_t header_end = std::string::npos;
  std::size_t content_length = 0;
  bool sent_continue = false;
  while (true) {
    if (header_end != std::string::npos && data.size() >= header_end + 4 + content_length) break;
    if (header_end != std::string::npos && !sent_continue &&
        lower(request.headers["expect"]) == "100-continue") {
      send_all(client, "HTTP/1.1 100 Continue\r\n\r\n");
      sent_continue = true;
    }
    if (!wait_readable(client, 2'000, stop_)) return;
    const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
    if (n <= 0) return;
    data.append(buffer, static_cast<std::size_t>(n));
    if (header_end == std::string::npos && (header_end = data.find("\r\n\r\n")) != std::string::npos) {
      const std::string head = data.substr(0, header_end);
      std::size_t line_end = head.find("\r\n");
      const std::string first = head.substr(0, line_end);
      const auto space1 = first.find(' ');
      const auto space2 = first.find(' ', space1 + 1);
      request.method = first.substr(0, space1);
      request.path = first.substr(space1 + 1, space2 - space1 - 1);
      while (line_end != std::string::npos && line_end < head.size()) {
        const std::size_t start = line_end + 2;
        line_end = head.find("\r\n", start);
        const std::string line = head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        request.headers[lower(line.substr(0, colon))] = value;
      }
      if (auto it = request.headers.find("content-length"); it != request.headers.end()) {
        content_length = std::stoul(it->second);
      }
    }
  }
  request.body = data.substr(header_end + 4, content_length);
  {
    std::lock_guard lock(mutex_);
    received_.push_back(request);
  }
  if (on_request_) on_request_(request);
  // The response this request gets: one keyed to it, else the next in order without a key.
  std::size_t pick = script_.size();
  const std::string last = last_message_text(request.body);
  for (std::size_t i = 0; i < script_.size() && pick == script_.size(); ++i)
    if (!used[i] && !script_[i].when.empty() && last.find(script_[i].when) != std::string::npos) pick = i;
  for (std::size_t i = 0; i < script_.size() && pick == script_.size(); ++i)
    if (!used[i] && script_[i].when.empty()) pick = i;
  for (std::size_t i = 0; i < script_.size() && pick == script_.size(); ++i)
    if (!used[i]) pick = i;
  used[pick] = true;
  const ScriptedResponse& response = script_[pick];
  if (response.stall) {
    // Hold the connection open until the client hangs up (its deadline) or the test ends.
    while (wait_readable(client, 5'000, stop_)) {
      if (::recv(client, buffer, sizeof buffer, 0) <= 0) return;
    }
    return;
  }
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " Scripted\r\n";
  out += "Content-Type: application/json\r\nConnection: close\r\n";
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  for (const auto& [name, value] : response.headers) out += name + ": " + value + "\r\n";
  out += "\r\n" + response.body;
  send_all(client, out);
}

}  // namespace ptxevo::agents::test
