#include "search/genome_build.hpp"

#include "ir/verifier.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::search {

std::function<std::string(ir::Module&)> edit_pass(const std::vector<PtxEdit>& edits,
                                                  std::shared_ptr<const mutators::PassRegistry> passes) {
  return [edits, passes](ir::Module& m) -> std::string {
    // The verifier runs between edits, as between LLVM's passes: a pass that leaves the module
    // ill-formed is named here, not found later as a puzzling ptxas error or a wrong kernel.
    // PTX the verifier already objects to before any edit is not held against the passes.
    const bool checked = ir::verify(m).empty();
    for (const auto& e : edits) {
      const auto* p = passes->find(e.pass);
      if (!p) return "pass-unknown: no pass named '" + e.pass + "'";
      const auto res = p->apply(m, e.params);
      if (!res.applied) return "pass-refused: " + e.pass + ": " + res.refusal;
      if (!checked) continue;
      if (const auto problems = ir::verify(m); !problems.empty())
        return "pass-broke-ir: " + e.pass + " left the module ill-formed (" + std::to_string(problems.size()) +
               " problems; first: " + problems.front().format("edited.ptx") + ")";
    }
    return "";
  };
}

Genome load_candidate_genome(const std::filesystem::path& db_path, std::int64_t id) {
  if (!std::filesystem::exists(db_path)) throw std::runtime_error("trace database " + db_path.string() + " does not exist");
  auto db = tracedb::TraceDb::open(db_path);
  const auto row = db.candidate(id);
  if (!row) throw std::runtime_error("trace database " + db_path.string() + " has no candidate " + std::to_string(id));
  try {
    return genome_from_json(nlohmann::json::parse(row->genome_json));
  } catch (const std::exception& e) {
    throw std::runtime_error("candidate " + std::to_string(id) + " in " + db_path.string() + ": " + e.what());
  }
}

}  // namespace ptxevo::search
