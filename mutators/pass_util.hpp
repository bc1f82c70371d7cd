// Small helpers the instruction-rewriting passes share.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "ir/module.hpp"
#include "mutators/pass.hpp"

namespace ptxevo::mutators {

// ld.global / ld.global.nc (not ldu, not ld.global with a vector of 8 lanes checked elsewhere).
bool is_global_load(const ir::Instruction& ins);
bool is_global_store(const ir::Instruction& ins);  // st.global (not st.async / st.bulk)

// Memory-consistency qualifiers that a cache-policy rewrite must leave alone:
// .volatile .relaxed .acquire .release .mmio and the scopes .cta .cluster .gpu .sys.
bool has_ordering_qualifier(const ir::Instruction& ins);

// Inserts `mod` after the last modifier of the leading run of modifiers found in `after`
// (e.g. after {".global", ".nc"}); at the front when none of them leads.
void insert_modifier_after(ir::Instruction& ins, const std::set<std::string>& after, const std::string& mod);

// Parameter handling shared by the passes: merges defaults, parses `targets`.
struct CommonParams {
  PassParams values;
  std::optional<std::set<std::uint32_t>> targets;
  bool selected(const ir::Instruction& ins) const { return !targets || targets->count(ins.id) != 0; }
};
// nullopt on success; otherwise the refusal text.
std::optional<std::string> prepare(const PtxPass& pass, const PassParams& given, CommonParams* out);

// Refusal for modules older than the PTX ISA / SM a rewrite needs; nullopt when fine.
std::optional<std::string> require_isa(const ir::Module& m, int min_ptx, int min_sm, const std::string& what);

// Finishes a result: applied when changes > 0, otherwise refused with `why_none`.
PassResult finish(int changes, const std::string& why_none);

}  // namespace ptxevo::mutators
