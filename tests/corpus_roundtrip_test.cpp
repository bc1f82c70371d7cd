// The IR's central promise, checked on every corpus file: printing is idempotent, and ptxas
// builds the same cubin from the printed PTX as from the original. Also checks that the
// live-register estimate tracks the registers ptxas allocates.
#include <gtest/gtest.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "corpus_builder.hpp"
#include "evaluator/elf_sections.hpp"
#include "evaluator/ptxas.hpp"
#include "ir/analysis/liveness.hpp"
#include "ir/parser.hpp"
#include "ir/printer.hpp"
#include "ir/verifier.hpp"

namespace ptxevo::tests {
namespace {

namespace fs = std::filesystem;

struct Result {
  CorpusEntry entry;
  bool parsed = false;
  std::string parse_error;
  std::vector<std::string> verify_errors;
  bool idempotent = false;
  bool line_info = false;
  bool assembled = false;  // went through ptxas (every file but under the sanitizers)
  evaluator::PtxasResult original;
  evaluator::PtxasResult printed;
  bool byte_identical = false;
  std::vector<std::string> section_diffs;
  std::string compare_error;
  std::vector<std::pair<std::string, int>> estimates;  // entry function -> estimated registers
};

// ptxas writes the PTX text and PTX line table into these two sections when the input has
// line info; both change with any layout change. Relocations that patch them go with them.
const std::set<std::string> kLayoutSections = {".nv_debug_ptx_txt", ".nv_debug_line_sass"};

// Under the sanitizers only every kPtxasStride-th file goes through ptxas: ptxas's time is not our
// code's, and the release run assembles every file; the sanitized run still parses, verifies and
// prints all of them and compares a sample of cubins.
#ifdef PTXEVO_SANITIZED
constexpr std::size_t kPtxasStride = 4;
#else
constexpr std::size_t kPtxasStride = 1;
#endif

// ptxas keeps PTX line numbers only when some function carries .loc directives.
bool has_line_info(const ir::Module& m) {
  for (const auto* f : m.functions())
    for (const auto& st : f->body)
      if (const auto* d = std::get_if<ir::Directive>(&st.node); d && d->name == ".loc") return true;
  return false;
}

class Corpus : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CorpusOptions opts{PTXEVO_SOURCE_DIR "/tests/corpus", PTXEVO_CLANG19, PTXEVO_LLC19};
    auto entries = build_corpus(opts);
    results_ = new std::vector<Result>(entries.size());
    const fs::path dump = fs::path(PTXEVO_BINARY_DIR) / "corpus";
    tbb::parallel_for(std::size_t{0}, entries.size(), [&](std::size_t i) {
      Result& r = (*results_)[i];
      r.entry = std::move(entries[i]);
      if (r.entry.ptx.empty()) return;
      const fs::path out = dump / (r.entry.name + ".ptx");
      fs::create_directories(out.parent_path());
      std::ofstream(out, std::ios::binary) << r.entry.ptx;
      check(r, i % kPtxasStride == 0);
    });
    write_report();
  }
  static void TearDownTestSuite() {
    delete results_;
    results_ = nullptr;
  }

  static void check(Result& r, bool assemble) {
    ir::ParseResult p = ir::parse_ptx(r.entry.ptx);
    if (!p.ok()) {
      r.parse_error = p.error->format(r.entry.name);
      return;
    }
    r.parsed = true;
    for (const auto& d : ir::verify(*p.module)) r.verify_errors.push_back(d.format(r.entry.name));
    const std::string once = ir::print_module(*p.module);
    ir::ParseResult again = ir::parse_ptx(once);
    r.idempotent = again.ok() && ir::print_module(*again.module) == once;
    r.line_info = has_line_info(*p.module);
    for (const auto* f : p.module->functions())
      if (f->is_entry && f->has_body) r.estimates.emplace_back(f->name, ir::estimate_registers(*f));
    if (!assemble) return;
    r.assembled = true;
    r.original = evaluator::run_ptxas(r.entry.ptx, r.entry.arch);
    r.printed = evaluator::run_ptxas(once, r.entry.arch);
    if (!r.original.ok || !r.printed.ok) return;
    r.byte_identical = r.original.cubin == r.printed.cubin;
    try {
      r.section_diffs = evaluator::diff_elf_sections(r.original.cubin, r.printed.cubin,
                                                     r.line_info ? kLayoutSections : std::set<std::string>{});
    } catch (const std::exception& e) {
      r.compare_error = e.what();
    }
  }

  static void write_report() {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : *results_) {
      j.push_back({{"name", r.entry.name},
                   {"producer", r.entry.producer},
                   {"arch", r.entry.arch},
                   {"bytes", r.entry.ptx.size()},
                   {"built", !r.entry.ptx.empty()},
                   {"parsed", r.parsed},
                   {"idempotent", r.idempotent},
                   {"line_info", r.line_info},
                   {"ptxas_ok", r.original.ok && r.printed.ok},
                   {"byte_identical", r.byte_identical},
                   {"section_diffs", r.section_diffs}});
    }
    std::ofstream(fs::path(PTXEVO_BINARY_DIR) / "corpus_report.json") << j.dump(1);
  }

  static std::vector<Result>* results_;
};
std::vector<Result>* Corpus::results_ = nullptr;

TEST_F(Corpus, IsLargeAndDiverse) {
  std::map<std::string, int> by_producer;
  std::map<std::string, int> by_arch;
  std::vector<std::string> failed;
  for (const auto& r : *results_) {
    if (r.entry.ptx.empty()) {
      failed.push_back(r.entry.name + ": " + r.entry.error.substr(0, 400));
      continue;
    }
    ++by_producer[r.entry.producer];
    ++by_arch[r.entry.arch];
  }
  for (const auto& f : failed) ADD_FAILURE() << "corpus file did not build: " << f;
  int total = 0;
  for (const auto& [k, n] : by_producer) {
    std::cout << "corpus: " << n << " PTX files from " << k << "\n";
    total += n;
  }
  for (const auto& [k, n] : by_arch) std::cout << "corpus: " << n << " PTX files for " << k << "\n";
  EXPECT_GE(total, 200);
  EXPECT_GE(by_producer["nvrtc"], 200);
  EXPECT_GE(by_producer["llvm"], 20);
  EXPECT_GE(by_producer["triton"], 24);
  for (const char* a : {"sm_80", "sm_90a", "sm_100a"}) EXPECT_GE(by_arch[a], 20) << a;
}

TEST_F(Corpus, EveryFileParsesAndVerifies) {
  for (const auto& r : *results_) {
    if (r.entry.ptx.empty()) continue;
    EXPECT_TRUE(r.parsed) << r.parse_error;
    for (const auto& e : r.verify_errors) ADD_FAILURE() << e;
  }
}

TEST_F(Corpus, PrintingIsIdempotent) {
  for (const auto& r : *results_) {
    if (r.parsed) {
      EXPECT_TRUE(r.idempotent) << r.entry.name;
    }
  }
}

TEST_F(Corpus, PtxasBuildsTheSameCubinFromPrintedPtx) {
  int identical = 0, section_equal = 0, assembled = 0;
  for (const auto& r : *results_) {
    if (!r.parsed || !r.assembled) continue;
    ++assembled;
    ASSERT_TRUE(r.original.ok) << r.entry.name << ": ptxas rejected the original:\n" << r.original.log.substr(0, 2000);
    EXPECT_TRUE(r.printed.ok) << r.entry.name << ": ptxas rejected the printed PTX:\n" << r.printed.log.substr(0, 2000);
    if (!r.printed.ok) continue;
    EXPECT_TRUE(r.compare_error.empty()) << r.entry.name << ": " << r.compare_error;
    if (r.line_info) {
      std::string diffs;
      for (const auto& d : r.section_diffs) diffs += d + " ";
      EXPECT_TRUE(r.section_diffs.empty()) << r.entry.name << ": sections differ: " << diffs;
      section_equal += r.section_diffs.empty();
    } else {
      EXPECT_TRUE(r.byte_identical) << r.entry.name << ": cubins differ";
      identical += r.byte_identical;
    }
  }
  std::cout << "corpus: " << identical << " byte-identical cubins (no line info), " << section_equal
            << " section-identical cubins (line info), of " << assembled << " assembled\n";
  EXPECT_GE(assembled, static_cast<int>(200 / kPtxasStride));
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    mx += x[i] / n;
    my += y[i] / n;
  }
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> idx(v.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) r[idx[k]] = (static_cast<double>(i + j) / 2.0) + 1.0;
    i = j + 1;
  }
  return r;
}

// Optimized builds only: -G and fast-compile code keeps every value in its own register.
TEST_F(Corpus, LiveRegisterEstimateTracksPtxas) {
  std::vector<double> est, actual;
  for (const auto& r : *results_) {
    if (!r.original.ok || r.line_info || (r.entry.config != "O3" && r.entry.producer == "nvrtc")) continue;
    if (r.entry.producer == "llvm" && r.entry.config.find("-O0") != std::string::npos) continue;
    for (const auto& [name, e] : r.estimates)
      for (const auto& f : r.original.functions)
        if (f.name == name && f.registers > 0) {
          est.push_back(e);
          actual.push_back(f.registers);
        }
  }
  ASSERT_GE(est.size(), 50u / kPtxasStride);
  const double p = pearson(est, actual);
  const double s = pearson(ranks(est), ranks(actual));
  std::cout << "register estimate vs ptxas over " << est.size() << " kernels: Pearson " << p << ", Spearman " << s
            << "\n";
  nlohmann::json j = {{"kernels", est.size()}, {"pearson", p}, {"spearman", s}};
  std::ofstream(fs::path(PTXEVO_BINARY_DIR) / "register_correlation.json") << j.dump(1);
  EXPECT_GE(p, 0.7);
  EXPECT_GE(s, 0.7);
}

}  // namespace
}  // namespace ptxevo::tests
