#include "corpus_builder.hpp"

#include <tbb/parallel_for.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "evaluator/nvrtc_compiler.hpp"
#include "evaluator/subprocess.hpp"

namespace ptxevo::tests {
namespace fs = std::filesystem;
namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

std::vector<fs::path> files_with_ext(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// NVRTC option sets: optimized, with line info, full debug (-G: DWARF sections), and the
// fast-compile level that skips most of the optimizer.
const std::vector<std::pair<std::string, std::vector<std::string>>>& nvrtc_configs() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> k = {
      {"O3", {}}, {"lineinfo", {"-lineinfo"}}, {"G", {"-G"}}, {"Ofc", {"--Ofast-compile=max"}}};
  return k;
}

struct Job {
  CorpusEntry entry;
  std::string source;
  std::string path;
  std::vector<std::string> options;
};

// Runs an external compiler writing PTX to a private temporary file.
void run_tool(Job& job, std::vector<std::string> argv) {
  char tmpl[] = "/tmp/ptxevo-corpus-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) {
    job.entry.error = "cannot create a temporary file";
    return;
  }
  close(fd);
  argv.push_back("-o");
  argv.push_back(tmpl);
  evaluator::ProcessResult p = evaluator::run_process(argv);
  if (p.exit_code == 0) {
    job.entry.ptx = read_file(tmpl);
    if (job.entry.ptx.empty()) job.entry.error = "compiler wrote no PTX";
  } else {
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    job.entry.error = cmd + "\n" + p.output;
  }
  std::remove(tmpl);
}

}  // namespace

std::string header_value(const std::string& source, const std::string& key) {
  std::istringstream in(source);
  std::string line;
  for (int n = 0; n < 5 && std::getline(in, line); ++n) {
    const auto at = line.find("corpus:");
    if (at == std::string::npos) continue;
    const std::string rest = line.substr(at + 7);
    // key=value where value runs until the next " word=" or the end of the line.
    const auto k = rest.find(key + "=");
    if (k == std::string::npos) return "";
    std::string v = rest.substr(k + key.size() + 1);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i] != ' ') continue;
      const auto eq = v.find('=', i + 1);
      const auto sp = v.find(' ', i + 1);
      if (eq != std::string::npos && (sp == std::string::npos || eq < sp)) {
        v = v.substr(0, i);
        break;
      }
    }
    while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.pop_back();
    return v;
  }
  return "";
}

std::vector<CorpusEntry> build_corpus(const CorpusOptions& opts) {
  std::vector<Job> jobs;
  const fs::path root(opts.source_dir);
  for (const auto& p : files_with_ext(root / "cuda", ".cu")) {
    const std::string src = read_file(p);
    for (const auto& arch : split(header_value(src, "archs"), ','))
      for (const auto& [config, options] : nvrtc_configs()) {
        Job j;
        j.entry = {"cuda/" + p.stem().string() + "." + arch + "." + config, "nvrtc", arch, config, "", ""};
        j.source = src;
        j.path = p.string();
        j.options = options;
        jobs.push_back(std::move(j));
      }
  }
  auto add_llvm = [&](const fs::path& p, bool is_ir) {
    const std::string src = read_file(p);
    std::vector<std::string> option_sets = split(header_value(src, "opts"), ',');
    if (option_sets.empty()) option_sets.push_back("-O2");
    for (const auto& arch : split(header_value(src, "archs"), ','))
      for (const auto& set : option_sets) {
        std::string config = set;
        std::replace(config.begin(), config.end(), ' ', '_');
        Job j;
        j.entry = {"llvm/" + p.filename().string() + "." + arch + "." + config, "llvm", arch, config, "", ""};
        j.path = p.string();
        j.options = split_ws(set);
        j.source = is_ir ? "ll" : "cu";
        jobs.push_back(std::move(j));
      }
  };
  if (!opts.clang.empty())
    for (const auto& p : files_with_ext(root / "llvm", ".cu")) add_llvm(p, false);
  if (!opts.llc.empty())
    for (const auto& p : files_with_ext(root / "llvm", ".ll")) add_llvm(p, true);

  std::vector<CorpusEntry> committed;
  for (const auto& p : files_with_ext(root / "triton" / "ptx", ".ptx")) {
    CorpusEntry e{"triton/" + p.stem().string(), "triton", "", "captured", read_file(p), ""};
    const auto t = e.ptx.find(".target");
    if (t != std::string::npos) {
      std::istringstream in(e.ptx.substr(t + 7));
      in >> e.arch;
      if (!e.arch.empty() && e.arch.back() == ',') e.arch.pop_back();
    }
    committed.push_back(std::move(e));
  }

  tbb::parallel_for(std::size_t{0}, jobs.size(), [&](std::size_t i) {
    Job& j = jobs[i];
    if (j.entry.producer == "nvrtc") {
      auto r = evaluator::compile_to_ptx(j.source, fs::path(j.path).filename().string(), j.entry.arch, j.options);
      if (r.ok) j.entry.ptx = std::move(r.ptx);
      else j.entry.error = r.log;
    } else if (j.source == "cu") {
      std::vector<std::string> argv = {opts.clang, "-x", "cuda", "--cuda-device-only", "-S", "-nocudainc", "-nocudalib",
                                       "-Wno-unknown-cuda-version", "--offload-arch=" + j.entry.arch};
      argv.insert(argv.end(), j.options.begin(), j.options.end());
      argv.push_back(j.path);
      run_tool(j, argv);
    } else {
      std::vector<std::string> argv = {opts.llc, "-march=nvptx64", "-mcpu=" + j.entry.arch};
      argv.insert(argv.end(), j.options.begin(), j.options.end());
      argv.push_back(j.path);
      run_tool(j, argv);
    }
  });

  std::vector<CorpusEntry> out;
  out.reserve(jobs.size() + committed.size());
  for (auto& j : jobs) out.push_back(std::move(j.entry));
  for (auto& e : committed) out.push_back(std::move(e));
  return out;
}

}  // namespace ptxevo::tests
