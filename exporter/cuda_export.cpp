#include "exporter/cuda_export.hpp"

#include <cstdlib>
#include <set>
#include <fstream>
#include <sstream>

#include "evaluator/build_cache.hpp"
#include "evaluator/subprocess.hpp"
#include "evaluator/template_source.hpp"
#include "ir/parser.hpp"
#include "mutators/pass.hpp"
#include "search/genome_build.hpp"

namespace ptxevo::exporter {

namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string knob_text(const evaluator::KnobValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  return std::get<std::string>(v);
}

std::string edits_text(const search::Genome& g) {
  if (g.edits.empty()) return "none";
  std::string s;
  for (const auto& e : g.edits) {
    s += (s.empty() ? "" : ", ") + e.pass;
    std::string params;
    for (const auto& [k, v] : e.params) params += (params.empty() ? "" : " ") + k + "=" + v;
    if (!params.empty()) s += "(" + params + ")";
  }
  return s;
}

}  // namespace

CandidateBuild build_candidate(const evaluator::Spec& spec, const evaluator::Op& op, const search::Genome& genome,
                               evaluator::BuildCache* cache) {
  const evaluator::SeedTemplate* seed = nullptr;
  for (const auto& s : spec.seeds)
    if (s.name == genome.seed) seed = &s;
  if (!seed) throw ExportError("spec " + spec.path + " has no seed template named '" + genome.seed + "'");
  CandidateBuild c;
  c.knobs = evaluator::default_knobs(*seed);
  for (const auto& [name, value] : genome.knobs) {
    if (!c.knobs.count(name)) throw ExportError("seed '" + seed->name + "' has no knob '" + name + "'");
    c.knobs[name] = value;
  }
  c.template_path = seed->source_path;
  if (genome.source.empty()) {
    std::string why;
    auto t = evaluator::read_template(seed->source_path, &why);
    if (!t) throw ExportError("the seed template: " + why);
    c.template_source = std::move(t->text);
  } else {
    c.template_source = genome.source;
  }
  if (c.template_source.empty()) throw ExportError(seed->source_path + ": the seed template is empty");
  c.defines = op.template_defines(spec.config);

  evaluator::BuildRequest req;
  req.name = seed->name;
  req.source = c.template_source;
  req.source_path = seed->source_path;
  req.defines = c.defines;
  req.knobs = c.knobs;
  req.arch = spec.arch;
  if (!genome.edits.empty())
    req.ptx_pass = search::edit_pass(genome.edits,
                                     std::make_shared<const mutators::PassRegistry>(mutators::builtin_passes()));
  evaluator::Builder builder(cache);
  c.toolchain = builder.toolchain();
  c.build = builder.build(req);
  if (!c.build.ok) throw ExportError("the candidate does not build (stage " + c.build.stage + "):\n" + c.build.error);
  return c;
}

CudaExport cuda_export(const evaluator::Spec& spec, const evaluator::Op& op, const search::Genome& genome,
                       const CandidateBuild& c, const Provenance& provenance) {
  CudaExport x;
  x.file_name = "ptxevo_" + spec.op + ".cu";
  const ir::Module& m = *c.build.module;
  std::set<std::string> defined;
  for (const auto* f : m.functions())
    if (f->is_entry && f->has_body) defined.insert(f->name);
  x.launcher = op_launcher(op, spec.config, c.knobs, defined);
  for (const auto& e : x.launcher.entries)
    if (!m.find_function(e))
      throw ExportError("the launch plan names entry " + e + ", which the candidate's PTX does not define");
  // Always inline PTX: nvcc compiles the template to different PTX than NVRTC did (32-bit instead of
  // 64-bit shared-memory addresses), so only the candidate's own PTX is the measured kernel.
  x.inline_ptx = true;
  const bool has_template = genome.edits.empty();

  std::string s;
  s += "// " + x.file_name + ": the " + spec.op + " kernel for " + spec.arch + ", exported by `ptxevo export`.\n";
  s += "// Build: nvcc -arch=" + spec.arch + " -rdc=true -c " + x.file_name +
       ", then a device link (nvcc -dlink; CMake: CUDA_SEPARABLE_COMPILATION), or load it through the torch\n"
       "// export. Relocatable compilation gives the machine code ptxevo timed (nvJitLink's); a whole-program\n"
       "// build of the same PTX can differ (docs/export.md, \"Same machine code\").\n";
  s += "// Call ptxevo_" + spec.op + "_launch(...) below; it checks its arguments and launches on the given stream.\n";
  s += "//\n";
  s += provenance_comment(provenance);
  s += "//\n// Template: " + c.template_path + " (sha256 " + evaluator::sha256_hex(c.template_source) + ")\n";
  std::string knobs;
  for (const auto& [k, v] : c.knobs) knobs += (knobs.empty() ? "" : " ") + k + "=" + knob_text(v);
  s += "// Knobs: " + knobs + "\n";
  s += "// PTX edits: " + edits_text(genome) + "\n";
  s += "// Candidate PTX sha256 " + evaluator::sha256_hex(c.build.ptx) + ", built by " + c.toolchain + "\n";
  s += "// The entries below are the candidate's PTX as inline asm (docs/export.md, \"Inline PTX\").\n";
  if (has_template)
    s += "// Without PTX edits the template is included too: build with -DPTXEVO_FROM_TEMPLATE to compile it\n"
         "// instead (readable, other archs; nvcc's PTX differs from NVRTC's in shared-memory address width).\n";
  s += "\n// The spec's options (" + spec.path + ") and the knobs, baked in.\n";
  for (const auto& [k, v] : c.defines) s += "#define " + k + " " + v + "\n";
  for (const auto& [k, v] : c.knobs) s += "#define " + k + " " + knob_text(v) + "\n";
  s += "\n";
  if (has_template) {
    s += "#ifdef PTXEVO_FROM_TEMPLATE\n// ---- " + c.template_path + " ----\n" + c.template_source;
    if (!c.template_source.empty() && c.template_source.back() != '\n') s += "\n";
    s += "#else  // PTXEVO_FROM_TEMPLATE\n";
  }
  {
    s += "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n\n";
    std::vector<LoweredEntry> lowered;
    bool dynamic = false;
    unsigned align = 16;
    const auto& by_entry = x.launcher.params_by_entry;
    for (const auto* f : m.functions()) {
      if (!f->is_entry) continue;
      if (!by_entry.empty() && !by_entry.count(f->name)) continue;  // not in the plan: not exported
      lowered.push_back(lower_entry(m, *f, by_entry.empty() ? x.launcher.kernel_params : by_entry.at(f->name)));
      dynamic = dynamic || lowered.back().uses_dynamic_smem;
      if (lowered.back().uses_dynamic_smem) align = std::max(align, lowered.back().dynamic_smem_align);
    }
    if (dynamic)
      s += "// Dynamic shared memory, named by the entries' inline PTX.\nextern __shared__ __align__(" +
           std::to_string(align) + ") unsigned char " + kDynamicSmemName + "[];\n\n";
    for (const auto& e : lowered) s += e.definition + "\n";
  }
  if (has_template) s += "#endif  // PTXEVO_FROM_TEMPLATE\n";
  s += x.launcher.code;
  x.source = std::move(s);
  return x;
}

std::string find_nvcc() {
  std::vector<std::string> candidates;
  if (const char* h = std::getenv("CUDA_HOME"); h && *h) candidates.push_back(std::string(h) + "/bin/nvcc");
  candidates.push_back("/usr/local/cuda/bin/nvcc");
  for (const auto& c : candidates)
    if (std::filesystem::exists(c)) return c;
  return "";
}

NvccCheck verify_with_nvcc(const std::string& nvcc, const std::filesystem::path& cu, const std::string& arch,
                           const ir::Module& candidate, const std::filesystem::path& work_dir) {
  NvccCheck r;
  const auto out = work_dir / (cu.stem().string() + ".nvcc.ptx");
  const auto proc = evaluator::run_process({nvcc, "-arch=" + arch, "-ptx", "-o", out.string(), cu.string()});
  if (proc.exit_code != 0) {
    r.log = proc.output;
    return r;
  }
  r.ptx = read_text(out);
  const auto parsed = ir::parse_ptx(r.ptx);
  if (!parsed.ok()) {
    r.log = parsed.error->format(out.string());
    return r;
  }
  r.compiled = true;
  r.comparison = compare_modules(candidate, *parsed.module);
  return r;
}

}  // namespace ptxevo::exporter
