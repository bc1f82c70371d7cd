// A process's place in an MPI job: rank, size, host and rank on its host. Created only when an
// MPI launcher (mpirun, srun) started the process; run alone, the binary never initialises MPI
// and works as without it. All MPI calls of a process go through one thread at a time
// (MPI_THREAD_SERIALIZED): rank 0's hub thread, or a worker's main loop.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/wire.hpp"

namespace ptxevo::cluster {

class Session {
 public:
  // A session when the environment says an MPI launcher started this process (Open MPI's
  // OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK, Slurm's PMI_SIZE / SLURM_STEP_NUM_TASKS with PMI);
  // nullptr otherwise. Throws std::runtime_error when MPI cannot initialise.
  static std::unique_ptr<Session> join_if_launched(int* argc, char*** argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // among the ranks on this host
  const std::string& host() const { return host_; }

  // A rank was lost: finishing must not call MPI_Finalize, which waits for every rank.
  void mark_lost() { lost_ = true; }
  bool lost() const { return lost_; }
  // Rank 0: the workers were told to stop (by the hub). finish() tells them itself otherwise,
  // e.g. after an error before the campaign started.
  void mark_workers_stopped() { workers_stopped_ = true; }
  // The end of the process: MPI_Finalize when no rank was lost. Otherwise flush and exit at once
  // with `rc`; rank 0 ends the whole job (MPI_Abort) so that a hung rank cannot keep it alive.
  int finish(int rc);

  // Non-blocking point-to-point, from the one thread that speaks MPI.
  void send(int rank, Tag tag, Bytes bytes);  // buffered until delivered; never blocks
  struct Incoming {
    int source = 0;
    Tag tag = kHello;
    Bytes bytes;
  };
  std::optional<Incoming> receive();  // from any rank, if one is waiting
  void progress();                    // completes sends; frees their buffers

 private:
  Session() = default;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  std::string host_;
  bool lost_ = false;
  bool finished_ = false;
  bool workers_stopped_ = false;
  struct Outgoing;
  std::vector<std::unique_ptr<Outgoing>> outgoing_;
};

}  // namespace ptxevo::cluster
