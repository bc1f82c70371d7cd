#include "search/llm_evidence.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <stdexcept>
#include <variant>

#include "evaluator/eval_types.hpp"
#include "evaluator/knob_constraints.hpp"
#include "ir/analysis/instruction_mix.hpp"
#include "search/operator_posterior.hpp"
#include "tracedb/queries.hpp"

namespace ptxevo::search {

using nlohmann::json;

namespace {

std::string clip_text(const std::string& s, std::size_t n) { return s.size() <= n ? s : s.substr(0, n) + " ..."; }

const char* c_type(evaluator::DType t) {
  switch (t) {
    case evaluator::DType::F64: return "double";
    case evaluator::DType::F32: return "float";
    case evaluator::DType::F16: return "__half";
    case evaluator::DType::BF16: return "__nv_bfloat16";
    case evaluator::DType::I64: return "long long";
    case evaluator::DType::I32: return "int";
    case evaluator::DType::U8: return "unsigned char";
  }
  return "void";
}

// The launch contract at the parent's knobs: every entry the plan launches for the spec's
// benchmark and correctness shapes (never the held-out ones), each once, with its parameters
// named and typed as the engine passes them, and the shapes and launch configurations it gets.
std::string abi_text(const evaluator::Spec& spec, const evaluator::Op& op, const Genome& parent) {
  struct Entry {
    std::string params;
    std::vector<std::string> uses;
  };
  std::vector<std::pair<std::string, Entry>> entries;  // in first-launch order
  std::vector<evaluator::Shape> shapes = spec.benchmark_shapes;
  shapes.insert(shapes.end(), spec.correctness_shapes.begin(), spec.correctness_shapes.end());
  std::string refused;
  for (const auto& shape : shapes) {
    evaluator::LaunchPlan plan;
    std::vector<evaluator::TensorDesc> descs;
    try {
      plan = op.launch_plan(shape, spec.config, parent.knobs);
      descs = op.tensors(shape, spec.config);
    } catch (const std::exception& e) {
      if (refused.empty()) refused = evaluator::shape_to_string(shape) + ": " + e.what();
      continue;
    }
    for (const auto& l : plan.kernels) {
      std::string params;
      for (std::size_t i = 0; i < l.args.size(); ++i) {
        const auto& a = l.args[i];
        std::string p;
        if (const auto* t = std::get_if<evaluator::ArgTensor>(&a)) {
          const auto d = std::find_if(descs.begin(), descs.end(), [&](const auto& x) { return x.name == t->name; });
          if (t->name.empty()) p = "a pointer passed as nullptr (an optional tensor these options leave out)";
          else if (d == descs.end()) p = "a pointer to engine scratch '" + t->name + "'";
          else p = std::string(d->role == evaluator::Role::In ? "const " : "") + c_type(d->dtype) + "* " + t->name;
        } else if (std::holds_alternative<std::int32_t>(a)) {
          p = "int";
        } else if (std::holds_alternative<std::int64_t>(a)) {
          p = "long long";
        } else if (std::holds_alternative<float>(a)) {
          p = "float";
        } else if (std::holds_alternative<double>(a)) {
          p = "double";
        } else {
          p = "const __grid_constant__ CUtensorMap";
        }
        params += (i ? ", " : "") + p;
      }
      const std::string use = evaluator::shape_to_string(shape) + ": grid (" + std::to_string(l.grid.x) + "," +
                              std::to_string(l.grid.y) + "," + std::to_string(l.grid.z) + ") block (" +
                              std::to_string(l.block.x) + "," + std::to_string(l.block.y) + "," +
                              std::to_string(l.block.z) + ")" +
                              (l.cluster.x * l.cluster.y * l.cluster.z > 1 ? " cluster " + std::to_string(l.cluster.x) : "") +
                              (l.shared_bytes ? ", " + std::to_string(l.shared_bytes) + " B dynamic shared memory" : "");
      auto it = std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.first == l.entry; });
      if (it == entries.end()) {
        entries.push_back({l.entry, Entry{params, {use}}});
      } else if (it->second.uses.size() < 4) {
        it->second.uses.push_back(use);
      }
    }
  }
  std::string out = entries.empty() ? "" : "Every entry below must stay, with exactly these parameters in this order:\n";
  for (const auto& [name, e] : entries) {
    out += "- extern \"C\" __global__ void " + name + "(" + e.params + ")\n  launched for";
    for (std::size_t i = 0; i < e.uses.size(); ++i) out += std::string(i ? ";" : "") + " " + e.uses[i];
    out += e.uses.size() >= 4 ? "; ...\n" : "\n";
  }
  if (!refused.empty()) out += "(the plan refuses " + refused + ")\n";
  return out;
}

// What the model may know of the spec: the op, its options and the benchmark and correctness
// shapes. Never the held-out shapes, and no file names the model cannot open.
std::string prompt_spec(const evaluator::Spec& spec) {
  std::string s = "op = \"" + spec.op + "\"\narch = \"" + spec.arch + "\"\n";
  if (!spec.config.empty()) {
    s += "\n[options]\n";
    for (const auto& [k, v] : spec.config) s += k + " = \"" + v + "\"\n";
  }
  s += "\n[shapes]\n";
  for (const auto& [name, list] : {std::pair{"benchmark", &spec.benchmark_shapes}, std::pair{"correctness", &spec.correctness_shapes}}) {
    s += std::string(name) + " = [";
    for (std::size_t i = 0; i < list->size(); ++i) {
      s += i ? ", {" : "{";
      std::string d;
      for (const auto& [k, v] : (*list)[i]) d += (d.empty() ? " " : ", ") + k + " = " + std::to_string(v);
      s += d + " }";
    }
    s += "]\n";
  }
  if (!spec.tolerances.empty()) {
    s += "\n";
    for (const auto& [out, t] : spec.tolerances)
      s += "[tolerance." + out + "]\nrel_l2 = " + std::to_string(t.rel_l2) + "\nmax_abs = " + std::to_string(t.max_abs) + "\n";
  }
  return s;
}

}  // namespace

std::string knob_text(const evaluator::KnobValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  return std::get<std::string>(v);
}

agents::KnobDomains knob_domains(const evaluator::SeedTemplate& seed) {
  agents::KnobDomains d;
  for (const auto& k : seed.knobs)
    for (const auto& v : k.values) d[k.name].push_back(knob_text(v));
  return d;
}

std::string instruction_mix_line(const ir::Module& m) {
  // ir::categorize is the one place that decides what an instruction is; the prompt uses it too.
  std::array<std::size_t, ir::kInstrCategoryCount> total{};
  std::map<int, std::size_t> widths;
  for (const ir::Function* f : m.functions()) {
    const ir::InstructionMix mix = ir::instruction_mix(*f);
    for (std::size_t i = 0; i < total.size(); ++i) total[i] += mix.by_category[i];
    for (const auto& [bits, n] : mix.access_width) widths[bits] += n;
  }
  std::vector<std::pair<std::size_t, std::string>> sorted;
  for (std::size_t i = 0; i < total.size(); ++i)
    if (total[i] > 0) sorted.emplace_back(total[i], ir::to_string(static_cast<ir::InstrCategory>(i)));
  // Most frequent first, ties by name (std::sort with a total order: stable and deterministic).
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::string out;
  for (const auto& [n, name] : sorted) out += (out.empty() ? "" : ", ") + name + " " + std::to_string(n);
  std::string w;
  for (const auto& [bits, n] : widths)
    if (bits > 0) w += (w.empty() ? "" : ", ") + std::to_string(bits) + "-bit " + std::to_string(n);
  if (!w.empty()) out += "; memory accesses by width: " + w;
  return out;
}

std::string outcome_text(const std::string& state, const std::string& build_stage, const std::string& outcome) {
  if (state == "failed") return "failed at " + (build_stage.empty() ? std::string("build") : build_stage);
  // Replay and static campaigns build candidates they cannot time: say so rather than "measured".
  if (outcome == "unmeasured") return "built; not measured (no timing for it in this campaign's mode)";
  if (outcome.empty() || outcome == state) return state;
  return state + " (" + outcome + ")";
}

agents::PromptContext gather_evidence(tracedb::TraceDb& db, const evaluator::Spec& spec, const evaluator::Op& op,
                                      const EvidenceInput& in) {
  agents::PromptContext c;
  c.arch = in.arch;
  c.op = spec.op;
  c.spec_text = prompt_spec(spec);
  const Member& parent = *in.parent;
  c.abi = abi_text(spec, op, parent.genome);
  c.parent_label = "candidate " + std::to_string(parent.candidate_id) + (parent.genome.source.empty() ? " (seed template " + parent.genome.seed + ")" : " (agent-written source)");
  c.parent_source = in.parent_source;
  for (const auto& [k, v] : parent.genome.knobs) c.parent_knobs[k] = knob_text(v);
  for (const auto& s : spec.seeds) {
    if (s.name != parent.genome.seed || !parent.genome.source.empty()) continue;
    c.knob_domains = knob_domains(s);
    c.knob_constraints = s.constraints;
    c.knob_check = [seed = s](const std::map<std::string, std::string>& text) -> std::string {
      evaluator::Knobs k = evaluator::default_knobs(seed);
      for (const auto& [name, v] : text) {
        auto it = k.find(name);
        if (it == k.end()) continue;
        if (std::holds_alternative<std::int64_t>(it->second)) {
          try {
            it->second = static_cast<std::int64_t>(std::stoll(v));
          } catch (const std::exception&) {
            return "knob " + name + " = " + v + " is not an integer";
          }
        } else {
          it->second = v;
        }
      }
      for (const auto& rule : seed.constraints) {
        try {
          if (!evaluator::constraint_holds(rule, k)) return "the knobs violate the spec's constraint '" + rule + "'";
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      }
      return {};
    };
  }
  c.parent_fitness = parent.fitness;
  c.instruction_mix = in.instruction_mix;

  auto& conn = db.connection();
  if (const auto report_json = tracedb::latest_passing_report(conn, parent.candidate_id)) {
    try {
      const auto report = evaluator::report_from_json(json::parse(*report_json));
      for (const auto& sh : report.shapes) {
        if (sh.cls != evaluator::ShapeClass::Benchmark) continue;
        agents::ShapeFigure f;
        f.shape = evaluator::shape_to_string(sh.shape);
        if (sh.speedup) f.speedup = sh.speedup->ratio;
        if (sh.candidate_ms) {
          f.candidate_ms = sh.candidate_ms->median;
          f.fraction_of_floor = sh.fraction_of_floor;
        }
        c.shapes.push_back(f);
      }
    } catch (const std::exception&) {
      // An unreadable report leaves the section at n/a rather than failing the proposal.
    }
  }
  if (const auto resources = tracedb::candidate_resources_json(conn, parent.candidate_id)) {
    const auto res = json::parse(*resources, nullptr, false);
    if (res.is_array())
      for (const auto& f : res)
        c.resources.push_back({f.value("function", std::string()), f.value("registers", std::int64_t{0}),
                               f.value("spill_stores", std::int64_t{0}), f.value("spill_loads", std::int64_t{0}),
                               f.value("shared_bytes", std::int64_t{0})});
  }
  // Recent build and screen failures, then gate failures.
  for (const auto& f : tracedb::recent_build_failures(conn, in.campaign_id, 3))
    c.failures.push_back(f.operator_name + " child, " + f.stage + " failed:\n" + clip_text(f.log, 800));
  for (const auto& f : tracedb::recent_gate_failures(conn, in.campaign_id, 2))
    c.failures.push_back(f.operator_name + " child failed the gate: " + clip_text(f.reasons_json, 600));
  for (const auto& r : tracedb::recent_candidates(conn, in.campaign_id, 6)) {
    std::string what = "candidate " + std::to_string(r.id) + " by " + r.operator_name;
    if (!r.idea_name.empty()) what += " idea '" + r.idea_name + "' (" + r.idea_kind + ")";
    try {
      what += " (" + genome_from_json(json::parse(r.genome_json), op).describe() + ")";
    } catch (const std::exception&) {
    }
    std::string outcome = outcome_text(r.state, r.build_stage, r.outcome);
    if (r.latest_fitness) {
      char buf[48];
      std::snprintf(buf, sizeof buf, ", fitness %.3f", *r.latest_fitness);
      outcome += buf;
    }
    c.attempts.push_back({what, outcome});
  }
  // Lessons: how each operator's children fared in this campaign.
  for (const auto& t : tracedb::operator_tallies(conn, in.campaign_id, 8)) {
    std::string line = t.operator_name + ": " + std::to_string(t.children) + " children, " +
                       std::to_string(t.build_failures) + " failed to build, " + std::to_string(t.passed) +
                       " passed the gate";
    if (t.best_fitness) {
      char buf[48];
      std::snprintf(buf, sizeof buf, ", best fitness %.3f", *t.best_fitness);
      line += buf;
    }
    c.lessons.push_back(line);
  }
  // The LLM's own ideas: the best that passed, and the latest that did not.
  for (const auto& idea : tracedb::llm_ideas(conn, in.campaign_id, 8)) {
    std::string line = "LLM idea '" + idea.name + "': ";
    if (idea.best_passing_fitness) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "passed, fitness %.3f", *idea.best_passing_fitness);
      line += buf;
    } else {
      line += outcome_text(idea.state, idea.build_stage, "");
    }
    c.lessons.push_back(line);
  }
  // What earlier campaigns on this op family and arch learned about the operators.
  const std::string prefix = op_family(spec.op) + "|" + in.arch + "|";
  for (const auto& st : tracedb::operator_stats_with_prefix(conn, prefix, 6)) {
    if (st.hits + st.misses < 1) continue;
    char buf[160];
    std::snprintf(buf, sizeof buf, "across campaigns on %s/%s: operator %s paid off %.0f%% of %.0f tries",
                  op_family(spec.op).c_str(), in.arch.c_str(), st.key.substr(prefix.size()).c_str(),
                  100 * st.hits / (st.hits + st.misses), st.hits + st.misses);
    c.lessons.push_back(buf);
  }
  return c;
}

}  // namespace ptxevo::search
