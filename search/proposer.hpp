// The rule agents: operators that turn parents into child genomes. Knob moves (step, reset,
// crossover) come from mutators/knob_moves; PTX moves append one mutator pass (with sampled
// parameters) to the parent's edit list or drop one. Every operator has an id, which the trace
// database records and the operator policy (uniform here; the learned prior later) chooses by.
#pragma once

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "evaluator/spec.hpp"
#include "mutators/pass.hpp"
#include "search/genome.hpp"

namespace ptxevo::search {

struct Proposal {
  Genome genome;
  std::optional<std::int64_t> parent_id;
  std::string operator_id;  // "knob_step", "knob_reset", "knob_crossover", "ptx:<pass>", "ptx_drop", "seed", "random"
  std::string detail;
  int island = 0;
};

// Chooses which operator to try next; the uniform policy is the cold default.
// PTX edits on the first population's random genomes (a cold campaign explores edits from its
// first batch; without them its random genomes were knob assignments only, and every edit came
// one `ptx:` child at a time).
struct RandomEdits {
  double share = 0.5;  // probability that a random genome carries edits
  int max_edits = 2;   // it then carries 1..max_edits distinct passes (uniform count)
};

class OperatorPolicy {
 public:
  virtual ~OperatorPolicy() = default;
  virtual std::string choose(const std::vector<std::string>& applicable, std::mt19937_64& rng) = 0;
};

class UniformPolicy : public OperatorPolicy {
 public:
  std::string choose(const std::vector<std::string>& applicable, std::mt19937_64& rng) override;
};

class Proposer {
 public:
  // `only`: the PTX passes the campaign uses, by name (null: every registered pass but
  // launch_bounds; empty: knob moves only). Throws std::invalid_argument for a name `passes`
  // does not hold, or for launch_bounds (the knobs own the CTA size).
  Proposer(const evaluator::Spec& spec, const mutators::PassRegistry& passes,
           const std::vector<std::string>* only = nullptr);

  // Every operator id this proposer can use.
  std::vector<std::string> operators() const;
  // Operators that can apply to `parent` (crossover needs a mate; ptx_drop needs an edit).
  std::vector<std::string> applicable(const Genome& parent, bool has_mate) const;

  // The seed templates at their default knobs (the baseline first).
  std::vector<Genome> seeds() const;
  // Whether `g` is a legal genome of this spec: its seed exists, every knob of the seed has a
  // value from its space, the constraints hold, and every edit names a pass the campaign uses.
  // "" when it is, else why not (a genome from another spec's campaign may not be).
  std::string admits(const Genome& g) const;
  // A random valid knob assignment of a seed; nullopt when none is found.
  std::optional<Genome> random_genome(const std::string& seed_name, std::mt19937_64& rng) const;
  // The same knobs and, with probability e.share, 1..e.max_edits distinct passes drawn from
  // `passes` (which should be passes this campaign uses and that apply), in the drawn order, each
  // with parameters sampled as `ptx:<pass>` samples them. With e.share <= 0 or no passes it draws
  // exactly what the knobs-only overload draws (the same random stream).
  std::optional<Genome> random_genome(const std::string& seed_name, std::mt19937_64& rng, const RandomEdits& e,
                                      const std::vector<std::string>& passes) const;
  // The passes the campaign may use (every registered pass but launch_bounds, unless restricted).
  const std::vector<std::string>& ptx_passes() const { return ptx_passes_; }
  // Applies one operator; nullopt with *why set when it produced nothing legal.
  std::optional<Genome> apply(const std::string& op, const Genome& parent, const Genome* mate, std::mt19937_64& rng,
                              std::string* detail) const;

  const evaluator::SeedTemplate* seed(const std::string& name) const;
  const evaluator::Spec& spec() const { return spec_; }

 private:
  mutators::PassParams sample_params(const std::string& pass, std::mt19937_64& rng, const Genome& parent) const;

  const evaluator::Spec& spec_;
  const mutators::PassRegistry& passes_;
  std::vector<std::string> ptx_passes_;  // passes the campaign may use
};

}  // namespace ptxevo::search
