// Renders the HTML report in headless Chromium and checks, in the DOM the browser built, that
// the four plots are there with drawn data. A second load as XHTML makes Chromium's strict XML
// parser check that the markup is well formed. Skipped when Chromium is not installed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "report/data.hpp"
#include "report/html.hpp"
#include "tracedb/tests/sample_reports.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::report {
namespace {

// The reports read what campaigns recorded: the trace database's types are the tests' vocabulary.
using namespace ptxevo::tracedb;  // NOLINT(google-build-using-namespace)

using tracedb::testing::sample_report;
using tracedb::testing::TempDbPath;

std::optional<std::filesystem::path> find_chromium() {
  const char* path = std::getenv("PATH");
  if (!path) return std::nullopt;
  for (const char* name : {"chromium", "chromium-browser"}) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      if (dir.empty()) continue;
      const auto candidate = std::filesystem::path(dir) / name;
      std::error_code ec;
      if (std::filesystem::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return std::nullopt;
}

// The serialised DOM Chromium built from `file`, or a failure with Chromium's stderr.
std::string dump_dom(const std::filesystem::path& chromium, const std::filesystem::path& file,
                     const std::filesystem::path& work) {
  const auto profile = work / "profile";
  const auto log = work / "chromium.log";
  // A private profile: concurrent test runs must not share Chromium's lock files. The timeout
  // bounds a hung browser on a loaded machine.
  const std::string cmd = "timeout 180 '" + chromium.string() +
                          "' --headless --disable-gpu --no-sandbox --no-first-run --disable-dev-shm-usage "
                          "--user-data-dir='" + profile.string() + "' --dump-dom 'file://" + file.string() +
                          "' 2>'" + log.string() + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    ADD_FAILURE() << "cannot start: " << cmd;
    return "";
  }
  std::string out;
  std::array<char, 8192> buf;
  for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) out.append(buf.data(), n);
  const int status = pclose(p);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || out.empty()) {
    std::ifstream in(log);
    std::stringstream err;
    err << in.rdbuf();
    ADD_FAILURE() << "chromium failed (status " << status << ") on " << file << ":\n" << err.str();
  }
  return out;
}

std::size_t occurrences(const std::string& s, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = s.find(needle); p != std::string::npos; p = s.find(needle, p + needle.size())) ++n;
  return n;
}

// The <svg> element with this id, as serialised by the browser.
std::string svg_element(const std::string& dom, const std::string& id) {
  const auto at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const auto start = dom.rfind("<svg", at);
  const auto end = dom.find("</svg>", at);
  if (start == std::string::npos || end == std::string::npos) return "";
  return dom.substr(start, end - start);
}

// A small campaign: two passes, a failure with a reason, and a build failure.
void write_campaign(const std::filesystem::path& path) {
  auto db = tracedb::TraceDb::open(path);
  const auto campaign = db.open_campaign({"specs/<rms>&norm.toml", "hash", "rmsnorm", "sm_90a", "{}"}).id;
  const auto env = db.record_environment({"NVIDIA H200", "580.65", "13.0", "{}", "{}"});
  int i = 0;
  for (const auto& report : {sample_report(1.1), sample_report(1.0, "fail"), sample_report(1.3)}) {
    const auto c = db.record_candidate(campaign, {"g" + std::to_string(++i), "{}", std::nullopt, "knob-step"}).id;
    db.record_build(c, {true, "ptx", "done", "", "{}", ""});
    db.record_evaluation(c, env, report);
  }
  const auto bad = db.record_candidate(campaign, {"g-bad", "{}", std::nullopt, "fast_math"}).id;
  db.record_build(bad, {false, "", "ptxas", "error", "{}", ""});
}

TEST(ReportRenderTest, ChromiumDrawsTheFourPlots) {
  const auto chromium = find_chromium();
  // scripts/setup.sh installs Chromium: its absence is a setup failure, not a reason to skip.
  ASSERT_TRUE(chromium) << "Chromium is not installed (no chromium or chromium-browser on PATH); "
                           "run scripts/setup.sh or install the Debian package 'chromium'";
  TempDbPath tmp;
  write_campaign(tmp.db());
  const auto dir = tmp.db().parent_path();
  std::ostringstream page;
  write_report_html(load_report(tmp.db()), page);
  for (const char* name : {"report.html", "report.xhtml"}) std::ofstream(dir / name) << page.str();

  const std::string dom = dump_dom(*chromium, dir / "report.html", dir);
  ASSERT_FALSE(dom.empty());
  struct Expect {
    const char* id;
    const char* drawn;  // the data marks this plot must hold
  };
  for (const auto& [id, drawn] : {Expect{"plot-fitness-evals", "class=\"best\""},
                                  Expect{"plot-fitness-time", "class=\"best\""},
                                  Expect{"plot-winner-shapes", "class=\"bar faster\""},
                                  Expect{"plot-failures", "class=\"bar fail\""}}) {
    const std::string svg = svg_element(dom, id);
    ASSERT_FALSE(svg.empty()) << id << " missing from the rendered DOM";
    const auto shapes = occurrences(svg, "<path") + occurrences(svg, "<rect") + occurrences(svg, "<polyline");
    EXPECT_GT(shapes, 0u) << id;
    EXPECT_GT(occurrences(svg, drawn), 0u) << id << " has no " << drawn;
    EXPECT_GT(occurrences(svg, "<text"), 2u) << id << " has no tick labels";
  }
  EXPECT_GT(occurrences(svg_element(dom, "plot-winner-shapes"), "class=\"whisker\""), 0u);
  EXPECT_NE(dom.find("specs/&lt;rms&gt;&amp;norm.toml"), std::string::npos);  // text, not markup

  // As XHTML the page goes through an XML parser, which reports any malformed markup in the page.
  const std::string xdom = dump_dom(*chromium, dir / "report.xhtml", dir);
  EXPECT_EQ(xdom.find("parsererror"), std::string::npos) << xdom.substr(0, 2000);
  EXPECT_EQ(xdom.find("This page contains the following errors"), std::string::npos);
  for (const char* id : {"plot-fitness-evals", "plot-fitness-time", "plot-winner-shapes", "plot-failures"})
    EXPECT_FALSE(svg_element(xdom, id).empty()) << id << " missing from the XHTML DOM";
}

}  // namespace
}  // namespace ptxevo::report
