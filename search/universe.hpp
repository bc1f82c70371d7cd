// A closed candidate universe (issue "Learned prior", the replay proof; docs/prior_study.md 6.2):
// every knob assignment of a grid over the spec's first seed (each knob restricted to a list of its
// values, the others at their defaults), built and screened as a campaign would, and, on a GPU,
// each survivor gated and timed on every benchmark shape against the baseline. Knob moves over the
// grid's value lists never leave it, so a simulated campaign over the universe answers every
// proposal from the record (search/prior_study.hpp). Format "ptxevo-universe-1" (JSON), written
// by `ptxevo universe` after every measured batch, so an interrupted run loses nothing and the
// same command continues it.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "evaluator/builder.hpp"
#include "evaluator/eval_types.hpp"
#include "evaluator/spec.hpp"
#include "search/genome.hpp"
#include "mutators/pass.hpp"
#include "search/measurer.hpp"
#include "search/ptx_profile.hpp"

namespace ptxevo::search {

// One benchmark shape's figures for one candidate, paired against the baseline in one process.
struct UniverseShape {
  evaluator::Shape shape;
  bool passed = true;
  double candidate_ms = 0, candidate_low = 0, candidate_high = 0;  // median and its 95% CI
  double baseline_ms = 0;
  double speedup = 0, speedup_low = 0, speedup_high = 0;  // baseline / candidate, paired, 95% CI
  int samples = 0;
  double fraction_of_floor = 0;
};

struct UniverseMember {
  Genome genome;
  std::string genome_hash;
  std::string build = "pending";  // "ok", "failed" (a build stage), "screened", "pending" (not built yet)
  std::string stage;              // the failing stage, or "screen"
  std::string reason;             // the build error (cut short) or the screen's reasons
  std::string ptx_hash;
  std::vector<evaluator::FunctionResources> resources;  // what cost_features needs
  std::vector<PtxProfile> ptx_profile;  // and its IR columns; empty in files written before them
  double build_seconds = 0;
  std::string verdict = "unmeasured";  // the gate's: "pass", "fail", "fault", "timeout"; or "unmeasured"
  std::vector<std::string> reasons;
  std::optional<double> fitness;       // geometric mean speedup over every benchmark shape
  std::vector<UniverseShape> shapes;   // benchmark shapes, in the spec's order (measured members)
  double eval_seconds = 0;
  bool measured() const { return verdict != "unmeasured"; }
};

struct Universe {
  std::string spec_file, spec_hash, op, arch, seed;
  std::vector<evaluator::KnobSpace> grid;  // the seed's knobs, each with the values it takes here
  // PTX edits (pass + fixed parameters): each knob assignment comes with every subset of them
  // of at most max_edits (-1: any size), applied in this order. Empty: knob genomes only.
  std::vector<PtxEdit> edits;
  int max_edits = -1;
  bool closed = true;  // every assignment of the grid the constraints admit is a member
  std::vector<evaluator::Shape> benchmark_shapes;
  // Provenance: where and when the figures were measured.
  std::string gpu, driver, toolchain, commit, created_at, measured_at;
  // Settings the members were screened and timed with (a campaign's defaults).
  int timing_min_samples = 10;
  double timing_ci_width = 0.01;
  int benchmark_distributions = 1;
  std::int64_t max_spill_bytes = 256;
  // True only for test fixtures whose timings come from a model, never from a GPU.
  bool synthetic = false;
  std::string note;
  std::vector<UniverseMember> members;

  std::size_t measured_count() const;
  std::size_t passing_count() const;
};

// Throws std::runtime_error naming the file and what is wrong with it.
Universe load_universe(const std::filesystem::path& path);
// Atomic (a temporary file renamed over the target).
void write_universe(const std::filesystem::path& path, const Universe& u);

// The grid from `vary` arguments "NAME=v1,v2,..." (values from the seed's list; "NAME" alone:
// all of them); every knob not named keeps only its default, and a named knob always keeps its
// default too (the baseline is a member). Values keep the spec's order, so a neighbour step
// along a knob stays on the grid. Empty `vary`: every knob over its whole list. Returns the
// grid, or sets *error (naming the knob and the value) and returns {}.
std::vector<evaluator::KnobSpace> make_grid(const evaluator::SeedTemplate& seed, const std::vector<std::string>& vary,
                                            std::string* error);
// The seed as the universe knows it: each knob's values and default are the grid's (the universe's
// figures are relative to its own baseline). A knob the grid lacks was added to the spec after
// the universe was made: its members ran without it, at the template's default, which the spec's
// default must be (docs/prior_study.md). It leaves the seed, so genomes match the records, and
// the constraints read its default in its place.
evaluator::SeedTemplate restrict_seed(const evaluator::SeedTemplate& seed, const std::vector<evaluator::KnobSpace>& grid);
// Every assignment of `seed`'s (restricted) knob lists that meets its constraints, in odometer
// order over the knobs as the seed lists them (the last knob fastest).
std::vector<evaluator::Knobs> grid_assignments(const evaluator::SeedTemplate& seed);
// "pass" or "pass:key=value[:key=value...]"; nullopt with *error set for an unknown pass or a
// malformed parameter.
std::optional<PtxEdit> parse_edit(const std::string& text, const mutators::PassRegistry& passes, std::string* error);
// The members' genomes: each assignment with every subset of `edits` of at most `max_edits`
// (-1: any), the edits in the given order; an assignment's subsets follow it, the empty one first.
std::vector<Genome> universe_genomes(const std::string& seed, const std::vector<evaluator::Knobs>& assignments,
                                     const std::vector<PtxEdit>& edits, int max_edits);
// The genome with its edits in a canonical order (sorted by pass, then parameters): two edit
// orders that build the same PTX are one candidate to the study, as a campaign's build key makes
// them one measurement when the passes commute (the universe's edits touch different instructions).
Genome canonical_edits(Genome g);

// A deterministic subset: every `stride`-th (stride > 1), then at most `max` evenly spaced
// (max > 0); the seed's defaults are always kept, first. Unchanged when neither applies.
std::vector<evaluator::Knobs> thin_assignments(const std::vector<evaluator::Knobs>& all, const evaluator::Knobs& defaults,
                                               int stride, int max);

struct UniverseRunOptions {
  int batch = 24;            // candidates per measure() call
  double max_minutes = 0;    // no new batch starts after this (0: no limit); the file stays resumable
  std::string commit;        // provenance
};

struct UniverseRunResult {
  std::size_t built = 0, failed = 0, screened = 0, measured = 0, passed = 0, left = 0;
  // Members built before PTX profiles were recorded, rebuilt to add them: profiled (same PTX
  // as recorded), stale (the PTX differs now: left without, its timings are of the old PTX).
  std::size_t profiled = 0, stale = 0;
  std::string stop_reason;  // "done", "time", "interrupted", "measurer-failed", "static", "baseline-build-failed"
  double wall_s = 0;
};

// Builds (in parallel) and screens every member not built yet, and with measurers measures
// every screened-in member without figures, `opt.batch` per call, one thread per measurer
// (several per GPU overlap one batch's host-side preparation with another's timing). `flush`
// gets the universe after the builds of each chunk and after each measured batch. Members
// measured before (a resumed file) are left as they are, except that built members without a
// PTX profile are rebuilt (CPU only) to add it when the rebuild gives the recorded PTX.
UniverseRunResult run_universe(Universe& u, const evaluator::Spec& spec, const evaluator::Op& op,
                               const evaluator::Builder& builder, const std::vector<Measurer*>& measurers,
                               const UniverseRunOptions& opt, std::ostream& log,
                               const std::function<void(const Universe&)>& flush, const std::atomic<bool>& stop);

// "" when figures in `u` are comparable with a run of `spec` (same spec content, op, arch, seed
// and benchmark shapes), so its measured members may be kept; otherwise why not.
std::string universe_mismatch(const Universe& u, const evaluator::Spec& spec, const std::string& spec_hash);

}  // namespace ptxevo::search
