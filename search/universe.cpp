#include "search/universe.hpp"

#include <tbb/concurrent_queue.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "evaluator/build_cache.hpp"
#include "evaluator/evaluation.hpp"
#include "evaluator/template_source.hpp"
#include "mutators/knob_moves.hpp"
#include "search/genome_build.hpp"
#include "search/screen.hpp"

namespace ptxevo::search {

using nlohmann::json;
using evaluator::KnobSpace;
using evaluator::Knobs;
using evaluator::KnobValue;

namespace {

constexpr const char* kFormat = "ptxevo-universe-1";

std::string show(const KnobValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  return std::get<std::string>(v);
}

json value_json(const KnobValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  return std::get<std::string>(v);
}

KnobValue value_from(const json& j) {
  if (j.is_number_integer()) return j.get<std::int64_t>();
  return j.get<std::string>();
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A build log can run to pages; the file keeps what names the problem.
std::string cut(const std::string& s, std::size_t n = 600) { return s.size() <= n ? s : s.substr(0, n) + " [...]"; }

json member_json(const UniverseMember& m) {
  json res = json::array();
  for (const auto& f : m.resources)
    res.push_back({{"function", f.name}, {"registers", f.registers}, {"spill_stores", f.spill_stores},
                   {"spill_loads", f.spill_loads}, {"stack_frame", f.stack_frame}, {"shared_bytes", f.shared_bytes}});
  json j = {{"genome", m.genome.to_json()},
            {"genome_hash", m.genome_hash},
            {"build",
             {{"status", m.build}, {"stage", m.stage}, {"reason", m.reason}, {"ptx_hash", m.ptx_hash},
              {"seconds", m.build_seconds}, {"resources", res}}}};
  if (!m.ptx_profile.empty()) j["build"]["ptx_profile"] = json::parse(ptx_profile_json(m.ptx_profile));
  if (m.measured()) {
    json shapes = json::array();
    for (const auto& s : m.shapes)
      shapes.push_back({{"shape", s.shape},
                        {"passed", s.passed},
                        {"candidate_ms", {s.candidate_ms, s.candidate_low, s.candidate_high}},
                        {"baseline_ms", s.baseline_ms},
                        {"speedup", {s.speedup, s.speedup_low, s.speedup_high}},
                        {"samples", s.samples},
                        {"fraction_of_floor", s.fraction_of_floor}});
    j["eval"] = {{"verdict", m.verdict},
                 {"reasons", m.reasons},
                 {"fitness", m.fitness ? json(*m.fitness) : json(nullptr)},
                 {"seconds", m.eval_seconds},
                 {"shapes", shapes}};
  }
  return j;
}

UniverseMember member_from(const json& j) {
  UniverseMember m;
  m.genome = genome_from_json(j.at("genome"));
  m.genome_hash = j.value("genome_hash", m.genome.hash());
  const json& b = j.at("build");
  m.build = b.at("status").get<std::string>();
  m.stage = b.value("stage", std::string());
  m.reason = b.value("reason", std::string());
  m.ptx_hash = b.value("ptx_hash", std::string());
  m.build_seconds = b.value("seconds", 0.0);
  for (const auto& f : b.value("resources", json::array())) {
    evaluator::FunctionResources r;
    r.name = f.value("function", std::string());
    r.is_entry = true;
    r.registers = f.value("registers", -1);
    r.spill_stores = f.value("spill_stores", 0);
    r.spill_loads = f.value("spill_loads", 0);
    r.stack_frame = f.value("stack_frame", 0);
    r.shared_bytes = f.value("shared_bytes", 0);
    m.resources.push_back(std::move(r));
  }
  if (b.contains("ptx_profile")) m.ptx_profile = ptx_profile_from_json(b.at("ptx_profile").dump());
  if (j.contains("eval")) {
    const json& e = j.at("eval");
    m.verdict = e.at("verdict").get<std::string>();
    m.reasons = e.value("reasons", std::vector<std::string>{});
    if (e.contains("fitness") && e.at("fitness").is_number()) m.fitness = e.at("fitness").get<double>();
    m.eval_seconds = e.value("seconds", 0.0);
    for (const auto& s : e.value("shapes", json::array())) {
      UniverseShape u;
      u.shape = s.at("shape").get<evaluator::Shape>();
      u.passed = s.value("passed", true);
      const auto c = s.at("candidate_ms");
      u.candidate_ms = c.at(0).get<double>();
      u.candidate_low = c.at(1).get<double>();
      u.candidate_high = c.at(2).get<double>();
      u.baseline_ms = s.value("baseline_ms", 0.0);
      const auto sp = s.at("speedup");
      u.speedup = sp.at(0).get<double>();
      u.speedup_low = sp.at(1).get<double>();
      u.speedup_high = sp.at(2).get<double>();
      u.samples = s.value("samples", 0);
      u.fraction_of_floor = s.value("fraction_of_floor", 0.0);
      m.shapes.push_back(std::move(u));
    }
  }
  return m;
}

}  // namespace

std::size_t Universe::measured_count() const {
  return static_cast<std::size_t>(std::count_if(members.begin(), members.end(), [](const auto& m) { return m.measured(); }));
}

std::size_t Universe::passing_count() const {
  return static_cast<std::size_t>(
      std::count_if(members.begin(), members.end(), [](const auto& m) { return m.verdict == "pass" && m.fitness; }));
}

Universe load_universe(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("universe " + path.string() + ": cannot open the file");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw std::runtime_error("universe " + path.string() + ": not valid JSON: " + e.what());
  }
  try {
    if (j.value("format", std::string()) != kFormat)
      throw std::runtime_error("format is '" + j.value("format", std::string()) + "', expected '" + kFormat + "'");
    Universe u;
    const json& s = j.at("spec");
    u.spec_file = s.at("file").get<std::string>();
    u.spec_hash = s.at("sha256").get<std::string>();
    u.op = s.at("op").get<std::string>();
    u.arch = s.at("arch").get<std::string>();
    u.seed = s.at("seed").get<std::string>();
    for (const auto& k : j.at("grid")) {
      KnobSpace ks;
      ks.name = k.at("knob").get<std::string>();
      for (const auto& v : k.at("values")) ks.values.push_back(value_from(v));
      ks.default_value = value_from(k.at("default"));
      u.grid.push_back(std::move(ks));
    }
    for (const auto& e : j.value("edits", json::array()))
      u.edits.push_back(PtxEdit{e.at("pass").get<std::string>(), e.value("params", mutators::PassParams{})});
    u.max_edits = j.value("max_edits", -1);
    u.closed = j.value("closed", false);
    for (const auto& sh : j.at("benchmark_shapes")) u.benchmark_shapes.push_back(sh.get<evaluator::Shape>());
    const json& env = j.at("environment");
    u.gpu = env.value("gpu", std::string());
    u.driver = env.value("driver", std::string());
    u.toolchain = env.value("toolchain", std::string());
    u.commit = env.value("commit", std::string());
    u.created_at = env.value("created_at", std::string());
    u.measured_at = env.value("measured_at", std::string());
    const json& set = j.at("settings");
    u.timing_min_samples = set.value("timing_min_samples", 10);
    u.timing_ci_width = set.value("timing_ci_width", 0.01);
    u.benchmark_distributions = set.value("benchmark_distributions", 1);
    u.max_spill_bytes = set.value("max_spill_bytes", std::int64_t{256});
    u.synthetic = j.value("synthetic", false);
    u.note = j.value("note", std::string());
    for (const auto& m : j.at("members")) u.members.push_back(member_from(m));
    return u;
  } catch (const std::exception& e) {
    throw std::runtime_error("universe " + path.string() + ": " + e.what());
  }
}

void write_universe(const std::filesystem::path& path, const Universe& u) {
  json grid = json::array();
  for (const auto& k : u.grid) {
    json values = json::array();
    for (const auto& v : k.values) values.push_back(value_json(v));
    grid.push_back({{"knob", k.name}, {"values", values}, {"default", value_json(k.default_value)}});
  }
  json members = json::array();
  for (const auto& m : u.members) members.push_back(member_json(m));
  json edits = json::array();
  for (const auto& e : u.edits) edits.push_back({{"pass", e.pass}, {"params", e.params}});
  json j = {{"format", kFormat},
            {"synthetic", u.synthetic},
            {"note", u.note},
            {"spec", {{"file", u.spec_file}, {"sha256", u.spec_hash}, {"op", u.op}, {"arch", u.arch}, {"seed", u.seed}}},
            {"grid", grid},
            {"edits", edits},
            {"max_edits", u.max_edits},
            {"closed", u.closed},
            {"benchmark_shapes", u.benchmark_shapes},
            {"environment",
             {{"gpu", u.gpu}, {"driver", u.driver}, {"toolchain", u.toolchain}, {"commit", u.commit},
              {"created_at", u.created_at}, {"measured_at", u.measured_at}}},
            {"settings",
             {{"timing_min_samples", u.timing_min_samples}, {"timing_ci_width", u.timing_ci_width},
              {"benchmark_distributions", u.benchmark_distributions}, {"max_spill_bytes", u.max_spill_bytes}}},
            {"members", members}};
  const auto tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw std::runtime_error("universe: cannot write " + tmp);
    // One member per line: the file stays readable and diffs by candidate.
    out << "{\n";
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "members") continue;
      out << (first ? "" : ",\n") << " " << json(it.key()).dump() << ": " << it.value().dump();
      first = false;
    }
    out << ",\n \"members\": [";
    for (std::size_t i = 0; i < members.size(); ++i) out << (i ? ",\n  " : "\n  ") << members[i].dump();
    out << "\n ]\n}\n";
    if (!out) throw std::runtime_error("universe: writing " + tmp + " failed");
  }
  std::filesystem::rename(tmp, path);
}

std::vector<KnobSpace> make_grid(const evaluator::SeedTemplate& seed, const std::vector<std::string>& vary,
                                 std::string* error) {
  std::map<std::string, std::set<std::string>> wanted;  // knob -> values named ("" alone: all)
  for (const auto& arg : vary) {
    const auto eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const auto space = std::find_if(seed.knobs.begin(), seed.knobs.end(), [&](const KnobSpace& k) { return k.name == name; });
    if (space == seed.knobs.end()) {
      std::string names;
      for (const auto& k : seed.knobs) names += (names.empty() ? "" : ", ") + k.name;
      *error = "--vary " + arg + ": seed '" + seed.name + "' has no knob " + name + " (its knobs: " + names + ")";
      return {};
    }
    auto& set = wanted[name];
    if (eq == std::string::npos) {
      for (const auto& v : space->values) set.insert(show(v));
      continue;
    }
    std::stringstream ss(arg.substr(eq + 1));
    std::string v;
    while (std::getline(ss, v, ',')) {
      if (v.empty()) continue;
      const bool known = std::any_of(space->values.begin(), space->values.end(), [&](const KnobValue& x) { return show(x) == v; });
      if (!known) {
        std::string values;
        for (const auto& x : space->values) values += (values.empty() ? "" : ",") + show(x);
        *error = "--vary " + arg + ": " + v + " is not a value of " + name + " in the spec (its values: " + values + ")";
        return {};
      }
      set.insert(v);
    }
  }
  std::vector<KnobSpace> grid;
  for (const auto& k : seed.knobs) {
    KnobSpace g;
    g.name = k.name;
    g.default_value = k.default_value;
    const auto it = wanted.find(k.name);
    for (const auto& v : k.values) {
      const bool keep = vary.empty() || v == k.default_value || (it != wanted.end() && it->second.count(show(v)));
      if (keep) g.values.push_back(v);
    }
    grid.push_back(std::move(g));
  }
  return grid;
}

evaluator::SeedTemplate restrict_seed(const evaluator::SeedTemplate& seed, const std::vector<KnobSpace>& grid) {
  evaluator::SeedTemplate s = seed;
  s.knobs.clear();
  for (const auto& k : seed.knobs) {
    const auto g = std::find_if(grid.begin(), grid.end(), [&](const KnobSpace& x) { return x.name == k.name; });
    if (g != grid.end()) {
      KnobSpace r = k;
      r.values = g->values;
      r.default_value = g->default_value;
      s.knobs.push_back(std::move(r));
      continue;
    }
    // Word boundaries: SMALL_ITEMS must not match inside another name, nor ITEMS inside it.
    const std::regex name("\\b" + k.name + "\\b");
    for (auto& c : s.constraints) c = std::regex_replace(c, name, "(" + show(k.default_value) + ")");
  }
  return s;
}

std::vector<Knobs> grid_assignments(const evaluator::SeedTemplate& seed) {
  std::vector<Knobs> out;
  const std::size_t n = seed.knobs.size();
  for (const auto& k : seed.knobs)
    if (k.values.empty()) return out;
  std::vector<std::size_t> at(n, 0);
  while (true) {
    Knobs k;
    for (std::size_t i = 0; i < n; ++i) k[seed.knobs[i].name] = seed.knobs[i].values[at[i]];
    if (mutators::knobs_valid(seed, k)) out.push_back(std::move(k));
    std::size_t i = n;
    while (i > 0) {
      --i;
      if (++at[i] < seed.knobs[i].values.size()) break;
      at[i] = 0;
      if (i == 0) return out;
    }
    if (n == 0) return out;
  }
}

std::optional<PtxEdit> parse_edit(const std::string& text, const mutators::PassRegistry& passes, std::string* error) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ':')) parts.push_back(part);
  if (parts.empty() || parts[0].empty()) {
    *error = "--edits '" + text + "': give pass[:key=value...]";
    return std::nullopt;
  }
  PtxEdit e;
  e.pass = parts[0];
  if (!passes.find(e.pass)) {
    *error = "--edits " + text + ": no PTX pass named '" + e.pass + "' (`ptxevo mutate --list` lists them)";
    return std::nullopt;
  }
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const auto eq = parts[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      *error = "--edits " + text + ": '" + parts[i] + "' is not key=value";
      return std::nullopt;
    }
    e.params[parts[i].substr(0, eq)] = parts[i].substr(eq + 1);
  }
  return e;
}

std::vector<Genome> universe_genomes(const std::string& seed, const std::vector<Knobs>& assignments,
                                     const std::vector<PtxEdit>& edits, int max_edits) {
  std::vector<Genome> out;
  const std::size_t n = edits.size();
  for (const auto& k : assignments)
    for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << n); ++mask) {
      if (max_edits >= 0 && std::popcount(mask) > max_edits) continue;
      Genome g;
      g.seed = seed;
      g.knobs = k;
      for (std::size_t i = 0; i < n; ++i)
        if (mask >> i & 1) g.edits.push_back(edits[i]);
      out.push_back(std::move(g));
    }
  return out;
}

Genome canonical_edits(Genome g) {
  // Equal (pass, params) pairs are identical, so std::sort is as deterministic as stable_sort
  // (which trips clang's deprecation of get_temporary_buffer in libstdc++ 12 under -Werror).
  std::sort(g.edits.begin(), g.edits.end(), [](const PtxEdit& a, const PtxEdit& b) {
    return a.pass != b.pass ? a.pass < b.pass : a.params < b.params;
  });
  return g;
}

std::vector<Knobs> thin_assignments(const std::vector<Knobs>& all, const Knobs& defaults, int stride, int max) {
  std::vector<Knobs> picked;
  for (std::size_t i = 0; i < all.size(); i += static_cast<std::size_t>(std::max(1, stride))) picked.push_back(all[i]);
  if (max > 0 && static_cast<int>(picked.size()) > max) {
    std::vector<Knobs> even;
    const double step = static_cast<double>(picked.size()) / max;
    for (int i = 0; i < max; ++i) even.push_back(picked[static_cast<std::size_t>(std::floor(i * step))]);
    picked = std::move(even);
  }
  // The baseline is in every campaign's first population: it must be a member.
  picked.erase(std::remove(picked.begin(), picked.end(), defaults), picked.end());
  if (std::find(all.begin(), all.end(), defaults) != all.end()) {
    picked.insert(picked.begin(), defaults);
    if (max > 0 && static_cast<int>(picked.size()) > max) picked.pop_back();
  }
  return picked;
}

std::string universe_mismatch(const Universe& u, const evaluator::Spec& spec, const std::string& spec_hash) {
  if (u.spec_hash != spec_hash) return "it was made from other spec content (sha256 " + u.spec_hash.substr(0, 12) + ")";
  if (u.op != spec.op) return "it is for op '" + u.op + "', the spec for '" + spec.op + "'";
  if (u.arch != spec.arch) return "it was made for " + u.arch + ", not " + spec.arch;
  if (spec.seeds.empty() || u.seed != spec.seeds.front().name) return "its seed '" + u.seed + "' is not the spec's first";
  if (u.benchmark_shapes != spec.benchmark_shapes) return "its benchmark shapes differ from the spec's";
  return "";
}

namespace {

struct MeasureBatch {
  evaluator::EvalRequest common;     // fresh inputs per batch
  std::vector<std::size_t> members;  // indices into Universe::members
  std::vector<MeasureItem> items;
  std::vector<evaluator::EvalReport> reports;
  std::string error;
  bool skipped = false;  // the time limit passed (or a stop came) before it started
};

void absorb(UniverseMember& m, const evaluator::EvalReport& r) {
  m.verdict = r.verdict;
  m.reasons = r.reasons;
  m.fitness = r.fitness;
  m.eval_seconds = r.seconds;
  m.shapes.clear();
  for (const auto& s : r.shapes) {
    if (s.cls != evaluator::ShapeClass::Benchmark) continue;
    UniverseShape u;
    u.shape = s.shape;
    u.passed = s.passed;
    if (s.candidate_ms) {
      u.candidate_ms = s.candidate_ms->median;
      u.candidate_low = s.candidate_ms->ci_low;
      u.candidate_high = s.candidate_ms->ci_high;
      u.samples = static_cast<int>(s.candidate_ms->n);
    }
    if (s.baseline_ms) u.baseline_ms = s.baseline_ms->median;
    if (s.speedup) {
      u.speedup = s.speedup->ratio;
      u.speedup_low = s.speedup->ci_low;
      u.speedup_high = s.speedup->ci_high;
    }
    u.fraction_of_floor = s.fraction_of_floor;
    m.shapes.push_back(std::move(u));
  }
}

}  // namespace

UniverseRunResult run_universe(Universe& u, const evaluator::Spec& spec, const evaluator::Op& op,
                               const evaluator::Builder& builder, const std::vector<Measurer*>& measurers,
                               const UniverseRunOptions& opt, std::ostream& log,
                               const std::function<void(const Universe&)>& flush, const std::atomic<bool>& stop) {
  UniverseRunResult res;
  const double t0 = now_s();
  const evaluator::SeedTemplate& seed = spec.seeds.front();
  std::string source;
  {
    std::string why;
    auto t = evaluator::read_template(seed.source_path, &why);
    if (!t) throw std::runtime_error("seed template: " + why);
    source = std::move(t->text);
  }
  // As a campaign builds a genome (CampaignEngine::build_request).
  const auto passes = std::make_shared<const mutators::PassRegistry>(mutators::builtin_passes());
  auto request = [&](const Genome& g) {
    evaluator::BuildRequest r;
    r.name = seed.name;
    r.source_path = seed.source_path;
    r.source = source;
    r.defines = op.template_defines(spec.config);
    r.knobs = g.knobs;
    r.arch = spec.arch;
    if (!g.edits.empty()) r.ptx_pass = edit_pass(g.edits, passes);
    return r;
  };
  const auto shapes = evaluator::select_shapes(spec, evaluator::ShapeSelection{});
  const bool measuring = !measurers.empty();
  if (!opt.commit.empty()) u.commit = opt.commit;
  // A static run over a measured file (adding PTX profiles) keeps the measuring run's toolchain.
  if (measuring || u.measured_count() == 0) u.toolchain = builder.toolchain();

  evaluator::BuildResult baseline;
  if (measuring) {
    Genome base;
    base.seed = evaluator::baseline_seed(spec)->name;
    base.knobs = evaluator::default_knobs(*evaluator::baseline_seed(spec));
    baseline = builder.build(request(base));
    if (!baseline.ok) {
      log << "error: the baseline (seed defaults) does not build for " << spec.arch << " at stage " << baseline.stage
          << ":\n" << cut(baseline.error) << "\n";
      res.stop_reason = "baseline-build-failed";
      return res;
    }
    const tracedb::Environment env = measurers.front()->environment();
    u.gpu = env.gpu;
    u.driver = env.driver;
    u.toolchain = env.cuda;
  }
  std::random_device rd;
  // A campaign's candidate request (CampaignEngine::common_request) with fresh inputs.
  auto common_request = [&]() {
    evaluator::EvalRequest req;
    req.op = spec.op;
    req.config = spec.config;
    req.shapes = shapes;
    req.baseline_knobs = evaluator::default_knobs(*evaluator::baseline_seed(spec));
    req.tolerances = spec.tolerances;
    req.seed = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    req.baseline_cubin = baseline.cubin;
    req.gate.distributions_benchmark = u.benchmark_distributions;
    req.timing.min_samples = u.timing_min_samples;
    req.timing.stop_rel_ci = u.timing_ci_width;
    return req;
  };

  // Built members of a file written before PTX profiles existed: rebuilt for the profile (the
  // cost model's IR columns). Their figures stay only if the rebuild gives the recorded PTX.
  {
    std::vector<std::size_t> need;
    for (std::size_t i = 0; i < u.members.size(); ++i)
      if (u.members[i].build == "ok" && u.members[i].ptx_profile.empty() && !u.members[i].ptx_hash.empty())
        need.push_back(i);
    if (!need.empty()) log << "profiling the PTX of " << need.size() << " members built before profiles existed" << std::endl;
    for (std::size_t start = 0; start < need.size() && !stop.load(); start += 64) {
      const std::size_t end = std::min(need.size(), start + 64);
      std::vector<evaluator::BuildRequest> reqs;
      for (std::size_t k = start; k < end; ++k) reqs.push_back(request(u.members[need[k]].genome));
      const auto results = builder.build_all(reqs);
      for (std::size_t k = start; k < end; ++k) {
        UniverseMember& m = u.members[need[k]];
        const auto& b = results[k - start];
        if (!b.ok || evaluator::sha256_hex(b.ptx) != m.ptx_hash) {
          ++res.stale;
          continue;
        }
        try {
          m.ptx_profile = profile_ptx(b.ptx);
          ++res.profiled;
        } catch (const std::invalid_argument& e) {
          log << "warning: " << m.genome.describe() << ": " << e.what() << "\n";
        }
      }
      flush(u);
    }
    if (res.stale > 0)
      log << "warning: " << res.stale << " members build different PTX now than when they were measured (another "
          << "toolchain?): they keep their figures and get no PTX profile" << std::endl;
  }

  // What is left: members never built, and with a GPU those built but not measured (their
  // cubins were not kept). Measured members of a resumed file stay as they are.
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < u.members.size(); ++i) {
    const auto& m = u.members[i];
    if (m.measured()) continue;
    if (!measuring && m.build != "pending") continue;
    todo.push_back(i);
  }
  const std::size_t to_measure_total = measuring ? todo.size() : 0;

  tbb::concurrent_bounded_queue<MeasureBatch*> work, done;
  std::atomic<bool> out_of_time{false};
  auto time_up = [&] { return opt.max_minutes > 0 && now_s() - t0 > opt.max_minutes * 60; };
  std::vector<std::thread> threads;
  for (Measurer* m : measurers)
    threads.emplace_back([m, &work, &done, &out_of_time, &stop, &time_up] {
      while (true) {
        MeasureBatch* b = nullptr;
        work.pop(b);
        if (!b) return;
        // Past the time limit a queued batch does not start: only those under way finish.
        if (time_up()) out_of_time = true;
        if (out_of_time.load() || stop.load()) {
          b->skipped = true;
        } else {
          try {
            b->reports = m->measure(b->common, b->items);
          } catch (const std::exception& e) {
            b->error = e.what();
          }
        }
        done.push(b);
      }
    });

  std::size_t in_flight = 0, batches_done = 0, measured_now = 0;
  const std::size_t batch_size = static_cast<std::size_t>(std::max(1, opt.batch));
  const std::size_t batches_total = (to_measure_total + batch_size - 1) / batch_size;
  auto absorb_batch = [&](std::unique_ptr<MeasureBatch> b) {
    --in_flight;
    if (b->skipped) return;
    if (!b->error.empty()) {
      log << "error: the measurer failed on a batch: " << b->error << "\n";
      if (res.stop_reason.empty()) res.stop_reason = "measurer-failed";
      return;
    }
    for (std::size_t k = 0; k < b->members.size() && k < b->reports.size(); ++k) {
      UniverseMember& m = u.members[b->members[k]];
      if (b->reports[k].verdict == "not-run") continue;
      absorb(m, b->reports[k]);
      ++res.measured;
      ++measured_now;
      if (m.verdict == "pass" && m.fitness) ++res.passed;
    }
    ++batches_done;
    u.measured_at = utc_now();
    const UniverseMember* best = nullptr;
    for (const auto& m : u.members)
      if (m.verdict == "pass" && m.fitness && (!best || *m.fitness > *best->fitness)) best = &m;
    char line[256];
    std::snprintf(line, sizeof line, "[%5.0f s] measured batch %zu/%zu: %zu/%zu candidates this run (%zu pass)", now_s() - t0,
                  batches_done, batches_total, measured_now, to_measure_total, res.passed);
    log << line;
    if (best) log << "; best fitness " << *best->fitness << " (" << best->genome.describe() << ")";
    log << std::endl;
    flush(u);
  };

  std::set<Knobs> compiled;
  for (std::size_t start = 0; start < todo.size(); start += batch_size) {
    if (stop.load()) {
      res.stop_reason = "interrupted";
      break;
    }
    if (measuring && time_up()) {
      res.stop_reason = "time";
      break;
    }
    if (!res.stop_reason.empty()) break;
    const std::size_t end = std::min(todo.size(), start + batch_size);
    // Members that share knobs share NVRTC's output (the builder keeps it): one of each knob
    // assignment not compiled yet goes first, the rest after, instead of all compiling at once.
    std::vector<std::size_t> first, rest;
    for (std::size_t k = start; k < end; ++k)
      (compiled.insert(u.members[todo[k]].genome.knobs).second ? first : rest).push_back(k);
    std::vector<evaluator::BuildResult> built(end - start);
    for (const auto* phase : {&first, &rest}) {
      std::vector<evaluator::BuildRequest> reqs;
      for (const auto k : *phase) reqs.push_back(request(u.members[todo[k]].genome));
      auto results = builder.build_all(reqs);
      for (std::size_t i = 0; i < phase->size(); ++i) built[(*phase)[i] - start] = std::move(results[i]);
    }
    auto batch = std::make_unique<MeasureBatch>();
    for (std::size_t k = start; k < end; ++k) {
      UniverseMember& m = u.members[todo[k]];
      const auto& b = built[k - start];
      ++res.built;
      m.build_seconds = b.seconds;
      m.resources = b.resources;
      m.ptx_hash = b.ptx.empty() ? "" : evaluator::sha256_hex(b.ptx);
      m.ptx_profile.clear();
      if (b.ok) {
        try {
          m.ptx_profile = profile_ptx(b.ptx);
        } catch (const std::invalid_argument&) {
          // PTX our parser does not take: the member gets no IR columns, as in a campaign.
        }
      }
      if (!b.ok) {
        m.build = "failed";
        m.stage = b.stage;
        m.reason = cut(b.error);
        ++res.failed;
        continue;
      }
      const auto why = screen_reasons(op, spec.config, shapes, m.genome, b, u.max_spill_bytes);
      if (!why.empty()) {
        m.build = "screened";
        m.stage = "screen";
        m.reason.clear();
        for (const auto& w : why) m.reason += (m.reason.empty() ? "" : "\n") + w;
        m.reason = cut(m.reason);
        ++res.screened;
        continue;
      }
      m.build = "ok";
      m.stage.clear();
      m.reason.clear();
      if (!measuring) continue;
      MeasureItem it;
      it.genome_hash = m.genome_hash;
      it.ptx_hash = m.ptx_hash;
      it.knobs = m.genome.knobs;
      it.cubin = b.cubin;
      batch->members.push_back(todo[k]);
      batch->items.push_back(std::move(it));
    }
    log << "built " << (end) << "/" << todo.size() << " (" << res.failed << " failed, " << res.screened << " screened)"
        << std::endl;
    if (!measuring) {
      flush(u);
      continue;
    }
    if (!batch->items.empty()) {
      batch->common = common_request();
      work.push(batch.release());
      ++in_flight;
    }
    // Absorb what came back meanwhile; keep at most one batch per measurer waiting, so the
    // builds run ahead of the GPU without holding every cubin in memory.
    MeasureBatch* raw = nullptr;
    while (done.try_pop(raw)) absorb_batch(std::unique_ptr<MeasureBatch>(raw));
    while (in_flight > 2 * measurers.size()) {
      done.pop(raw);
      absorb_batch(std::unique_ptr<MeasureBatch>(raw));
    }
  }
  if (measuring && time_up()) out_of_time = true;
  while (in_flight > 0) {
    MeasureBatch* raw = nullptr;
    done.pop(raw);
    if (time_up()) out_of_time = true;
    absorb_batch(std::unique_ptr<MeasureBatch>(raw));
  }
  for (std::size_t i = 0; i < threads.size(); ++i) work.push(nullptr);
  for (auto& t : threads) t.join();
  // What a later run of the same command would still measure.
  if (measuring)
    for (const auto& m : u.members)
      if (!m.measured() && (m.build == "ok" || m.build == "pending")) ++res.left;
  if (res.stop_reason.empty()) res.stop_reason = !measuring ? "static" : (out_of_time.load() || res.left > 0 ? "time" : "done");
  flush(u);
  res.wall_s = now_s() - t0;
  return res;
}

}  // namespace ptxevo::search
