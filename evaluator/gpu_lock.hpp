// An advisory lock on one GPU shared by the worker processes that measure on it. A worker holds
// it while the GPU works for it (gate runs, timing) and releases it for host-side work (inputs,
// fp64 references), so two workers per GPU keep the GPU busy while each prepares its next shape,
// and no timing ever overlaps another worker's kernels.
#pragma once

#include <string>

namespace ptxevo::evaluator {

class GpuLock {
 public:
  // /tmp/ptxevo-gpu-<device>.lock (or $PTXEVO_GPU_LOCK_DIR/...); the file is created if needed.
  explicit GpuLock(int device);
  ~GpuLock();
  GpuLock(const GpuLock&) = delete;
  GpuLock& operator=(const GpuLock&) = delete;

  void lock();    // blocks until held
  void unlock();
  bool held() const { return held_; }
  // Seconds this process has held the lock so far: the GPU time spent on its work.
  double held_seconds() const { return held_s_; }

  class Guard {
   public:
    explicit Guard(GpuLock& l) : l_(l) { l_.lock(); }
    ~Guard() { l_.unlock(); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    GpuLock& l_;
  };

 private:
  int fd_ = -1;
  bool held_ = false;
  double held_s_ = 0;
  double since_ = 0;
  std::string path_;
};

}  // namespace ptxevo::evaluator
