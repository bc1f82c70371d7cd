// A candidate as one CUDA source file. Without PTX edits the file is the seed template itself,
// preceded by #defines that bake in the op's options and the knobs: nvcc makes the same PTX that
// NVRTC made for the campaign. With PTX edits every entry is lowered to inline PTX
// (inline_ptx.hpp). Either way the op's host launcher follows (op_launcher.hpp) and a provenance
// comment leads (provenance.hpp). verify_with_nvcc() is the proof: it compiles the file and
// compares the PTX with the candidate's (ptx_compare.hpp).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "evaluator/builder.hpp"
#include "evaluator/op.hpp"
#include "evaluator/spec.hpp"
#include "exporter/op_launcher.hpp"
#include "exporter/provenance.hpp"
#include "exporter/ptx_compare.hpp"
#include "search/genome.hpp"

namespace ptxevo::exporter {

// The candidate built exactly as the campaign built it.
struct CandidateBuild {
  evaluator::Knobs knobs;          // the seed's defaults overridden by the genome's
  std::string template_path;       // the seed template
  std::string template_source;
  std::map<std::string, std::string> defines;  // the op's template defines for the spec's options
  evaluator::BuildResult build;    // final PTX, module, cubin
  std::string toolchain;           // the builder's "nvrtc X nvJitLink Y"
};

// Throws ExportError for a genome the spec cannot build (unknown seed, bad knobs, build failure).
CandidateBuild build_candidate(const evaluator::Spec& spec, const evaluator::Op& op, const search::Genome& genome,
                               evaluator::BuildCache* cache);

struct CudaExport {
  std::string file_name;  // "ptxevo_<op>.cu"
  std::string source;
  bool inline_ptx = false;  // entries lowered from edited PTX
  OpLauncher launcher;
};

// Throws ExportError for what cannot be exported (see inline_ptx.hpp, op_launcher.hpp).
CudaExport cuda_export(const evaluator::Spec& spec, const evaluator::Op& op, const search::Genome& genome,
                       const CandidateBuild& c, const Provenance& provenance);

// nvcc from $CUDA_HOME or /usr/local/cuda; "" when absent.
std::string find_nvcc();

struct NvccCheck {
  bool compiled = false;
  std::string log;         // nvcc's output when it failed
  std::string ptx;         // what nvcc made
  PtxComparison comparison;
};

// Compiles `cu` with `nvcc -arch=<arch> -ptx` in `work_dir` and compares with `candidate`.
NvccCheck verify_with_nvcc(const std::string& nvcc, const std::filesystem::path& cu, const std::string& arch,
                           const ir::Module& candidate, const std::filesystem::path& work_dir);

}  // namespace ptxevo::exporter
