#include "cli/build_command.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "evaluator/build_cache.hpp"
#include "evaluator/builder.hpp"
#include "evaluator/evaluation.hpp"
#include "evaluator/spec.hpp"
#include "mutators/pass.hpp"
#include "cli/spec_context.hpp"
#include "cli/campaign_command.hpp"
#include "search/genome_build.hpp"

namespace ptxevo::cli {

using namespace evaluator;
// Ordered: launch.json keeps the order it is documented in, for people reading it.
using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

// Bumped when launch.json changes in a way a reader must know about.
constexpr int kLaunchFormat = 1;

bool shape_selection(const std::string& name, ShapeSelection* sel) {
  if (name == "benchmark") *sel = {-1, false, false, true};
  else if (name == "correctness") *sel = {0, true, false, false};
  else if (name == "heldout") *sel = {0, false, true, false};
  else if (name == "all") *sel = {-1, true, true, true};
  else return false;
  return true;
}

json dim3_json(const Dim3& d) { return json::array({d.x, d.y, d.z}); }

json knobs_json(const Knobs& k) {
  json j = json::object();
  for (const auto& [name, v] : k) {
    if (const auto* i = std::get_if<std::int64_t>(&v)) j[name] = *i;
    else j[name] = std::get<std::string>(v);
  }
  return j;
}

json arg_json(const KernelArg& a, std::size_t index, const std::string& entry) {
  if (const auto* t = std::get_if<ArgTensor>(&a)) {
    // An empty name is a null pointer (an optional tensor that is absent).
    return t->name.empty() ? json{{"kind", "null"}} : json{{"kind", "tensor"}, {"tensor", t->name}};
  }
  if (const auto* v = std::get_if<std::int32_t>(&a)) return {{"kind", "scalar"}, {"type", "i32"}, {"value", *v}};
  if (const auto* v = std::get_if<std::int64_t>(&a)) return {{"kind", "scalar"}, {"type", "i64"}, {"value", *v}};
  // A float widened to double prints a value that rounds back to the same float.
  if (const auto* v = std::get_if<float>(&a)) return {{"kind", "scalar"}, {"type", "f32"}, {"value", *v}};
  if (const auto* v = std::get_if<double>(&a)) return {{"kind", "scalar"}, {"type", "f64"}, {"value", *v}};
  throw std::invalid_argument("argument " + std::to_string(index) + " of entry '" + entry +
                              "' is a TMA tensor map, which launch.json cannot describe yet; "
                              "benchmark this candidate with `ptxevo eval` instead");
}

// The build's tensors: its scratch sized for its knobs (Op::build_tensors).
json tensors_json(const Spec& spec, const Op& op, const Shape& shape, const Knobs& knobs) {
  json out = json::array();
  for (const auto& d : op.build_tensors(shape, spec.config, knobs)) {
    json t = {{"name", d.name}, {"dtype", to_string(d.dtype)}, {"shape", d.shape}, {"role", to_string(d.role)}};
    if (d.role == Role::Out || d.role == Role::InOut) {
      auto it = spec.tolerances.find(d.name);
      const Tolerance tol = it != spec.tolerances.end() ? it->second : op.tolerance(d.name, spec.config);
      t["tolerance"] = {{"rel_l2", tol.rel_l2}, {"max_abs", tol.max_abs}};
    }
    out.push_back(std::move(t));
  }
  return out;
}

json resources_json(const BuildResult& b, const std::string& toolchain) {
  json res = json::array();
  for (const auto& f : b.resources)
    res.push_back({{"function", f.name}, {"is_entry", f.is_entry}, {"registers", f.registers},
                   {"spill_stores", f.spill_stores}, {"spill_loads", f.spill_loads}, {"stack_frame", f.stack_frame},
                   {"shared_bytes", f.shared_bytes}});
  return {{"toolchain", toolchain}, {"key", b.key},       {"cache_hit", b.cache_hit}, {"seconds", b.seconds},
          {"resources", res},       {"nvrtc_log", b.nvrtc_log}, {"link_log", b.link_log}};
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool write_file(const fs::path& path, std::string_view data, std::ostream& err) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  f.close();
  if (!f) {
    err << path.string() << ": error: cannot write the file\n";
    return false;
  }
  return true;
}

// launch.json (format in docs/evaluator.md). Throws std::invalid_argument for a launch plan it
// cannot describe.
json launch_document(const Spec& spec, const Op& op, const PreparedEvaluation& p, const BuildOptions& o,
                     const std::string& toolchain) {
  json shapes = json::array();
  for (const auto& sc : p.shapes) {
    json dims = json::object();
    for (const auto& [name, v] : sc.shape) dims[name] = v;
    shapes.push_back({{"class", to_string(sc.cls)},
                      {"dims", std::move(dims)},
                      {"tensors", tensors_json(spec, op, sc.shape, p.candidate_knobs)},
                      {"kernels", launch_plan_json(op.launch_plan(sc.shape, spec.config, p.candidate_knobs))},
                      {"bytes", op.bytes(sc.shape, spec.config)},
                      {"flops", op.flops(sc.shape, spec.config)}});
  }
  const std::string source = !o.ptx.empty() ? o.ptx : !o.source.empty() ? o.source : baseline_seed(spec)->source_path;
  const std::string_view cubin(reinterpret_cast<const char*>(p.candidate.cubin.data()), p.candidate.cubin.size());
  return {
      {"format", kLaunchFormat},
      {"op", spec.op},
      {"arch", spec.arch},
      {"config", spec.config},
      {"knobs", knobs_json(p.candidate_knobs)},
      {"toolchain", toolchain},
      {"spec", {{"path", fs::absolute(spec.path).string()}, {"sha256", sha256_hex(read_file(spec.path))}}},
      {"candidate", {{"kind", o.ptx.empty() ? "template" : "ptx"}, {"path", fs::absolute(source).string()}}},
      {"cubin_sha256", sha256_hex(cubin)},
      {"shapes", std::move(shapes)},
  };
}

}  // namespace

bool parse_knob_list(const std::string& text, Knobs& knobs, std::string* error) {
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      *error = "--knobs: expected NAME=VALUE, got '" + item + "'";
      return false;
    }
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    char* end = nullptr;
    const long long v = std::strtoll(value.c_str(), &end, 0);
    if (!value.empty() && end && *end == '\0') knobs[name] = static_cast<std::int64_t>(v);
    else knobs[name] = value;
  }
  return true;
}

json launch_plan_json(const LaunchPlan& plan) {
  json kernels = json::array();
  for (const auto& k : plan.kernels) {
    json args = json::array();
    for (std::size_t i = 0; i < k.args.size(); ++i) args.push_back(arg_json(k.args[i], i, k.entry));
    kernels.push_back({{"entry", k.entry},
                       {"grid", dim3_json(k.grid)},
                       {"block", dim3_json(k.block)},
                       {"shared_bytes", k.shared_bytes},
                       {"cluster", dim3_json(k.cluster)},
                       {"programmatic", k.programmatic},
                       {"args", std::move(args)}});
  }
  return kernels;
}

int run_build(const BuildOptions& o, std::ostream& out, std::ostream& err) {
  ShapeSelection sel;
  if (!shape_selection(o.shapes, &sel)) {
    err << "error: --shapes must be benchmark, correctness, heldout or all, got '" << o.shapes << "'\n";
    return 1;
  }
  int status = 0;
  const auto ctx = SpecContext::load(o.spec, o.arch, o.no_cache, err, &status);
  if (!ctx) return status;
  const Spec& spec = ctx->spec();
  const Op& op = ctx->op();
  CandidateInput input;
  if (!candidate_input(*ctx, o.spec, {o.source, o.ptx, o.knobs, o.db, o.candidate}, &input, err)) return 1;
  const Builder& builder = ctx->builder();
  // The same preparation as `ptxevo eval`: build, knob constraints, static checks per launch.
  const PreparedEvaluation p = prepare_evaluation(spec, op, builder, input, sel, /*seed=*/0);
  if (!p.reasons.empty()) {
    err << "error: the candidate was not written:\n";
    for (const auto& r : p.reasons) err << "  " << r << "\n";
    return 1;
  }

  json launch;
  try {
    launch = launch_document(spec, op, p, o, builder.toolchain());
  } catch (const std::invalid_argument& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }

  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) {
    err << o.out_dir << ": error: cannot create the directory: " << ec.message() << "\n";
    return 1;
  }
  const fs::path dir(o.out_dir);
  const std::string_view cubin(reinterpret_cast<const char*>(p.candidate.cubin.data()), p.candidate.cubin.size());
  // launch.json last: a directory without it is incomplete, and harnesses refuse it.
  if (!write_file(dir / "kernel.cubin", cubin, err) || !write_file(dir / "kernel.ptx", p.candidate.ptx, err) ||
      !write_file(dir / "resources.json", resources_json(p.candidate, builder.toolchain()).dump(2) + "\n", err) ||
      !write_file(dir / "launch.json", launch.dump(2) + "\n", err))
    return 1;
  out << "wrote " << (dir / "kernel.cubin").string() << ", kernel.ptx, resources.json, launch.json ("
      << p.shapes.size() << " shapes, " << (p.candidate.cache_hit ? "cache hit" : "built") << ")\n";
  for (const auto& f : p.candidate.resources)
    if (f.is_entry)
      out << "  " << f.name << ": " << f.registers << " registers, " << f.spill_stores << " B spill stores, "
          << f.stack_frame << " B stack, " << f.shared_bytes << " B static shared\n";
  return 0;
}

}  // namespace ptxevo::cli
