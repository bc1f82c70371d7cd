#include "cluster/session.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <stdexcept>

namespace ptxevo::cluster {

struct Session::Outgoing {
  Bytes bytes;
  MPI_Request request = MPI_REQUEST_NULL;
};

namespace {

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string("MPI: ") + what + ": " + std::string(text, static_cast<std::size_t>(len)));
}

}  // namespace

std::unique_ptr<Session> Session::join_if_launched(int* argc, char*** argv) {
  if (!launched_by_mpi()) return nullptr;
  int provided = 0;
  check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "init");
  if (provided < MPI_THREAD_SERIALIZED) throw std::runtime_error("MPI: this MPI library does not allow calls from a thread other than main");
  // A lost rank must come back as an error code to whoever talks to it, never abort the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::unique_ptr<Session> s(new Session());
  MPI_Comm_rank(MPI_COMM_WORLD, &s->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &s->size_);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, s->rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &s->local_rank_);
  MPI_Comm_free(&node);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  s->host_.assign(name, static_cast<std::size_t>(len));
  return s;
}

Session::~Session() {
  if (!finished_) finish(0);
}

int Session::finish(int rc) {
  if (finished_) return rc;
  finished_ = true;
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  if (rank_ == 0 && !workers_stopped_) {
    const Bytes stop = pack({{"id", 0}, {"body", {{"finalize", !lost_}}}});
    for (int r = 1; r < size_; ++r) send(r, kStop, stop);
  }
  if (lost_) {
    // MPI_Finalize would wait for the lost rank. Rank 0 ends the job: a rank that hangs (rather
    // than died) would otherwise keep the launcher waiting. Everything is recorded by now.
    if (rank_ == 0) {
      std::cerr << "MPI: a rank was lost; rank 0 ends the job with MPI_Abort (the campaign is complete and recorded)"
                << std::endl;
      ::usleep(200 * 1000);  // the survivors' own exits first
      MPI_Abort(MPI_COMM_WORLD, rc);
    }
    ::_exit(rc);
  }
  // Sends still pending go to ranks that are alive; wait for them, then finalize.
  for (auto& o : outgoing_) MPI_Wait(&o->request, MPI_STATUS_IGNORE);
  outgoing_.clear();
  MPI_Finalize();
  return rc;
}

void Session::send(int rank, Tag tag, Bytes bytes) {
  // MPI counts in int: a message past 2 GiB (thousands of cubins in one batch) must not wrap.
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::runtime_error("MPI: a message of " + std::to_string(bytes.size()) + " bytes to rank " +
                             std::to_string(rank) + " is over MPI's 2 GiB limit; use smaller batches (--batch)");
  auto o = std::make_unique<Outgoing>();
  o->bytes = std::move(bytes);
  check(MPI_Isend(o->bytes.data(), static_cast<int>(o->bytes.size()), MPI_BYTE, rank, tag, MPI_COMM_WORLD, &o->request),
        "send");
  outgoing_.push_back(std::move(o));
}

void Session::progress() {
  for (auto it = outgoing_.begin(); it != outgoing_.end();) {
    int done = 0;
    if (MPI_Test(&(*it)->request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 1;  // the peer is gone
    it = done ? outgoing_.erase(it) : it + 1;
  }
}

std::optional<Session::Incoming> Session::receive() {
  int flag = 0;
  MPI_Status st;
  if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS || !flag) return std::nullopt;
  int count = 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
  Incoming in;
  in.source = st.MPI_SOURCE;
  in.tag = static_cast<Tag>(st.MPI_TAG);
  in.bytes.resize(static_cast<std::size_t>(count));
  check(MPI_Recv(in.bytes.data(), count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
        "receive");
  return in;
}

}  // namespace ptxevo::cluster
