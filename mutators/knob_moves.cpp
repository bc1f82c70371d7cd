#include "mutators/knob_moves.hpp"

#include <algorithm>
#include <numeric>

#include "evaluator/knob_constraints.hpp"

namespace ptxevo::mutators {

using evaluator::KnobSpace;
using evaluator::Knobs;
using evaluator::KnobValue;
using evaluator::SeedTemplate;

namespace {

std::string show(const KnobValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  return std::get<std::string>(v);
}

int index_of(const KnobSpace& k, const KnobValue& v) {
  for (std::size_t i = 0; i < k.values.size(); ++i)
    if (k.values[i] == v) return static_cast<int>(i);
  return -1;
}

std::vector<std::size_t> shuffled(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

}  // namespace

bool knobs_valid(const SeedTemplate& seed, const Knobs& k) {
  for (const auto& space : seed.knobs) {
    auto it = k.find(space.name);
    if (it == k.end() || index_of(space, it->second) < 0) return false;
  }
  for (const auto& c : seed.constraints) {
    try {
      if (!evaluator::constraint_holds(c, k)) return false;
    } catch (const std::exception&) {
      return false;  // e.g. a division by zero for these values: not a usable genome
    }
  }
  return true;
}

KnobMoveResult knob_step(const SeedTemplate& seed, const Knobs& parent, std::mt19937_64& rng) {
  KnobMoveResult r;
  r.operator_id = "knob_step";
  for (std::size_t ki : shuffled(seed.knobs.size(), rng)) {
    const KnobSpace& space = seed.knobs[ki];
    auto it = parent.find(space.name);
    if (it == parent.end()) continue;
    const int at = index_of(space, it->second);
    if (at < 0) continue;
    const int first_dir = std::uniform_int_distribution<int>(0, 1)(rng) ? 1 : -1;
    for (int dir : {first_dir, -first_dir}) {
      const int to = at + dir;
      if (to < 0 || to >= static_cast<int>(space.values.size())) continue;
      Knobs child = parent;
      child[space.name] = space.values[static_cast<std::size_t>(to)];
      if (!knobs_valid(seed, child)) continue;
      r.detail = space.name + " " + show(it->second) + " -> " + show(child[space.name]);
      r.knobs = std::move(child);
      return r;
    }
  }
  r.detail = "no neighbour of the parent satisfies the constraints";
  return r;
}

KnobMoveResult knob_reset(const SeedTemplate& seed, const Knobs& parent, std::mt19937_64& rng, int attempts) {
  KnobMoveResult r;
  r.operator_id = "knob_reset";
  std::vector<std::size_t> movable;
  for (std::size_t i = 0; i < seed.knobs.size(); ++i)
    if (seed.knobs[i].values.size() > 1) movable.push_back(i);
  if (movable.empty()) {
    r.detail = "every knob has a single value";
    return r;
  }
  for (int a = 0; a < attempts; ++a) {
    const KnobSpace& space = seed.knobs[movable[std::uniform_int_distribution<std::size_t>(0, movable.size() - 1)(rng)]];
    const KnobValue& v = space.values[std::uniform_int_distribution<std::size_t>(0, space.values.size() - 1)(rng)];
    auto it = parent.find(space.name);
    if (it != parent.end() && it->second == v) continue;
    Knobs child = parent;
    child[space.name] = v;
    if (!knobs_valid(seed, child)) continue;
    r.detail = space.name + " " + (it == parent.end() ? std::string("unset") : show(it->second)) + " -> " + show(v);
    r.knobs = std::move(child);
    return r;
  }
  r.detail = "no valid reset found in " + std::to_string(attempts) + " draws";
  return r;
}

KnobMoveResult knob_crossover(const SeedTemplate& seed, const Knobs& a, const Knobs& b, std::mt19937_64& rng,
                              int attempts) {
  KnobMoveResult r;
  r.operator_id = "knob_crossover";
  for (int t = 0; t < attempts; ++t) {
    Knobs child;
    std::string from;
    for (const auto& space : seed.knobs) {
      const bool take_b = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
      const Knobs& src = take_b ? b : a;
      auto it = src.find(space.name);
      if (it == src.end()) continue;
      child[space.name] = it->second;
      from += take_b ? 'b' : 'a';
    }
    if (child == a || child == b || !knobs_valid(seed, child)) continue;
    r.detail = "knobs taken from parents " + from;
    r.knobs = std::move(child);
    return r;
  }
  r.detail = "no valid child differing from both parents in " + std::to_string(attempts) + " draws";
  return r;
}

}  // namespace ptxevo::mutators
