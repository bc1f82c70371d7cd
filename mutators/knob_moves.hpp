// Knob-level moves over a seed template's knob space: a neighbour step along one knob's ordered
// values, a random reset of one knob, and uniform crossover of two parents. Every result
// satisfies the seed's constraints; a move that cannot produce one says so instead of
// returning an invalid genome. Structural choices (loader, matrix unit, cluster size, stages)
// are knobs of the templates, so these moves cover them too.
#pragma once

#include <optional>
#include <random>
#include <string>

#include "evaluator/op.hpp"
#include "evaluator/spec.hpp"

namespace ptxevo::mutators {

struct KnobMoveResult {
  std::optional<evaluator::Knobs> knobs;  // empty: no legal move found
  std::string operator_id;                // "knob_step", "knob_reset", "knob_crossover"
  std::string detail;                     // e.g. "THREADS 256 -> 512", or why nothing was found
};

// Tries knobs (and both directions) in random order; the first neighbour that satisfies the
// constraints wins.
KnobMoveResult knob_step(const evaluator::SeedTemplate& seed, const evaluator::Knobs& parent, std::mt19937_64& rng);

// One knob set to a different value drawn uniformly; up to `attempts` draws.
KnobMoveResult knob_reset(const evaluator::SeedTemplate& seed, const evaluator::Knobs& parent, std::mt19937_64& rng,
                          int attempts = 32);

// Each knob from either parent with probability 1/2; up to `attempts` draws.
KnobMoveResult knob_crossover(const evaluator::SeedTemplate& seed, const evaluator::Knobs& a,
                              const evaluator::Knobs& b, std::mt19937_64& rng, int attempts = 32);

// True when `k` sets every knob of the seed to one of its values and meets every constraint.
bool knobs_valid(const evaluator::SeedTemplate& seed, const evaluator::Knobs& k);

}  // namespace ptxevo::mutators
