#include "search/proposer.hpp"

#include <algorithm>
#include <stdexcept>

#include "evaluator/knob_constraints.hpp"
#include "mutators/knob_moves.hpp"

namespace ptxevo::search {

std::string UniformPolicy::choose(const std::vector<std::string>& applicable, std::mt19937_64& rng) {
  if (applicable.empty()) return {};
  std::uniform_int_distribution<std::size_t> pick(0, applicable.size() - 1);
  return applicable[pick(rng)];
}

Proposer::Proposer(const evaluator::Spec& spec, const mutators::PassRegistry& passes, const std::vector<std::string>* only)
    : spec_(spec), passes_(passes) {
  // launch_bounds rewrites the CTA size the op's launch plan decides; the knobs own that, so
  // the campaign leaves it to them (the pass stays available to `ptxevo mutate`).
  const auto names = passes_.names();
  if (only) {
    for (const auto& name : *only) {
      if (name == "launch_bounds" || std::find(names.begin(), names.end(), name) == names.end()) {
        std::string known;
        for (const auto& n : names)
          if (n != "launch_bounds") known += (known.empty() ? "" : ", ") + n;
        throw std::invalid_argument("unknown PTX pass '" + name + "' (a campaign may use: " + known + ")");
      }
    }
  }
  for (const auto& name : names)
    if (name != "launch_bounds" && (!only || std::find(only->begin(), only->end(), name) != only->end()))
      ptx_passes_.push_back(name);
}

const evaluator::SeedTemplate* Proposer::seed(const std::string& name) const {
  for (const auto& s : spec_.seeds)
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<std::string> Proposer::operators() const {
  std::vector<std::string> ops = {"knob_step", "knob_reset", "knob_crossover", "ptx_drop"};
  for (const auto& p : ptx_passes_) ops.push_back("ptx:" + p);
  return ops;
}

std::vector<std::string> Proposer::applicable(const Genome& parent, bool has_mate) const {
  std::vector<std::string> ops;
  const auto* s = seed(parent.seed);
  const bool has_knobs = s && !s->knobs.empty() && parent.source.empty();
  if (has_knobs) {
    ops.push_back("knob_step");
    ops.push_back("knob_reset");
    if (has_mate) ops.push_back("knob_crossover");
  }
  if (!parent.edits.empty()) ops.push_back("ptx_drop");
  for (const auto& p : ptx_passes_) {
    const bool present = std::any_of(parent.edits.begin(), parent.edits.end(), [&](const PtxEdit& e) { return e.pass == p; });
    if (!present) ops.push_back("ptx:" + p);
  }
  return ops;
}

std::vector<Genome> Proposer::seeds() const {
  std::vector<Genome> out;
  for (const auto& s : spec_.seeds) {
    Genome g;
    g.seed = s.name;
    g.knobs = evaluator::default_knobs(s);
    if (s.name == spec_.baseline) out.insert(out.begin(), g);
    else out.push_back(g);
  }
  return out;
}

std::string Proposer::admits(const Genome& g) const {
  const auto* s = seed(g.seed);
  if (!s) return "no seed template '" + g.seed + "' in this spec";
  if (!g.source.empty()) return "agent-written source";
  for (const auto& space : s->knobs) {
    auto it = g.knobs.find(space.name);
    if (it == g.knobs.end()) return "knob " + space.name + " missing";
    if (std::find(space.values.begin(), space.values.end(), it->second) == space.values.end())
      return "knob " + space.name + " has a value outside this spec's space";
  }
  if (g.knobs.size() != s->knobs.size()) return "knobs this spec's seed does not have";
  for (const auto& c : s->constraints)
    if (!evaluator::constraint_holds(c, g.knobs)) return "constraint " + c + " fails";
  for (const auto& e : g.edits)
    if (std::find(ptx_passes_.begin(), ptx_passes_.end(), e.pass) == ptx_passes_.end())
      return "PTX pass " + e.pass + " is not used by this campaign";
  return {};
}

std::optional<Genome> Proposer::random_genome(const std::string& seed_name, std::mt19937_64& rng) const {
  const auto* s = seed(seed_name);
  if (!s) return std::nullopt;
  evaluator::Knobs k = evaluator::default_knobs(*s);
  // A few resets from the defaults: each keeps the constraints, so the walk stays legal.
  std::uniform_int_distribution<int> steps(1, std::max<int>(1, static_cast<int>(s->knobs.size())));
  const int n = steps(rng);
  for (int i = 0; i < n; ++i) {
    auto r = mutators::knob_reset(*s, k, rng);
    if (r.knobs) k = *r.knobs;
  }
  Genome g;
  g.seed = seed_name;
  g.knobs = k;
  return g;
}

std::optional<Genome> Proposer::random_genome(const std::string& seed_name, std::mt19937_64& rng, const RandomEdits& e,
                                              const std::vector<std::string>& passes) const {
  auto g = random_genome(seed_name, rng);
  if (!g || e.share <= 0 || e.max_edits < 1 || passes.empty()) return g;
  if (std::uniform_real_distribution<double>(0, 1)(rng) >= e.share) return g;
  std::vector<std::string> pool = passes;
  const int most = std::min<int>(e.max_edits, static_cast<int>(pool.size()));
  const int n = std::uniform_int_distribution<int>(1, most)(rng);
  for (int i = 0; i < n; ++i) {
    // A partial Fisher-Yates draw: distinct passes, in the order drawn.
    const auto k = std::uniform_int_distribution<std::size_t>(static_cast<std::size_t>(i), pool.size() - 1)(rng);
    std::swap(pool[static_cast<std::size_t>(i)], pool[k]);
    const std::string& pass = pool[static_cast<std::size_t>(i)];
    g->edits.push_back(PtxEdit{pass, sample_params(pass, rng, *g)});
  }
  return g;
}

mutators::PassParams Proposer::sample_params(const std::string& pass, std::mt19937_64& rng, const Genome&) const {
  auto pick = [&](std::vector<std::string> v) {
    std::uniform_int_distribution<std::size_t> d(0, v.size() - 1);
    return v[d(rng)];
  };
  // Values worth trying per pass; anything not listed keeps its default.
  if (pass == "max_registers") return {{"n", pick({"32", "40", "48", "56", "64", "80", "96", "128", "168", "255"})}};
  if (pass == "l2_evict_hint") return {{"priority", pick({"evict_first", "evict_last"})}};
  if (pass == "hoist_global_loads") return {{"distance", pick({"4", "8", "16"})}};
  return {};
}

std::optional<Genome> Proposer::apply(const std::string& op, const Genome& parent, const Genome* mate,
                                      std::mt19937_64& rng, std::string* detail) const {
  const auto* s = seed(parent.seed);
  Genome child = parent;
  auto knob_result = [&](const mutators::KnobMoveResult& r) -> std::optional<Genome> {
    *detail = r.detail;
    if (!r.knobs) return std::nullopt;
    child.knobs = *r.knobs;
    return child;
  };
  if (op == "knob_step" || op == "knob_reset" || op == "knob_crossover") {
    if (!s) {
      *detail = "seed '" + parent.seed + "' is not in the spec";
      return std::nullopt;
    }
    if (op == "knob_step") return knob_result(mutators::knob_step(*s, parent.knobs, rng));
    if (op == "knob_reset") return knob_result(mutators::knob_reset(*s, parent.knobs, rng));
    if (!mate || mate->seed != parent.seed) {
      *detail = "crossover needs a mate of the same seed";
      return std::nullopt;
    }
    auto r = knob_result(mutators::knob_crossover(*s, parent.knobs, mate->knobs, rng));
    // The edit list comes from either parent as a whole.
    if (r && std::uniform_int_distribution<int>(0, 1)(rng) == 1) r->edits = mate->edits;
    return r;
  }
  if (op == "ptx_drop") {
    if (child.edits.empty()) {
      *detail = "no PTX edit to drop";
      return std::nullopt;
    }
    std::uniform_int_distribution<std::size_t> d(0, child.edits.size() - 1);
    const std::size_t at = d(rng);
    *detail = "dropped " + child.edits[at].pass;
    child.edits.erase(child.edits.begin() + static_cast<std::ptrdiff_t>(at));
    return child;
  }
  if (op.rfind("ptx:", 0) == 0) {
    const std::string pass = op.substr(4);
    if (!passes_.find(pass)) {
      *detail = "unknown pass '" + pass + "'";
      return std::nullopt;
    }
    PtxEdit e{pass, sample_params(pass, rng, parent)};
    *detail = "+" + pass;
    for (const auto& [k, v] : e.params) *detail += " " + k + "=" + v;
    child.edits.push_back(std::move(e));
    return child;
  }
  *detail = "unknown operator '" + op + "'";
  return std::nullopt;
}

}  // namespace ptxevo::search
