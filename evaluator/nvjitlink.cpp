#include "evaluator/nvjitlink.hpp"

#include <nvJitLink.h>

#include <cstdlib>
#include <memory>
#include <sstream>
#include <string_view>

namespace ptxevo::evaluator {
namespace {

const char* status_name(nvJitLinkResult r) {
  switch (r) {
    case NVJITLINK_SUCCESS: return "NVJITLINK_SUCCESS";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION: return "NVJITLINK_ERROR_UNRECOGNIZED_OPTION";
    case NVJITLINK_ERROR_MISSING_ARCH: return "NVJITLINK_ERROR_MISSING_ARCH";
    case NVJITLINK_ERROR_INVALID_INPUT: return "NVJITLINK_ERROR_INVALID_INPUT";
    case NVJITLINK_ERROR_PTX_COMPILE: return "NVJITLINK_ERROR_PTX_COMPILE";
    case NVJITLINK_ERROR_NVVM_COMPILE: return "NVJITLINK_ERROR_NVVM_COMPILE";
    case NVJITLINK_ERROR_INTERNAL: return "NVJITLINK_ERROR_INTERNAL";
    case NVJITLINK_ERROR_THREADPOOL: return "NVJITLINK_ERROR_THREADPOOL";
    case NVJITLINK_ERROR_UNRECOGNIZED_INPUT: return "NVJITLINK_ERROR_UNRECOGNIZED_INPUT";
    case NVJITLINK_ERROR_FINALIZE: return "NVJITLINK_ERROR_FINALIZE";
    case NVJITLINK_ERROR_NULL_INPUT: return "NVJITLINK_ERROR_NULL_INPUT";
    case NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS: return "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS";
    case NVJITLINK_ERROR_INCORRECT_INPUT_TYPE: return "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE";
    case NVJITLINK_ERROR_ARCH_MISMATCH: return "NVJITLINK_ERROR_ARCH_MISMATCH";
    case NVJITLINK_ERROR_OUTDATED_LIBRARY: return "NVJITLINK_ERROR_OUTDATED_LIBRARY";
    case NVJITLINK_ERROR_MISSING_FATBIN: return "NVJITLINK_ERROR_MISSING_FATBIN";
    case NVJITLINK_ERROR_UNRECOGNIZED_ARCH: return "NVJITLINK_ERROR_UNRECOGNIZED_ARCH";
    case NVJITLINK_ERROR_UNSUPPORTED_ARCH: return "NVJITLINK_ERROR_UNSUPPORTED_ARCH";
    case NVJITLINK_ERROR_LTO_NOT_ENABLED: return "NVJITLINK_ERROR_LTO_NOT_ENABLED";
  }
  return "NVJITLINK_ERROR_UNKNOWN";
}

// Failures that depend only on the input and options; anything else may be transient.
bool is_deterministic(nvJitLinkResult r) {
  switch (r) {
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION:
    case NVJITLINK_ERROR_MISSING_ARCH:
    case NVJITLINK_ERROR_PTX_COMPILE:
    case NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS:
    case NVJITLINK_ERROR_ARCH_MISMATCH:
    case NVJITLINK_ERROR_UNRECOGNIZED_ARCH:
    case NVJITLINK_ERROR_UNSUPPORTED_ARCH:
      return true;
    default:
      return false;
  }
}

struct HandleCloser {
  void operator()(nvJitLinkHandle h) const { nvJitLinkDestroy(&h); }
};
using Handle = std::unique_ptr<nvJitLink, HandleCloser>;

std::string read_log(nvJitLinkHandle h, nvJitLinkResult (*size_fn)(nvJitLinkHandle, size_t*),
                     nvJitLinkResult (*get_fn)(nvJitLinkHandle, char*)) {
  std::size_t n = 0;
  if (size_fn(h, &n) != NVJITLINK_SUCCESS || n <= 1) return {};
  std::string s(n, '\0');
  if (get_fn(h, s.data()) != NVJITLINK_SUCCESS) return {};
  s.resize(n - 1);  // the size counts the terminating NUL
  return s;
}

// The header's entry points are static inline wrappers; these adapters give them one signature.
nvJitLinkResult error_log_size(nvJitLinkHandle h, size_t* n) { return nvJitLinkGetErrorLogSize(h, n); }
nvJitLinkResult error_log(nvJitLinkHandle h, char* s) { return nvJitLinkGetErrorLog(h, s); }
nvJitLinkResult info_log_size(nvJitLinkHandle h, size_t* n) { return nvJitLinkGetInfoLogSize(h, n); }
nvJitLinkResult info_log(nvJitLinkHandle h, char* s) { return nvJitLinkGetInfoLog(h, s); }

void append_line(std::string& log, const std::string& line) {
  if (!log.empty() && log.back() != '\n') log += '\n';
  log += line;
}

}  // namespace

std::vector<std::string> link_option_strings(const LinkOptions& opt) {
  // nvJitLink itself takes only -O0 and -O3; ptxas's -O1 and -O2 go through -Xptxas (with no
  // nvJitLink -O next to it, which ptxas would report as a conflicting redefinition).
  // -no-cache: the BuildCache is the one cache; nvJitLink's own (active where a driver is
  // installed) would hide link time from measurements and keep a second copy of every cubin.
  const std::string level = std::to_string(opt.opt_level);
  std::vector<std::string> o = {"-arch=" + opt.arch,
                                opt.opt_level == 1 || opt.opt_level == 2 ? "-Xptxas=-O" + level : "-O" + level,
                                "-verbose", "-no-cache"};
  if (opt.max_registers > 0) o.push_back("-maxrregcount=" + std::to_string(opt.max_registers));
  o.insert(o.end(), opt.extra.begin(), opt.extra.end());
  return o;
}

std::vector<FunctionResources> parse_nvjitlink_resources(const std::string& info_log) {
  // ptxas's own lines are the ones parse_ptxas_resources knows; the linker's summary lines
  // ("info    : Function properties for 'k':") would otherwise read as a function named "'k':".
  std::string ptxas_lines;
  std::vector<std::pair<std::string, int>> linked_registers;
  static constexpr std::string_view kProps = "Function properties for '";
  static constexpr std::string_view kUsed = ": used ";
  std::istringstream in(info_log);
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.rfind("ptxas", 0) == 0) {
      ptxas_lines += line;
      ptxas_lines += '\n';
    } else if (line.rfind("info", 0) != 0) {
      continue;
    } else if (const auto p = line.find(kProps); p != std::string::npos) {
      const auto start = p + kProps.size();
      const auto end = line.find('\'', start);
      current = end == std::string::npos ? "" : line.substr(start, end - start);
    } else if (const auto u = line.find(kUsed); u != std::string::npos && !current.empty()) {
      // "info    : used 46 registers, ..."
      const char* first = line.c_str() + u + kUsed.size();
      char* last = nullptr;
      const long regs = std::strtol(first, &last, 10);
      if (last != first && std::string_view(last).rfind(" registers", 0) == 0)
        linked_registers.emplace_back(current, static_cast<int>(regs));
      current.clear();
    }
  }
  std::vector<FunctionResources> out = parse_ptxas_resources(ptxas_lines);
  for (const auto& [name, regs] : linked_registers) {
    FunctionResources* f = nullptr;
    for (auto& r : out)
      if (r.name == name) f = &r;
    if (!f) {
      out.push_back({});
      f = &out.back();
      f->name = name;
      f->is_entry = true;  // the linker summarizes kernels only
    }
    f->registers = regs;
  }
  return out;
}

LinkResult link_ptx(const std::string& ptx, const LinkOptions& opt, const std::string& name) {
  LinkResult r;
  const std::vector<std::string> opts = link_option_strings(opt);
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());

  nvJitLinkHandle raw = nullptr;
  nvJitLinkResult rc = nvJitLinkCreate(&raw, static_cast<std::uint32_t>(copts.size()), copts.data());
  Handle h(raw);
  auto fail = [&](const char* call, nvJitLinkResult code) {
    if (h) {
      r.error_log = read_log(h.get(), error_log_size, error_log);
      r.info_log = read_log(h.get(), info_log_size, info_log);
    }
    append_line(r.error_log, std::string(call) + " failed: " + status_name(code));
    if (std::string_view(call) == "nvJitLinkCreate") {  // name the options, the usual culprit
      r.error_log += " (options:";
      for (const auto& o : opts) r.error_log += " " + o;
      r.error_log += ")";
    }
    r.deterministic_failure = is_deterministic(code);
    return r;
  };
  if (rc != NVJITLINK_SUCCESS) return fail("nvJitLinkCreate", rc);

  // AddData compiles PTX right away and reports PTX errors here; Complete would still succeed
  // and hand back a cubin without the broken input, so every return code must be checked.
  rc = nvJitLinkAddData(h.get(), NVJITLINK_INPUT_PTX, ptx.data(), ptx.size(), name.c_str());
  if (rc != NVJITLINK_SUCCESS) return fail("nvJitLinkAddData", rc);
  rc = nvJitLinkComplete(h.get());
  if (rc != NVJITLINK_SUCCESS) return fail("nvJitLinkComplete", rc);

  std::size_t size = 0;
  rc = nvJitLinkGetLinkedCubinSize(h.get(), &size);
  if (rc != NVJITLINK_SUCCESS) return fail("nvJitLinkGetLinkedCubinSize", rc);
  r.cubin.resize(size);
  rc = nvJitLinkGetLinkedCubin(h.get(), r.cubin.data());
  if (rc != NVJITLINK_SUCCESS) {
    r.cubin.clear();
    return fail("nvJitLinkGetLinkedCubin", rc);
  }
  r.error_log = read_log(h.get(), error_log_size, error_log);
  r.info_log = read_log(h.get(), info_log_size, info_log);
  r.resources = parse_nvjitlink_resources(r.info_log);
  r.ok = !r.cubin.empty();
  if (!r.ok) append_line(r.error_log, "nvJitLink produced an empty cubin");
  return r;
}

std::string nvjitlink_version() {
  unsigned major = 0, minor = 0;
  if (nvJitLinkVersion(&major, &minor) != NVJITLINK_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace ptxevo::evaluator
