#include "search/campaign_files.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "evaluator/build_cache.hpp"
#include "evaluator/template_source.hpp"

namespace ptxevo::search {

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

tracedb::CampaignFile make_file(std::string role, std::string name, std::string content) {
  tracedb::CampaignFile f{std::move(role), std::move(name), "", std::move(content)};
  f.sha256 = evaluator::sha256_hex(f.content);
  return f;
}

// Leading ".." segments of a relative name: how far above the spec's folder it reaches.
int levels_up(const fs::path& name) {
  int n = 0;
  for (const auto& part : name) {
    if (part != "..") break;
    ++n;
  }
  return n;
}

}  // namespace

std::vector<tracedb::CampaignFile> spec_files(const evaluator::Spec& spec, const evaluator::Op* op) {
  const fs::path spec_path(spec.path);
  std::vector<tracedb::CampaignFile> files;
  files.push_back(make_file("spec", spec_path.filename().string(), read_file(spec_path)));
  const fs::path dir = fs::absolute(spec_path).parent_path();
  const auto add = [&](const std::string& role, const std::string& path) {
    const fs::path src = fs::absolute(path).lexically_normal();
    std::string name = src.lexically_relative(dir).generic_string();
    if (name.empty()) name = src.generic_string();
    bool seen = false;
    for (const auto& f : files) seen = seen || f.name == name;
    if (!seen) files.push_back(make_file(role, name, read_file(src)));
  };
  for (const auto& seed : spec.seeds) {
    add("seed", seed.source_path);
    // The parts a split template includes, so the restored copy expands as the original did.
    std::string why;
    const auto t = evaluator::read_template(seed.source_path, &why);
    if (!t) throw std::runtime_error("seed template: " + why);
    for (const auto& part : t->parts) add("seed", part);
  }
  if (op)
    for (const auto& f : op->declaration_files()) add("op", f);
  return files;
}

std::optional<fs::path> restore_campaign_files(tracedb::sqlite::Connection& db, std::int64_t campaign, const fs::path& root) {
  const auto files = tracedb::campaign_files(db, campaign);
  const tracedb::CampaignFile* spec = nullptr;
  int depth = 0;
  for (const auto& f : files) {
    const fs::path name(f.name);
    if (name.is_absolute() || f.name.empty())
      throw std::runtime_error("campaign " + std::to_string(campaign) + " records a file with an absolute name: " + f.name);
    if (evaluator::sha256_hex(f.content) != f.sha256)
      throw std::runtime_error("campaign " + std::to_string(campaign) + "'s recorded " + f.name +
                               " does not match its sha256 (the database was altered)");
    if (f.role == "spec") spec = &f;
    depth = std::max(depth, levels_up(name.lexically_normal()));
  }
  if (!spec) return std::nullopt;
  // Seeds above the spec's folder ("../x.cu") land inside `root`: the spec goes that many levels down.
  fs::path dir = root;
  for (int i = 0; i < depth; ++i) dir /= "up";
  for (const auto& f : files) {
    const fs::path p = (dir / f.name).lexically_normal();
    const auto rel = p.lexically_relative(root).generic_string();
    if (rel.empty() || rel.rfind("..", 0) == 0)
      throw std::runtime_error("campaign " + std::to_string(campaign) + " records a file outside its folder: " + f.name);
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << f.content;
    if (!out) throw std::runtime_error("cannot write " + p.string());
  }
  return dir / spec->name;
}

evaluator::SpecResult load_campaign_spec(tracedb::sqlite::Connection& db, std::int64_t campaign, const std::string& given,
                                         const evaluator::OpRegistry& registry, const fs::path& scratch) {
  if (!given.empty()) return evaluator::load_spec(given, registry);
  std::string hash;
  for (const auto& f : tracedb::campaign_files(db, campaign))
    if (f.role == "spec") hash = f.sha256;
  if (hash.empty())
    throw std::runtime_error("campaign " + std::to_string(campaign) +
                             " has no recorded spec (its database is from before ptxevo kept them): give the spec's path");
  const fs::path base = scratch.empty() ? fs::temp_directory_path() / "ptxevo-campaign-files" : scratch;
  const auto p = restore_campaign_files(db, campaign, base / hash.substr(0, 16));
  return evaluator::load_spec(p->string(), registry);
}

}  // namespace ptxevo::search
