#include "mutators/launch_bounds.hpp"

#include <charconv>

#include "mutators/pass_util.hpp"

namespace ptxevo::mutators {
namespace {

bool parse_int(const std::string& s, int* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// Resident threads per SM: 1536 on sm_86/87/89 and sm_12x, 2048 elsewhere (sm_80, sm_90, sm_100).
int threads_per_sm(int sm) {
  if (sm == 86 || sm == 87 || sm == 89 || sm >= 120) return 1536;
  return 2048;
}

}  // namespace

std::string LaunchBoundsPass::name() const { return "launch_bounds"; }
std::string LaunchBoundsPass::description() const {
  return "set .maxntid X, 1, 1 (and .minnctapersm K when given) on kernel entries";
}
std::string LaunchBoundsPass::legality() const {
  return "only .entry functions without .reqntid (ptxas: .maxntid and .reqntid cannot both be specified); "
         "1 <= maxntid <= 1024; 1 <= minnctapersm <= 32 and maxntid*minnctapersm <= threads per SM "
         "(2048, 1536 on sm_86/87/89/12x), else ptxas ignores it. The launch's block size must not exceed "
         "maxntid: the pass cannot see the launch, so the evaluator's launch (and the gate) decide";
}
std::map<std::string, std::string> LaunchBoundsPass::param_defaults() const {
  return {{"maxntid", "256"}, {"minnctapersm", ""}, {"function", ""}};
}

PassResult LaunchBoundsPass::apply(ir::Module& m, const PassParams& params) const {
  PassParams v;
  if (auto err = merge_params(*this, params, &v)) return finish(0, *err);
  int maxntid = 0, minct = 0;
  if (!parse_int(v.at("maxntid"), &maxntid) || maxntid < 1 || maxntid > 1024)
    return finish(0, "maxntid must be an integer between 1 and 1024 (got '" + v.at("maxntid") + "')");
  const bool set_min = !v.at("minnctapersm").empty();
  if (set_min) {
    if (!parse_int(v.at("minnctapersm"), &minct) || minct < 1 || minct > 32)
      return finish(0, "minnctapersm must be an integer between 1 and 32 (got '" + v.at("minnctapersm") + "')");
    const int limit = threads_per_sm(sm_version(m));
    if (maxntid * minct > limit)
      return finish(0, "maxntid*minnctapersm = " + std::to_string(maxntid * minct) + " exceeds the " +
                           std::to_string(limit) + " resident threads per SM of " + m.target());
  }
  const std::string& only = v.at("function");
  int changes = 0, entries = 0;
  std::string refusal;
  auto set_directive = [&](ir::Function& f, const std::string& name, std::vector<std::string> args) {
    for (auto& d : f.perf) {
      if (d.name != name) continue;
      if (d.args != args) {
        d.args = std::move(args);
        ++changes;
      }
      return;
    }
    f.perf.push_back({name, std::move(args)});
    ++changes;
  };
  for (auto* f : m.functions()) {
    if (!f->is_entry || !f->has_body || (!only.empty() && f->name != only)) continue;
    ++entries;
    if (f->find_perf(".reqntid")) {
      refusal = "kernel " + f->name + " has .reqntid, which cannot be combined with .maxntid";
      continue;
    }
    set_directive(*f, ".maxntid", {std::to_string(maxntid), "1", "1"});
    if (set_min) set_directive(*f, ".minnctapersm", {std::to_string(minct)});
  }
  if (entries == 0) refusal = only.empty() ? "no .entry function with a body" : "no .entry named " + only;
  if (refusal.empty()) refusal = "the launch bounds are already set to these values";
  return finish(changes, refusal);
}

}  // namespace ptxevo::mutators
