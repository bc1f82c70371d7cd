#include "evaluator/worker_protocol.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ptxevo::evaluator {
namespace {

// Frames larger than this are refused rather than allocated (a corrupt length field).
constexpr std::uint64_t kMaxFrame = std::uint64_t{1} << 33;

bool write_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// 1: ok, 0: clean end of stream before any byte, -1: error or truncated.
int read_all(int fd, void* p, std::size_t n) {
  char* c = static_cast<char*>(p);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, c + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return got == 0 ? 0 : -1;
    if (r < 0) return -1;
    got += static_cast<std::size_t>(r);
  }
  return 1;
}

}  // namespace

bool write_message(int fd, const Message& m) {
  const std::string text = m.header.dump();
  const std::uint64_t len = text.size();
  const std::uint32_t nblobs = static_cast<std::uint32_t>(m.blobs.size());
  if (!write_all(fd, &len, sizeof len) || !write_all(fd, text.data(), text.size()) ||
      !write_all(fd, &nblobs, sizeof nblobs))
    return false;
  for (const auto& b : m.blobs) {
    const std::uint64_t bl = b.size();
    if (!write_all(fd, &bl, sizeof bl) || !write_all(fd, b.data(), b.size())) return false;
  }
  return true;
}

std::optional<Message> read_message(int fd, std::string* error) {
  auto fail = [&](const char* why) -> std::optional<Message> {
    if (error) *error = why;
    return std::nullopt;
  };
  std::uint64_t len = 0;
  const int first = read_all(fd, &len, sizeof len);
  if (first == 0) return fail("end of stream");
  if (first < 0) return fail("truncated message length");
  if (len > kMaxFrame) return fail("message header too large");
  std::string text(len, '\0');
  if (read_all(fd, text.data(), len) != 1) return fail("truncated message header");
  Message m;
  m.header = nlohmann::json::parse(text, nullptr, false);
  if (m.header.is_discarded()) return fail("message header is not JSON");
  std::uint32_t nblobs = 0;
  if (read_all(fd, &nblobs, sizeof nblobs) != 1) return fail("truncated blob count");
  if (nblobs > 64) return fail("too many blobs");
  for (std::uint32_t i = 0; i < nblobs; ++i) {
    std::uint64_t bl = 0;
    if (read_all(fd, &bl, sizeof bl) != 1 || bl > kMaxFrame) return fail("bad blob length");
    std::vector<std::uint8_t> b(bl);
    if (bl && read_all(fd, b.data(), bl) != 1) return fail("truncated blob");
    m.blobs.push_back(std::move(b));
  }
  return m;
}

}  // namespace ptxevo::evaluator
