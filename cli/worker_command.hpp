// `ptxevo worker`: the GPU worker process the runner starts (not for direct use).
#pragma once

namespace ptxevo::cli {

int run_worker(int device, int in_fd, int out_fd);

}  // namespace ptxevo::cli
