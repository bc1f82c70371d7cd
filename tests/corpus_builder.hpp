// Builds the PTX corpus the IR is tested on: CUDA sources compiled by NVRTC for several archs
// and option sets, CUDA/LLVM IR sources compiled by clang-19/llc-19 (LLVM's NVPTX back end),
// and Triton PTX captured on the GPU machine and committed.
#pragma once

#include <string>
#include <vector>

namespace ptxevo::tests {

struct CorpusEntry {
  std::string name;      // unique, e.g. "cuda/wgmma_gemm.sm_90a.lineinfo"
  std::string producer;  // "nvrtc", "llvm" or "triton"
  std::string arch;      // ptxas -arch value
  std::string config;    // option set
  std::string ptx;       // empty when the build failed
  std::string error;     // build log when it failed
};

struct CorpusOptions {
  std::string source_dir;  // tests/corpus
  std::string clang;       // clang-19 path ("" to skip CUDA-through-clang sources)
  std::string llc;         // llc-19 path ("" to skip .ll sources)
};

// Compiles everything in parallel (TBB). Entries that fail to build keep their error.
std::vector<CorpusEntry> build_corpus(const CorpusOptions& opts);

// `// corpus: archs=sm_80,sm_90a opts=-O0,-O2` -> key/value pairs from a source's header.
std::string header_value(const std::string& source, const std::string& key);

}  // namespace ptxevo::tests
