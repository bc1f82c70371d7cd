// Where a campaign's timings come from: a GPU worker (real builds, real gate, real timing) or a
// replay of measurements recorded earlier on a real GPU. Both take the same batch and answer one
// report per candidate; a replay answers "unmeasured" for a candidate it has no record of.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "evaluator/eval_types.hpp"
#include "evaluator/runner.hpp"
#include "search/replay.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::search {

struct MeasureItem {
  std::string genome_hash;
  std::string ptx_hash;
  evaluator::Knobs knobs;
  std::vector<std::uint8_t> cubin;
};

class Measurer {
 public:
  virtual ~Measurer() = default;
  virtual std::string mode() const = 0;  // "gpu" or "replay"
  virtual tracedb::Environment environment() const = 0;
  // How many distinct candidates it can measure at most (0: no limit). A replay knows only its record.
  virtual std::int64_t capacity() const { return 0; }
  // The GPU it measures on (-1 for a replay); several measurers may share one.
  virtual int device() const { return -1; }
  // One report per item, in order. `common` holds the op, shapes, baseline and gate options.
  virtual std::vector<evaluator::EvalReport> measure(const evaluator::EvalRequest& common,
                                                     const std::vector<MeasureItem>& items) = 0;
  // From another thread, at a campaign's deadline: give up what is in flight; it and every later
  // call answer "not-run" (reason "abandoned: ..."), so the candidates stay built for a resume.
  virtual void abandon() {}
};

class GpuMeasurer : public Measurer {
 public:
  // `runner` must be available(); `toolchain` goes into the environment row.
  GpuMeasurer(std::unique_ptr<evaluator::Runner> runner, std::string toolchain, int device);
  std::string mode() const override { return "gpu"; }
  tracedb::Environment environment() const override;
  int device() const override { return device_; }
  std::vector<evaluator::EvalReport> measure(const evaluator::EvalRequest& common,
                                             const std::vector<MeasureItem>& items) override;
  int restarts() const { return runner_->restarts(); }
  void abandon() override { runner_->abandon(); }

 private:
  std::unique_ptr<evaluator::Runner> runner_;
  std::string toolchain_;
  int device_ = 0;
};

class ReplayMeasurer : public Measurer {
 public:
  explicit ReplayMeasurer(ReplayData data) : data_(std::move(data)) {}
  std::string mode() const override { return "replay"; }
  tracedb::Environment environment() const override;
  std::int64_t capacity() const override { return static_cast<std::int64_t>(data_.records.size()); }
  std::vector<evaluator::EvalReport> measure(const evaluator::EvalRequest& common,
                                             const std::vector<MeasureItem>& items) override;
  const ReplayData& data() const { return data_; }

 private:
  ReplayData data_;
};

}  // namespace ptxevo::search
