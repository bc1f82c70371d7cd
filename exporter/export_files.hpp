// `ptxevo export` without the command line: which candidate (a campaign's winner, a candidate
// by id, or a genome given with the spec), built as the campaign built it, written as files.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exporter/cuda_export.hpp"

namespace ptxevo::exporter {

struct ExportRequest {
  std::string spec;  // with a database: optional (default: the spec and templates recorded with the campaign)
  std::string arch;  // normalised target; empty: the campaign's (with db), else the spec's
  std::string db;
  std::optional<std::int64_t> campaign, candidate;  // with db: the campaign's winner or a candidate
  std::string seed;   // without db: the seed template by name (default: the spec's baseline)
  std::string knobs;  // without db: NAME=VALUE,... over the seed's defaults
  std::string edits;  // without db: PTX edits "pass[:key=value...],..." e.g. "store_streaming,l2_evict_hint:policy=evict_first"
  std::string format = "cuda";  // cuda | torch (ptx is written by the command through `ptxevo build`)
  std::string out_dir;
  bool verify = true;     // compile the .cu with nvcc and compare its PTX with the candidate's
  bool no_cache = false;  // do not use the on-disk build cache
};

// What the candidate is: loaded and built, ready to be written in any format.
struct ResolvedCandidate {
  std::shared_ptr<const evaluator::OpRegistry> registry;  // owns `op` (ops declared in files load into it)
  const evaluator::Op* op = nullptr;
  evaluator::Spec spec;
  search::Genome genome;
  Provenance provenance;
  CandidateBuild build;
};

// The ops come from `ops` (the CLI builds it: kernels::builtin_ops()); ops declared in files
// load into it. Throws ExportError with a message naming the file, the id or the option at fault.
ResolvedCandidate resolve_candidate(const ExportRequest& r, std::shared_ptr<const evaluator::OpRegistry> ops);

struct ExportOutcome {
  std::vector<std::string> files;  // written, in order
  std::optional<NvccCheck> check;  // when verified
  bool inline_ptx = false;
};

// Writes the cuda or torch files into r.out_dir; with r.verify and nvcc present, compiles the .cu
// and throws ExportError when its PTX is not the candidate's.
ExportOutcome write_export(const ExportRequest& r, const ResolvedCandidate& c);

// "store_streaming,l2_evict_hint:policy=evict_first" -> edits; throws ExportError.
std::vector<search::PtxEdit> parse_edits(const std::string& text);

}  // namespace ptxevo::exporter
