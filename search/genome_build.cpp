#include "search/genome_build.hpp"

#include "search/trace_db.hpp"

namespace ptxevo::search {

std::function<std::string(ir::Module&)> edit_pass(const std::vector<PtxEdit>& edits,
                                                  std::shared_ptr<const mutators::PassRegistry> passes) {
  return [edits, passes](ir::Module& m) -> std::string {
    for (const auto& e : edits) {
      const auto* p = passes->find(e.pass);
      if (!p) return "pass-unknown: no pass named '" + e.pass + "'";
      const auto res = p->apply(m, e.params);
      if (!res.applied) return "pass-refused: " + e.pass + ": " + res.refusal;
    }
    return "";
  };
}

Genome load_candidate_genome(const std::filesystem::path& db_path, std::int64_t id) {
  if (!std::filesystem::exists(db_path)) throw std::runtime_error("trace database " + db_path.string() + " does not exist");
  auto db = TraceDb::open(db_path);
  const auto row = db.candidate(id);
  if (!row) throw std::runtime_error("trace database " + db_path.string() + " has no candidate " + std::to_string(id));
  try {
    return genome_from_json(nlohmann::json::parse(row->genome_json));
  } catch (const std::exception& e) {
    throw std::runtime_error("candidate " + std::to_string(id) + " in " + db_path.string() + ": " + e.what());
  }
}

}  // namespace ptxevo::search
