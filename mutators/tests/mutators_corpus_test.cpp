// Every pass, with its default parameters, over the PTX corpus: the result prints and parses
// again, and (on every 10th file) still assembles with ptxas. Writes the table of how often each
// pass applied to mutators_corpus_table.txt in the build directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "evaluator/ptxas.hpp"
#include "ir/parser.hpp"
#include "ir/printer.hpp"
#include "mutators/pass.hpp"

namespace fs = std::filesystem;

namespace ptxevo::mutators {
namespace {

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

std::vector<fs::path> corpus_files(const std::vector<fs::path>& dirs) {
  std::vector<fs::path> files;
  for (const auto& d : dirs)
    for (const auto& e : fs::recursive_directory_iterator(d))
      if (e.is_regular_file() && e.path().extension() == ".ptx") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Tally {
  int files_applied = 0;
  long changes = 0;
  int assembled = 0;
  std::map<std::string, int> refusals;  // reason (ids stripped) -> files
};

// Refusal reasons name kernels, parameters and ids; fold those so equal reasons count together.
std::string normalize(std::string s, const ir::Module& m) {
  std::vector<std::string> names;
  for (const auto* f : m.functions()) names.push_back(f->name);
  std::sort(names.begin(), names.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (const auto& n : names)
    for (std::size_t p = s.find(n); !n.empty() && p != std::string::npos; p = s.find(n, p + 1)) s.replace(p, n.size(), "K");
  static const std::regex kId(R"(id [0-9]+)"), kParam(R"(param:[A-Za-z0-9_$%.]+)"), kParen(R"( \([^)]*\))");
  s = std::regex_replace(s, kId, "id N");
  s = std::regex_replace(s, kParam, "param:P");
  s = std::regex_replace(s, kParen, "");
  return s.substr(0, 150);
}

TEST(MutatorsCorpus, EveryPassKeepsTheCorpusValid) {
  const auto dirs = corpus_dirs();
  if (dirs.empty())
    GTEST_SKIP() << "no PTX corpus directory (set PTXEVO_CORPUS_DIR or build the corpus into "
                 << PTXEVO_BINARY_DIR "/corpus)";
  const auto files = corpus_files(dirs);
  ASSERT_FALSE(files.empty()) << "corpus directories hold no .ptx files";

  const PassRegistry reg = builtin_passes();
  std::map<std::string, Tally> tally;
  int parsed = 0, sampled = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string text = read(files[i]);
    ir::ParseResult base = ir::parse_ptx(text);
    ASSERT_TRUE(base.ok()) << base.error->format(files[i].string());
    ++parsed;
    const bool check_ptxas = i % 10 == 0;
    bool base_assembles = false;
    if (check_ptxas) {
      ++sampled;
      base_assembles = evaluator::run_ptxas(ir::print_module(*base.module), base.module->target()).ok;
    }
    for (const auto& name : reg.names()) {
      ir::Module m = *base.module;
      const PassResult r = reg.find(name)->apply(m, {});
      Tally& t = tally[name];
      if (!r.applied) {
        EXPECT_FALSE(r.refusal.empty()) << name << " on " << files[i];
        EXPECT_EQ(r.changes, 0);
        ++t.refusals[normalize(r.refusal, m)];
        continue;
      }
      ++t.files_applied;
      t.changes += r.changes;
      const std::string out = ir::print_module(m);
      ir::ParseResult again = ir::parse_ptx(out);
      ASSERT_TRUE(again.ok()) << name << " on " << files[i] << ": " << again.error->format("<mutated>");
      EXPECT_EQ(ir::print_module(*again.module), out) << name << " on " << files[i] << ": printing is not stable";
      if (check_ptxas && base_assembles) {
        const auto res = evaluator::run_ptxas(out, m.target());
        EXPECT_TRUE(res.ok) << name << " on " << files[i] << " no longer assembles:\n" << res.log;
        if (res.ok) ++t.assembled;
      }
    }
  }

  std::ostringstream table;
  table << "mutator passes over " << parsed << " corpus files (" << sampled
        << " assembled with ptxas before and after)\n";
  for (const auto& d : dirs) table << "  corpus: " << d.string() << "\n";
  table << std::left << std::setw(20) << "pass" << std::right << std::setw(15) << "files applied" << std::setw(10)
        << "changes" << std::setw(20) << "ptxas ok (sample)" << "\n";
  for (const auto& [name, t] : tally)
    table << std::left << std::setw(20) << name << std::right << std::setw(15) << t.files_applied << std::setw(10)
          << t.changes << std::setw(20) << t.assembled << "\n";
  table << "\nmost frequent refusals per pass (files):\n";
  for (const auto& [name, t] : tally) {
    std::vector<std::pair<int, std::string>> rs;
    for (const auto& [why, n] : t.refusals) rs.emplace_back(n, why);
    std::sort(rs.rbegin(), rs.rend());
    for (std::size_t k = 0; k < rs.size() && k < 3; ++k)
      table << "  " << name << ": " << rs[k].first << " x " << rs[k].second << "\n";
  }
  std::ofstream(PTXEVO_BINARY_DIR "/mutators_corpus_table.txt") << table.str();
  std::cout << table.str();
  for (const auto& [name, t] : tally) EXPECT_GT(t.files_applied, 0) << name << " applied nowhere in the corpus";
}

}  // namespace
}  // namespace ptxevo::mutators
