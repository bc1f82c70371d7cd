// `ptxevo build` as a harness outside ptxevo uses it: the files it writes must be enough to
// launch the candidate (a loadable cubin holding every entry, and launch plans that name only
// listed tensors).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "evaluator/elf_sections.hpp"
#include "evaluator/subprocess.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ptxevo::evaluator::run_process;

const std::string kSpec = PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.spec";

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ptxevo-build-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Checks one shape entry of launch.json; returns the entries its kernels name.
std::set<std::string> check_shape(const json& s) {
  std::set<std::string> entries;
  EXPECT_FALSE(s.at("dims").empty());
  EXPECT_GT(s.at("bytes").get<double>(), 0);
  EXPECT_GT(s.at("flops").get<double>(), 0);
  std::set<std::string> tensors;
  for (const auto& t : s.at("tensors")) {
    tensors.insert(t.at("name").get<std::string>());
    EXPECT_FALSE(t.at("dtype").get<std::string>().empty());
    EXPECT_FALSE(t.at("shape").empty());
    const std::string role = t.at("role");
    EXPECT_TRUE(role == "in" || role == "out" || role == "inout" || role == "scratch") << role;
    if (role == "out" || role == "inout") {
      EXPECT_GT(t.at("tolerance").at("rel_l2").get<double>(), 0);
    }
  }
  EXPECT_FALSE(s.at("kernels").empty());
  for (const auto& k : s.at("kernels")) {
    entries.insert(k.at("entry").get<std::string>());
    for (const char* d : {"grid", "block", "cluster"}) {
      EXPECT_EQ(k.at(d).size(), 3u);
      for (const auto& v : k.at(d)) EXPECT_GE(v.get<std::int64_t>(), 1);
    }
    EXPECT_GE(k.at("shared_bytes").get<std::int64_t>(), 0);
    for (const auto& a : k.at("args")) {
      const std::string kind = a.at("kind");
      if (kind == "tensor") {
        EXPECT_TRUE(tensors.count(a.at("tensor").get<std::string>())) << a.dump();
      } else if (kind == "scalar") {
        const std::string type = a.at("type");
        EXPECT_TRUE(type == "i32" || type == "i64" || type == "f32" || type == "f64") << type;
        EXPECT_TRUE(a.at("value").is_number()) << a.dump();
      } else {
        EXPECT_EQ(kind, "null") << a.dump();
      }
    }
  }
  return entries;
}

TEST(CliBuild, WritesALaunchableCandidate) {
  TempDir dir;
  auto r = run_process({PTXEVO_BIN, "build", kSpec, "--out", dir.path()});
  ASSERT_EQ(r.exit_code, 0) << r.output;

  const json j = json::parse(read_text(fs::path(dir.path()) / "launch.json"));
  EXPECT_EQ(j.at("format"), 1);
  EXPECT_EQ(j.at("op"), "rmsnorm_fwd");
  EXPECT_EQ(j.at("arch"), "sm_90a");
  EXPECT_EQ(j.at("config").at("x_dtype"), "bf16");
  EXPECT_FALSE(j.at("knobs").empty());
  EXPECT_NE(j.at("toolchain").get<std::string>().find("nvJitLink"), std::string::npos);
  EXPECT_EQ(j.at("spec").at("path"), fs::absolute(kSpec).string());
  EXPECT_TRUE(std::regex_match(j.at("spec").at("sha256").get<std::string>(), std::regex("[0-9a-f]{64}")));
  ASSERT_FALSE(j.at("shapes").empty());
  std::set<std::string> entries;
  for (const auto& s : j.at("shapes")) {
    EXPECT_EQ(s.at("class"), "benchmark");
    entries.merge(check_shape(s));
    std::set<std::string> names;
    for (const auto& t : s.at("tensors")) names.insert(t.at("name").get<std::string>());
    EXPECT_TRUE(names.count("x") && names.count("out")) << s.at("tensors").dump();
  }

  const std::string cubin_text = read_text(fs::path(dir.path()) / "kernel.cubin");
  const std::vector<std::uint8_t> cubin(cubin_text.begin(), cubin_text.end());
  ASSERT_GE(cubin.size(), 4u);
  EXPECT_EQ(cubin_text.substr(0, 4), "\x7f" "ELF");
  std::set<std::string> sections;
  ASSERT_NO_THROW(for (const auto& s : ptxevo::evaluator::read_elf_sections(cubin)) sections.insert(s.name));
  const std::string ptx = read_text(fs::path(dir.path()) / "kernel.ptx");
  for (const auto& e : entries) {
    EXPECT_TRUE(sections.count(".text." + e)) << "no code section for entry " << e;
    EXPECT_TRUE(std::regex_search(ptx, std::regex("\\.entry\\s+" + e + "\\s*\\("))) << "no .entry " << e;
  }

  const json res = json::parse(read_text(fs::path(dir.path()) / "resources.json"));
  EXPECT_FALSE(res.at("resources").empty());
}

TEST(CliBuild, SelectsShapeClassesAndKnobs) {
  TempDir dir;
  auto r = run_process({PTXEVO_BIN, "build", kSpec, "--out", dir.path(), "--shapes", "correctness", "--knobs",
                        "THREADS=128,TPR=32"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(read_text(fs::path(dir.path()) / "launch.json"));
  EXPECT_EQ(j.at("knobs").at("THREADS"), 128);
  ASSERT_FALSE(j.at("shapes").empty());
  for (const auto& s : j.at("shapes")) {
    EXPECT_EQ(s.at("class"), "correctness");
    check_shape(s);
  }
}

// A knob under its old name (KDA's LMTC and PF, now LM_TENSOR_CORES and PREFETCH_CHUNKS) builds
// the same PTX as under the current one; a knob given under both names is refused.
TEST(CliBuild, TakesOldKnobNamesAsAliases) {
  TempDir dir;
  // kda_fwd.spec with its chunked seed as the baseline, the seed --knobs applies to.
  const std::string kda = PTXEVO_SOURCE_DIR "/kernels/kda/";
  std::string text = read_text(kda + "kda_fwd.spec");
  const auto replace = [&](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  replace("baseline = \"kda_fwd_recurrent_seed\"", "baseline = \"kda_fwd_chunked_seed\"");
  replace("source = \"kda_fwd.cu\"", "source = \"" + kda + "kda_fwd.cu\"");
  replace("source = \"kda_fwd_chunked.cu\"", "source = \"" + kda + "kda_fwd_chunked.cu\"");
  const std::string spec = dir.path() + "/kda.spec";
  std::ofstream(spec) << text;
  // --no-cache: both builds compile, so neither can take a cache entry another test wrote.
  const auto build = [&](const std::string& out, const std::string& knobs) {
    return run_process({PTXEVO_BIN, "build", spec, "--out", dir.path() + "/" + out, "--shapes", "correctness",
                        "--knobs", knobs, "--no-cache"});
  };
  const auto current = build("current", "LM_TENSOR_CORES=0,LMTERMS=3,PREFETCH_CHUNKS=2");
  ASSERT_EQ(current.exit_code, 0) << current.output;
  const auto old = build("old", "LMTC=0,LMTERMS=3,PF=2");
  ASSERT_EQ(old.exit_code, 0) << old.output;
  const std::string old_ptx = read_text(dir.path() + "/old/kernel.ptx"), ptx = read_text(dir.path() + "/current/kernel.ptx");
  EXPECT_FALSE(ptx.empty());
  // Seen once in CI (2026-12-07, not reproduced in 30 local pairs): the two builds' PTX differed
  // (kda_fwd_seg_combine 80 registers against 78). The line of the first difference says where.
  const auto at = std::mismatch(old_ptx.begin(), old_ptx.end(), ptx.begin(), ptx.end()).first - old_ptx.begin();
  const auto line_at = [&](const std::string& t) {
    const auto from = t.rfind('\n', static_cast<std::size_t>(at) == 0 ? 0 : static_cast<std::size_t>(at) - 1);
    const std::size_t start = from == std::string::npos ? 0 : from + 1;
    return t.substr(start, t.find('\n', start) - start);
  };
  const std::string first_difference = "\n  old:     " + line_at(old_ptx) + "\n  current: " + line_at(ptx);
  EXPECT_TRUE(old_ptx == ptx) << "the PTX differs at byte " << at << ":" << first_difference << "\nold names:\n" << old.output
                              << "\ncurrent names:\n" << current.output;
  const json knobs = json::parse(read_text(dir.path() + "/old/launch.json")).at("knobs");
  EXPECT_EQ(knobs.at("LM_TENSOR_CORES"), 0);
  EXPECT_EQ(knobs.at("PREFETCH_CHUNKS"), 2);
  EXPECT_FALSE(knobs.contains("LMTC"));
  const auto both = build("both", "LMTC=0,LM_TENSOR_CORES=1");
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.output.find("--knobs: knob LMTC was renamed LM_TENSOR_CORES; give one of LMTC and LM_TENSOR_CORES, "
                             "not both"),
            std::string::npos)
      << both.output;
  EXPECT_FALSE(fs::exists(dir.path() + "/both"));
}

TEST(CliBuild, RefusesWhatEvalRejectsAndWritesNothing) {
  TempDir dir;
  auto r = run_process({PTXEVO_BIN, "build", kSpec, "--out", dir.path() + "/c", "--source",
                        PTXEVO_SOURCE_DIR "/kernels/rmsnorm/known_bad/clock_stage.cu"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("clock-read"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() + "/c"));

  auto bad = run_process({PTXEVO_BIN, "build", kSpec, "--out", dir.path(), "--shapes", "some"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("--shapes must be benchmark, correctness, heldout or all"), std::string::npos) << bad.output;

  auto knob = run_process({PTXEVO_BIN, "build", kSpec, "--out", dir.path(), "--knobs", "NOPE=1"});
  EXPECT_EQ(knob.exit_code, 1);
  EXPECT_NE(knob.output.find("has no knob 'NOPE'"), std::string::npos) << knob.output;
}

}  // namespace
