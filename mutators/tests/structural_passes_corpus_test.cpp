// widen_vector, async_copy, if_convert and if_unconvert over the whole PTX corpus: wherever a pass
// applies (default parameters), the result must pass the IR verifier and assemble with ptxas
// (when the original does). The sampled corpus test (mutators_corpus_test.cpp) checks ptxas on
// every 10th file only; these passes restructure code, so every application is assembled.
// Writes the counts to structural_passes_corpus.txt in the build directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "evaluator/ptxas.hpp"
#include "ir/parser.hpp"
#include "ir/printer.hpp"
#include "ir/verifier.hpp"
#include "mutators/pass.hpp"

namespace fs = std::filesystem;

namespace ptxevo::mutators {
namespace {

const char* const kPasses[] = {"widen_vector", "async_copy", "if_convert", "if_unconvert"};

// $PTXEVO_CORPUS_DIR (':'-separated) or the generated corpus and the captured Triton PTX.
std::vector<fs::path> corpus_dirs() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("PTXEVO_CORPUS_DIR"); env && *env) {
    std::stringstream ss(env);
    for (std::string d; std::getline(ss, d, ':');)
      if (!d.empty()) candidates.push_back(d);
  } else {
    candidates = {PTXEVO_BINARY_DIR "/corpus", PTXEVO_SOURCE_DIR "/build/corpus",
                  PTXEVO_SOURCE_DIR "/tests/corpus/triton/ptx"};
  }
  std::vector<fs::path> out;
  std::set<fs::path> seen;
  for (const auto& c : candidates) {
    std::error_code ec;
    if (!fs::is_directory(c, ec)) continue;
    const fs::path canon = fs::canonical(c, ec);
    if (!ec && seen.insert(canon).second) out.push_back(canon);
  }
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Count {
  int files = 0;
  long changes = 0;
  int assembled = 0;
};

TEST(StructuralPassesCorpus, EveryApplicationAssembles) {
  const auto dirs = corpus_dirs();
  // The corpus is a CTest fixture (ptx_corpus) of this test: its absence is a failure.
  ASSERT_FALSE(dirs.empty()) << "no PTX corpus directory (set PTXEVO_CORPUS_DIR or build the corpus into "
                 << PTXEVO_BINARY_DIR "/corpus)";
  std::vector<fs::path> files;
  for (const auto& d : dirs)
    for (const auto& e : fs::recursive_directory_iterator(d))
      if (e.is_regular_file() && e.path().extension() == ".ptx") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());

  const PassRegistry reg = builtin_passes();
  std::map<std::string, Count> counts;
  for (const auto& file : files) {
    ir::ParseResult base = ir::parse_ptx(read(file));
    ASSERT_TRUE(base.ok()) << base.error->format(file.string());
    std::optional<bool> base_assembles;  // asked only when some pass applied
    for (const char* name : kPasses) {
      const PtxPass* pass = reg.find(name);
      ASSERT_NE(pass, nullptr) << name;
      ir::Module m = *base.module;
      const PassResult r = pass->apply(m, {});
      if (!r.applied) continue;
      Count& c = counts[name];
      ++c.files;
      c.changes += r.changes;
      const std::string out = ir::print_module(m);
      ir::ParseResult again = ir::parse_ptx(out);
      ASSERT_TRUE(again.ok()) << name << " on " << file << ": " << again.error->format("<mutated>");
      const auto diags = ir::verify(*again.module);
      EXPECT_TRUE(diags.empty()) << name << " on " << file << ": " << diags.front().format("<mutated>");
      if (!base_assembles)
        base_assembles = evaluator::run_ptxas(ir::print_module(*base.module), base.module->target()).ok;
      if (!*base_assembles) continue;
      const auto res = evaluator::run_ptxas(out, m.target());
      EXPECT_TRUE(res.ok) << name << " on " << file << " no longer assembles:\n" << res.log;
      if (res.ok) ++c.assembled;
    }
  }
  std::ostringstream table;
  table << "structural passes over " << files.size() << " corpus files (every application assembled)\n";
  for (const char* name : kPasses) {
    const Count& c = counts[name];
    table << "  " << name << ": applied in " << c.files << " files, " << c.changes << " changes, " << c.assembled
          << " assembled by ptxas\n";
  }
  std::ofstream(PTXEVO_BINARY_DIR "/structural_passes_corpus.txt") << table.str();
  std::cout << table.str();
  for (const char* name : kPasses) EXPECT_GT(counts[name].files, 0) << name << " applied nowhere in the corpus";
}

}  // namespace
}  // namespace ptxevo::mutators
