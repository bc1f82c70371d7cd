#include "exporter/export_files.hpp"

#include <fstream>
#include <sstream>

#include "evaluator/build_cache.hpp"
#include "evaluator/eval_types.hpp"
#include "evaluator/evaluation.hpp"
#include "exporter/declared_export.hpp"
#include "exporter/torch_export.hpp"
#include "search/campaign_files.hpp"
#include "search/genome_build.hpp"
#include "tracedb/queries.hpp"
#include "tracedb/sqlite_handle.hpp"

namespace ptxevo::exporter {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::pair<std::string, std::string> key_value(const std::string& item, const std::string& what) {
  const auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0) throw ExportError(what + ": expected NAME=VALUE, got '" + item + "'");
  return {item.substr(0, eq), item.substr(eq + 1)};
}

evaluator::Knobs parse_knobs(const std::string& text) {
  evaluator::Knobs k;
  for (const auto& item : split(text, ',')) {
    auto [name, value] = key_value(item, "--knobs");
    char* end = nullptr;
    const long long v = std::strtoll(value.c_str(), &end, 0);
    if (!value.empty() && end && *end == '\0') k[name] = static_cast<std::int64_t>(v);
    else k[name] = value;
  }
  return k;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) throw ExportError(p.string() + ": cannot write the file");
}

}  // namespace

std::vector<search::PtxEdit> parse_edits(const std::string& text) {
  std::vector<search::PtxEdit> edits;
  const auto passes = mutators::builtin_passes();
  for (const auto& item : split(text, ',')) {
    const auto parts = split(item, ':');
    search::PtxEdit e;
    e.pass = parts.at(0);
    if (!passes.find(e.pass))
      throw ExportError("--edits: no PTX pass named '" + e.pass + "' (`ptxevo mutate --list` lists them)");
    for (std::size_t i = 1; i < parts.size(); ++i) e.params.insert(key_value(parts[i], "--edits " + e.pass));
    edits.push_back(std::move(e));
  }
  return edits;
}

ResolvedCandidate resolve_candidate(const ExportRequest& r, std::shared_ptr<const evaluator::OpRegistry> ops) {
  ResolvedCandidate c;
  if (!ops) throw ExportError("export: no op registry");
  c.registry = std::move(ops);
  const evaluator::OpRegistry& registry = *c.registry;
  std::string spec_path = r.spec;
  std::optional<evaluator::SpecResult> loaded;
  std::string campaign_arch;
  if (!r.db.empty()) {
    if (!r.knobs.empty() || !r.edits.empty())
      throw ExportError("--knobs and --edits describe a genome without a database; with --db the candidate has its own");
    const std::int64_t id = r.candidate ? *r.candidate : campaign_winner(r.db, r.campaign);
    c.provenance = read_provenance(r.db, id);
    const std::int64_t campaign = c.provenance.campaign_id.value_or(0);
    try {
      auto db = tracedb::sqlite::Connection::open(r.db);
      if (auto arch = tracedb::campaign_arch(db, campaign)) campaign_arch = std::move(*arch);
      // Without a SPEC, the spec and templates the campaign recorded: the database alone suffices.
      // A database from before they were recorded names the spec's path (before any "#arch#mode").
      if (spec_path.empty() && !tracedb::campaign_files(db, campaign).empty())
        loaded = search::load_campaign_spec(db, campaign, "", registry);
      else if (spec_path.empty())
        spec_path = c.provenance.spec_path.substr(0, c.provenance.spec_path.find('#'));
    } catch (const std::exception& e) {
      throw ExportError(r.db + ": " + e.what());
    }
    if (!loaded) {
      const std::string text = read_text(spec_path);
      if (text.empty())
        throw ExportError(spec_path + ": cannot read the campaign's spec (give its path as SPEC; databases written from now on keep it)");
      if (evaluator::sha256_hex(text) != c.provenance.spec_hash)
        throw ExportError(spec_path + ": the spec changed since campaign " + std::to_string(campaign) +
                          " recorded it (sha256 " + c.provenance.spec_hash +
                          "); export from the spec the campaign ran, or leave SPEC out to use the copy in " + r.db);
    }
    try {
      c.genome = search::genome_from_json(nlohmann::json::parse(c.provenance.genome_json));
    } catch (const std::exception& e) {
      throw ExportError("candidate " + std::to_string(id) + " in " + r.db + ": " + e.what());
    }
  } else {
    if (spec_path.empty()) throw ExportError("give a SPEC, or --db with a campaign or a candidate");
    if (r.candidate || r.campaign) throw ExportError("--candidate and --campaign need --db");
    c.genome.knobs = parse_knobs(r.knobs);
    c.genome.edits = parse_edits(r.edits);
  }
  evaluator::SpecResult sr = loaded ? std::move(*loaded) : evaluator::load_spec(spec_path, registry);
  if (!sr.spec) throw ExportError(sr.error->format());
  c.spec = std::move(*sr.spec);
  // The target: --arch, else the campaign's, else the spec's.
  if (!r.arch.empty()) c.spec.arch = r.arch;
  else if (!campaign_arch.empty()) c.spec.arch = campaign_arch;
  if (r.db.empty()) {
    const auto* base = evaluator::baseline_seed(c.spec);
    if (!base) throw ExportError(spec_path + ": the spec has no seed template");
    c.genome.seed = base->name;
    if (!r.seed.empty()) {
      std::string names;
      bool found = false;
      for (const auto& s : c.spec.seeds) {
        names += (names.empty() ? "" : ", ") + s.name;
        found = found || s.name == r.seed;
      }
      if (!found) throw ExportError("--seed-name " + r.seed + ": " + spec_path + " has no such seed (seeds: " + names + ")");
      c.genome.seed = r.seed;
    }
  } else if (!r.seed.empty()) {
    throw ExportError("--seed-name is for a spec without --db (a database's candidate names its seed)");
  }
  std::optional<evaluator::BuildCache> cache;
  if (!r.no_cache) cache.emplace(evaluator::BuildCache::default_dir());
  c.op = registry.find(c.spec.op);
  // Knobs under the op's old names (an older database, or --knobs) take the current ones.
  try {
    c.genome.knobs = evaluator::canonical_knobs(*c.op, std::move(c.genome.knobs));
  } catch (const std::invalid_argument& e) {
    throw ExportError(std::string("knobs: ") + e.what());
  }
  c.build = build_candidate(c.spec, *c.op, c.genome, cache ? &*cache : nullptr);
  return c;
}

ExportOutcome write_export(const ExportRequest& r, const ResolvedCandidate& c) {
  if (r.format != "cuda" && r.format != "torch")
    throw ExportError("--format must be cuda, torch or ptx, got '" + r.format + "'");
  const CudaExport cu = cuda_export(c.spec, *c.op, c.genome, c.build, c.provenance);
  std::error_code ec;
  fs::create_directories(r.out_dir, ec);
  if (ec) throw ExportError(r.out_dir + ": cannot create the directory: " + ec.message());
  const fs::path dir(r.out_dir);
  ExportOutcome o;
  o.inline_ptx = cu.inline_ptx;
  write_text(dir / cu.file_name, cu.source);
  o.files.push_back((dir / cu.file_name).string());

  if (r.verify) {
    const std::string nvcc = find_nvcc();
    if (!nvcc.empty()) {
      NvccCheck check = verify_with_nvcc(nvcc, dir / cu.file_name, c.spec.arch, *c.build.build.module, dir);
      fs::remove(dir / (fs::path(cu.file_name).stem().string() + ".nvcc.ptx"), ec);
      if (!check.compiled)
        throw ExportError((dir / cu.file_name).string() + ": nvcc rejected the exported file (please report it):\n" +
                          check.log);
      if (!check.comparison.same)
        throw ExportError((dir / cu.file_name).string() + ": nvcc's PTX is not the candidate's: " +
                          check.comparison.difference + " (please report it)");
      o.check = std::move(check);
    }
  }

  nlohmann::ordered_json meta;
  meta["format"] = r.format;
  meta["op"] = c.spec.op;
  meta["arch"] = c.spec.arch;
  meta["spec"] = {{"path", fs::absolute(c.spec.path).string()}, {"sha256", evaluator::sha256_hex(read_text(c.spec.path))}};
  meta["genome"] = c.genome.to_json();
  meta["knobs"] = evaluator::knobs_to_json(c.build.knobs);
  meta["candidate_ptx_sha256"] = evaluator::sha256_hex(c.build.build.ptx);
  meta["toolchain"] = c.build.toolchain;
  meta["inline_ptx"] = cu.inline_ptx;
  meta["verified"] = o.check ? nlohmann::ordered_json{{"entries", o.check->comparison.entries},
                                                      {"instructions", o.check->comparison.instructions}}
                             : nlohmann::ordered_json();
  meta["provenance"] = provenance_json(c.provenance);

  if (r.format == "torch") {
    const std::string tag = evaluator::sha256_hex(cu.source).substr(0, 12);
    const std::string what = "Candidate: " + (c.provenance.candidate_id
                                                  ? "#" + std::to_string(*c.provenance.candidate_id) + " of " + c.provenance.db_path
                                                  : std::string("spec ") + c.spec.path + ", genome " + c.genome.describe());
    const auto* declared = dynamic_cast<const declared_ops::DeclaredOp*>(c.op);
    const TorchFiles t = declared ? declared_torch_export(*declared, c.spec, cu.file_name, tag, cu.launcher.prototype, what)
                                  : torch_export(*c.op, c.spec, cu.file_name, tag, cu.launcher.prototype, what);
    write_text(dir / t.binding_name, t.binding);
    write_text(dir / t.module_name, t.module);
    o.files.push_back((dir / t.binding_name).string());
    o.files.push_back((dir / t.module_name).string());
    meta["torch"] = {{"module", t.module_name}, {"binding", t.binding_name}, {"extension", "ptxevo_" + c.spec.op + "_" + tag}};
  }
  write_text(dir / "export.json", meta.dump(2) + "\n");
  o.files.push_back((dir / "export.json").string());
  return o;
}

}  // namespace ptxevo::exporter
