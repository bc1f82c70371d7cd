#include "evaluator/gpu_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace ptxevo::evaluator {
namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

GpuLock::GpuLock(int device) {
  const char* dir = std::getenv("PTXEVO_GPU_LOCK_DIR");
  path_ = std::string(dir && *dir ? dir : "/tmp") + "/ptxevo-gpu-" + std::to_string(device) + ".lock";
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) throw std::runtime_error("cannot open the GPU lock " + path_ + ": " + std::strerror(errno));
}

GpuLock::~GpuLock() {
  if (held_) unlock();
  if (fd_ >= 0) close(fd_);
}

void GpuLock::lock() {
  if (held_) return;
  while (flock(fd_, LOCK_EX) != 0)
    if (errno != EINTR) throw std::runtime_error("cannot take the GPU lock " + path_ + ": " + std::strerror(errno));
  held_ = true;
  since_ = now_s();
}

void GpuLock::unlock() {
  if (!held_) return;
  held_s_ += now_s() - since_;
  flock(fd_, LOCK_UN);
  held_ = false;
}

}  // namespace ptxevo::evaluator
