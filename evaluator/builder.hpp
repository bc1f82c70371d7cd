// The build pipeline of one candidate: kernel template + defines + knobs -> NVRTC -> PTX IR ->
// optional PTX pass -> canonical PTX -> nvJitLink cubin, with the link step cached by content.
// Building is deterministic, so the final PTX (plus arch, toolchain and link options) names
// the cubin: the same PTX never links twice, whether it comes from the cache or from a
// duplicate in the same batch.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "evaluator/build_cache.hpp"
#include "evaluator/nvjitlink.hpp"
#include "evaluator/op.hpp"
#include "ir/module.hpp"

namespace ptxevo::evaluator {

struct BuildRequest {
  std::string name;                                  // for logs, e.g. "rmsnorm_fwd_seed"
  std::string source;                                // CUDA C++ template text
  std::string source_path;                           // for NVRTC (and, with ptx_override, parse) errors
  std::map<std::string, std::string> defines;        // op template defines (e.g. XT=__nv_bfloat16)
  Knobs knobs;                                       // become -DNAME=VALUE (strings as-is)
  std::string arch = "sm_90a";
  int opt_level = 3;                                 // nvJitLink -O
  int max_registers = 0;                             // 0: no cap (ignored for kernels with launch bounds)
  // Extra, e.g. "-lineinfo". Where a driver is installed NVRTC 13 also caches in the driver's
  // compute cache; "--no-cache" turns that off (for timing builds).
  std::vector<std::string> nvrtc_options;
  std::function<std::string(ir::Module&)> ptx_pass;  // optional PTX edit hook; returns "" or an error
  std::string ptx_override;                          // when non-empty: skip NVRTC, start from this PTX
};

struct BuildResult {
  bool ok = false;
  std::string stage;     // "nvrtc", "parse", "pass", "link" where it failed; "" when ok
  std::string error;     // user-facing message (compile log, FILE:LINE:COL for PTX parse errors)
  std::string nvrtc_log, link_log;
  std::string ptx;       // final printed PTX (after passes); on a parse failure the PTX that failed
  std::shared_ptr<const ir::Module> module;  // parsed final PTX
  std::vector<std::uint8_t> cubin;
  std::vector<FunctionResources> resources;
  std::string key;       // cache key of the link step (set once the final PTX exists)
  bool cache_hit = false;  // the cubin (or the link failure) came without linking
  double seconds = 0;      // wall time of this request
  std::string cache_warning;  // set when the cache could not be written; the build is still valid
};

class Builder {
 public:
  explicit Builder(BuildCache* cache /*nullable: no caching*/);

  // Thread-safe; never throws for a bad request or a failing pass (the result says why).
  BuildResult build(const BuildRequest& req) const;
  // Results in request order. Builds in parallel over all cores (TBB); each distinct final PTX
  // links once, and its duplicates in the batch copy that outcome with cache_hit set.
  // `cancel` set (from any thread): requests not started yet fail at stage "cancelled" at once;
  // those in a compiler finish.
  std::vector<BuildResult> build_all(const std::vector<BuildRequest>& reqs,
                                     const std::atomic<bool>* cancel = nullptr) const;

  // NVRTC invocations so far (a request whose source, knobs and options were compiled recently
  // reuses that PTX).
  std::int64_t nvrtc_runs() const { return nvrtc_runs_.load(); }

  // "nvrtc X.Y nvJitLink X.Y": part of every cache key.
  const std::string& toolchain() const { return toolchain_; }

 private:
  BuildResult front_end(const BuildRequest& req) const;     // up to the final PTX and key
  void link(const BuildRequest& req, BuildResult& r) const;  // cache lookup, link, cache store

  // NVRTC's output by (source, arch, options), the most recent few kept in memory: a PTX-level
  // child shares its parent's knobs, and NVRTC was most of a build's time on the H200
  // campaigns (3.6 s of a 5.6 s RMSNorm build), also for children whose pass then refused.
  struct NvrtcMemo {
    bool ok = false;
    std::string ptx, log;
  };
  std::shared_ptr<const NvrtcMemo> nvrtc(const std::string& source, const std::string& label, const std::string& arch,
                                         const std::vector<std::string>& options) const;
  // Two build rounds of up to ~48 children each run at once, and their parents (a population of
  // 24) must survive them: RMSNorm's PTX is ~1 MB, so this holds ~130 MB at most.
  static constexpr std::size_t kNvrtcMemoEntries = 128;
  mutable std::mutex memo_mu_;
  mutable std::atomic<std::int64_t> nvrtc_runs_{0};
  mutable std::list<std::string> memo_order_;  // most recently used first
  mutable std::unordered_map<std::string, std::pair<std::shared_ptr<const NvrtcMemo>, std::list<std::string>::iterator>>
      memo_;

  BuildCache* cache_;
  std::string toolchain_;
};

// The -D options for a request's defines and knobs, or an error for a bad or doubly set name.
std::vector<std::string> define_options(const BuildRequest& req, std::string* error);
LinkOptions link_options(const BuildRequest& req);

}  // namespace ptxevo::evaluator
