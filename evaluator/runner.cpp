#include "evaluator/runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "evaluator/worker_protocol.hpp"

extern char** environ;

namespace ptxevo::evaluator {
namespace {

constexpr int kWorkerInFd = 3;
constexpr int kWorkerOutFd = 4;

// Waits until `fd` is readable, `seconds` pass or `abandoned` is set (checked every 50 ms).
bool wait_readable(int fd, double seconds, const std::atomic<bool>* abandoned = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    if (abandoned && abandoned->load()) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), abandoned ? 50 : 1000)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return true;  // let the read report the error
  }
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended";
}

}  // namespace

Runner::~Runner() { stop(false); }

bool Runner::start(std::string* reason) {
  int req[2], resp[2];
  if (pipe2(req, O_CLOEXEC) != 0) {
    *reason = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  if (pipe2(resp, O_CLOEXEC) != 0) {
    close(req[0]);
    close(req[1]);
    *reason = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, req[0], kWorkerInFd);
  posix_spawn_file_actions_adddup2(&fa, resp[1], kWorkerOutFd);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  const std::string dev = std::to_string(opt_.device);
  std::vector<std::string> args = {opt_.worker_exe, "worker", "--device", dev,
                                   "--in-fd", std::to_string(kWorkerInFd), "--out-fd", std::to_string(kWorkerOutFd)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The worker gets a process group of its own and SIGINT/SIGTERM at their defaults: a Ctrl-C
  // at the terminal reaches the engine alone, which stops cleanly and lets the batches in flight
  // finish; only the engine ever ends a worker.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  const int rc = posix_spawn(&pid_, opt_.worker_exe.c_str(), &fa, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  close(req[0]);
  close(resp[1]);
  if (rc != 0) {
    close(req[1]);
    close(resp[0]);
    pid_ = -1;
    *reason = "cannot start worker '" + opt_.worker_exe + "': " + std::strerror(rc);
    return false;
  }
  to_worker_ = req[1];
  from_worker_ = resp[0];
  // Writing to a worker that died must return an error, not kill the engine.
  signal(SIGPIPE, SIG_IGN);
  std::string err;
  if (!wait_readable(from_worker_, 120)) {
    stop(true);
    *reason = "the GPU worker did not start within 120 s";
    return false;
  }
  auto hello = read_message(from_worker_, &err);
  if (!hello || !hello->header.value("ready", false)) {
    *reason = hello ? hello->header.value("reason", std::string("worker not ready")) : "GPU worker failed to start: " + err;
    stop(true);
    return false;
  }
  device_ = hello->header.value("device", nlohmann::json::object());
  return true;
}

void Runner::stop(bool force) {
  if (to_worker_ >= 0) close(to_worker_);
  if (from_worker_ >= 0) close(from_worker_);
  to_worker_ = from_worker_ = -1;
  if (pid_ > 0) {
    if (force) kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

bool Runner::available(std::string* reason) {
  if (pid_ > 0) return true;
  if (!unavailable_.empty()) {
    *reason = unavailable_;
    return false;
  }
  if (start(reason)) return true;
  unavailable_ = *reason;
  return false;
}

// Sends one message and waits for the report(s). On a crash or timeout `failure` holds the
// verdict and reason for every candidate of the message, and the worker is gone.
std::optional<Message> Runner::exchange(const Message& m, double timeout_s, EvalReport* failure) {
  std::string reason;
  const auto abandon_failure = [&] {
    failure->verdict = "not-run";
    failure->reasons.push_back("abandoned: the campaign reached its deadline while this was in flight; it stays "
                               "built and a resumed campaign measures it");
    return std::nullopt;
  };
  if (abandoned_.load()) return abandon_failure();
  if (pid_ <= 0 && !start(&reason)) {
    failure->verdict = "not-run";
    failure->reasons.push_back("no-gpu: " + reason);
    return std::nullopt;
  }
  if (!write_message(to_worker_, m)) {
    stop(true);
    ++restarts_;
    failure->verdict = "fault";
    failure->reasons.push_back("worker-crashed: the GPU worker closed its input before the request was sent");
    return std::nullopt;
  }
  if (!wait_readable(from_worker_, timeout_s, &abandoned_)) {
    stop(true);
    ++restarts_;
    if (abandoned_.load()) return abandon_failure();
    failure->verdict = "timeout";
    failure->reasons.push_back("timeout: no result within " + std::to_string(static_cast<int>(timeout_s)) +
                               " s (a kernel hung or ran far too long); the worker was killed and will restart");
    return std::nullopt;
  }
  std::string err;
  auto reply = read_message(from_worker_, &err);
  if (!reply) {
    int status = 0;
    const pid_t dead = pid_;
    close(to_worker_);
    close(from_worker_);
    to_worker_ = from_worker_ = -1;
    waitpid(dead, &status, 0);
    pid_ = -1;
    ++restarts_;
    failure->verdict = "fault";
    failure->reasons.push_back("worker-crashed: the GPU worker " + describe_status(status) + " (" + err + ")");
    return std::nullopt;
  }
  if (reply->header.value("exiting", false)) {
    // The worker reported a sticky CUDA error and is ending: reap it, restart next time.
    stop(false);
    ++restarts_;
  }
  return reply;
}

EvalReport Runner::evaluate(const EvalRequest& req) {
  Message m;
  m.header = {{"type", "evaluate"}, {"request", to_json(req)}};
  m.blobs = {req.candidate_cubin, req.baseline_cubin};
  EvalReport failure;
  auto reply = exchange(m, opt_.timeout_s, &failure);
  if (!reply) return failure;
  return report_from_json(reply->header.at("report"));
}

std::vector<EvalReport> Runner::evaluate_batch(const BatchEvalRequest& req) {
  const std::size_t n = req.cubins.size();
  if (n == 0) return {};
  Message m;
  nlohmann::json knobs = nlohmann::json::array();
  for (const auto& k : req.knobs) knobs.push_back(knobs_to_json(k));
  m.header = {{"type", "evaluate_batch"}, {"request", to_json(req.common)}, {"candidates", knobs}};
  m.blobs.push_back(req.common.baseline_cubin);
  for (const auto& c : req.cubins) m.blobs.push_back(c);
  EvalReport failure;
  // The watchdog scales with the batch: each candidate gets the single-evaluation limit.
  auto reply = exchange(m, opt_.timeout_s * static_cast<double>(n), &failure);
  const bool whole_batch_failed =
      !reply || reply->header.value("type", std::string()) != "reports" || reply->header.value("exiting", false);
  if (!whole_batch_failed) {
    std::vector<EvalReport> out;
    for (const auto& r : reply->header.at("reports")) out.push_back(report_from_json(r));
    if (out.size() == n) return out;
  }
  if (failure.verdict == "not-run") return std::vector<EvalReport>(n, failure);
  // A sticky fault, crash or hang of one candidate took the batch down. Run each candidate on
  // its own so the culprit is named and the others still count.
  std::vector<EvalReport> out;
  for (std::size_t i = 0; i < n; ++i) {
    EvalRequest one = req.common;
    one.candidate_knobs = req.knobs[i];
    one.candidate_cubin = req.cubins[i];
    out.push_back(evaluate(one));
  }
  return out;
}

}  // namespace ptxevo::evaluator
