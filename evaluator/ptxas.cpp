#include "evaluator/ptxas.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "evaluator/subprocess.hpp"
#include "evaluator/toolkit.hpp"

namespace ptxevo::evaluator {
namespace {

// A private temporary directory, removed with its files on scope exit.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ptxevo-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary directory in " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    for (const auto& f : files_) std::remove(f.c_str());
    rmdir(path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) {
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

}  // namespace

std::vector<FunctionResources> parse_ptxas_resources(const std::string& log) {
  std::vector<FunctionResources> out;
  static const std::regex kCompiling(R"(Compiling entry function '([^']+)')");
  static const std::regex kProps(R"(Function properties for (\S+))");
  static const std::regex kFrame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex kUsed(R"(Used (\d+) registers)");
  static const std::regex kSmem(R"((\d+) bytes smem)");
  std::istringstream in(log);
  std::string line;
  FunctionResources* cur = nullptr;
  auto find_or_add = [&](const std::string& name) {
    for (auto& f : out)
      if (f.name == name) return &f;
    out.push_back({});
    out.back().name = name;
    return &out.back();
  };
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, kCompiling)) {
      cur = find_or_add(m[1]);
      cur->is_entry = true;
    } else if (std::regex_search(line, m, kProps)) {
      cur = find_or_add(m[1]);
    } else if (cur && std::regex_search(line, m, kFrame)) {
      cur->stack_frame = std::stoi(m[1]);
      cur->spill_stores = std::stoi(m[2]);
      cur->spill_loads = std::stoi(m[3]);
    } else if (cur && std::regex_search(line, m, kUsed)) {
      cur->registers = std::stoi(m[1]);
      if (std::smatch s; std::regex_search(line, s, kSmem)) cur->shared_bytes = std::stoi(s[1]);
    }
  }
  return out;
}

PtxasResult run_ptxas(const std::string& ptx, const std::string& arch, const std::vector<std::string>& options) {
  PtxasResult r;
  TempDir dir;
  const std::string in = dir.file("in.ptx");
  const std::string out = dir.file("out.cubin");
  {
    std::ofstream f(in, std::ios::binary);
    f << ptx;
    if (!f) {
      r.log = "cannot write " + in;
      return r;
    }
  }
  std::vector<std::string> argv = {ptxas_path(), "-arch=" + arch, "-v"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {in, "-o", out});
  ProcessResult p = run_process(argv);
  r.log = std::move(p.output);
  if (p.exit_code != 0) return r;
  std::ifstream f(out, std::ios::binary);
  r.cubin.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  r.functions = parse_ptxas_resources(r.log);
  r.ok = !r.cubin.empty();
  return r;
}

std::string ptxas_version() {
  ProcessResult p = run_process({ptxas_path(), "--version"});
  std::smatch m;
  static const std::regex kVer(R"(V(\d+\.\d+\.\d+))");
  if (std::regex_search(p.output, m, kVer)) return m[1];
  return "unknown";
}

}  // namespace ptxevo::evaluator
