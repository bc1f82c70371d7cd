#include "evaluator/builder.hpp"

#include <tbb/parallel_for.h>

#include <chrono>
#include <exception>
#include <mutex>
#include <unordered_map>

#include "evaluator/nvrtc_compiler.hpp"
#include "ir/parser.hpp"
#include "ir/printer.hpp"

namespace ptxevo::evaluator {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool is_identifier(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s)
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

std::string knob_text(const KnobValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  return std::get<std::string>(v);
}

// Takes `r` by reference: the message may be one of its own fields (the NVRTC log).
BuildResult fail(BuildResult& r, const char* stage, std::string error) {
  r.ok = false;
  r.stage = stage;
  r.error = std::move(error);
  return std::move(r);
}

}  // namespace

std::vector<std::string> define_options(const BuildRequest& req, std::string* error) {
  std::vector<std::string> out;
  error->clear();
  for (const auto& [name, value] : req.defines) {
    if (!is_identifier(name)) *error = "invalid define name '" + name + "'";
    out.push_back("-D" + name + "=" + value);
  }
  for (const auto& [name, value] : req.knobs) {
    if (!is_identifier(name)) *error = "invalid knob name '" + name + "'";
    // A knob and an op define of the same name would make the winner depend on option order.
    if (req.defines.count(name)) *error = "knob '" + name + "' is also an op template define";
    out.push_back("-D" + name + "=" + knob_text(value));
  }
  return out;
}

LinkOptions link_options(const BuildRequest& req) {
  LinkOptions o;
  o.arch = req.arch;
  o.opt_level = req.opt_level;
  o.max_registers = req.max_registers;
  return o;
}

Builder::Builder(BuildCache* cache)
    : cache_(cache), toolchain_("nvrtc " + nvrtc_version() + " nvJitLink " + nvjitlink_version()) {}

BuildResult Builder::front_end(const BuildRequest& req) const {
  BuildResult r;
  const std::string cu_label = req.source_path.empty() ? req.name + ".cu" : req.source_path;
  std::string ptx_label;
  std::string ptx = req.ptx_override;
  if (ptx.empty()) {
    std::string error;
    std::vector<std::string> opts = define_options(req, &error);
    if (!error.empty()) return fail(r, "nvrtc", req.name + ": " + error);
    opts.insert(opts.end(), req.nvrtc_options.begin(), req.nvrtc_options.end());
    const auto c = nvrtc(req.source, cu_label, req.arch, opts);
    r.nvrtc_log = c->log;
    if (!c->ok) return fail(r, "nvrtc", r.nvrtc_log);
    ptx = c->ptx;
    ptx_label = cu_label + ".ptx";
  } else {
    ptx_label = req.source_path.empty() ? req.name + ".ptx" : req.source_path;
  }

  ir::ParseResult parsed = ir::parse_ptx(ptx);
  if (!parsed.ok()) {
    std::string error = parsed.error->format(ptx_label);
    if (req.ptx_override.empty()) error += " (in the PTX NVRTC generated, kept in BuildResult::ptx)";
    r.ptx = std::move(ptx);  // so the position in the message can be looked up
    return fail(r, "parse", error);
  }
  if (req.ptx_pass) {
    std::string error;
    try {
      error = req.ptx_pass(*parsed.module);
    } catch (const std::exception& e) {
      error = std::string("pass threw: ") + e.what();
    }
    if (!error.empty()) return fail(r, "pass", error);
  }
  r.ptx = ir::print_module(*parsed.module);
  r.module = std::make_shared<const ir::Module>(std::move(*parsed.module));
  r.key = BuildCache::key(r.ptx, req.arch, toolchain_, link_option_strings(link_options(req)));
  r.ok = true;
  return r;
}

void Builder::link(const BuildRequest& req, BuildResult& r) const {
  auto apply = [&](bool ok, std::vector<std::uint8_t> cubin, std::vector<FunctionResources> res, std::string log) {
    r.ok = ok;
    r.cubin = std::move(cubin);
    r.resources = std::move(res);
    r.link_log = std::move(log);
    if (!ok) {
      // ptxas says "ptx input, line N": point the user at the text those lines refer to.
      r.stage = "link";
      r.error = "nvJitLink failed on " + req.name + ".ptx for " + req.arch +
                " (line numbers refer to the final PTX, BuildResult::ptx):\n" + r.link_log;
    }
  };
  if (cache_) {
    if (auto hit = cache_->load(r.key)) {
      r.cache_hit = true;
      apply(hit->ok, std::move(hit->cubin), std::move(hit->resources), std::move(hit->link_log));
      return;
    }
  }
  LinkResult l = link_ptx(r.ptx, link_options(req), req.name + ".ptx");
  if (cache_ && (l.ok || l.deterministic_failure)) {
    CachedLink e{l.ok, l.cubin, l.resources, l.error_log, l.info_log};
    r.cache_warning = cache_->store(r.key, e);
  }
  apply(l.ok, std::move(l.cubin), std::move(l.resources), std::move(l.error_log));
}

std::shared_ptr<const Builder::NvrtcMemo> Builder::nvrtc(const std::string& source, const std::string& label,
                                                          const std::string& arch,
                                                          const std::vector<std::string>& options) const {
  std::string id = source;
  id.push_back('\0');
  id += label;
  id.push_back('\0');
  id += arch;
  for (const auto& o : options) {
    id.push_back('\0');
    id += o;
  }
  const std::string key = sha256_hex(id);
  {
    std::lock_guard<std::mutex> lock(memo_mu_);
    if (auto it = memo_.find(key); it != memo_.end()) {
      memo_order_.splice(memo_order_.begin(), memo_order_, it->second.second);
      return it->second.first;
    }
  }
  // Two threads may compile the same source at once; both results are the same.
  ++nvrtc_runs_;
  NvrtcResult c = compile_to_ptx(source, label, arch, options);
  auto memo = std::make_shared<const NvrtcMemo>(NvrtcMemo{c.ok, std::move(c.ptx), std::move(c.log)});
  if (!memo->ok) return memo;  // kept only when it worked: a failure might be the machine's, not the source's
  std::lock_guard<std::mutex> lock(memo_mu_);
  if (memo_.count(key) == 0) {
    memo_order_.push_front(key);
    memo_.emplace(key, std::make_pair(memo, memo_order_.begin()));
    while (memo_.size() > kNvrtcMemoEntries) {
      memo_.erase(memo_order_.back());
      memo_order_.pop_back();
    }
  }
  return memo;
}

BuildResult Builder::build(const BuildRequest& req) const {
  const auto t0 = Clock::now();
  BuildResult r = front_end(req);
  if (r.ok) link(req, r);
  r.seconds = since(t0);
  return r;
}

std::vector<BuildResult> Builder::build_all(const std::vector<BuildRequest>& reqs, const std::atomic<bool>* cancel) const {
  std::vector<BuildResult> out(reqs.size());
  // The first request to reach the link step with a given final PTX links it; later ones with
  // the same key skip the link and copy its outcome below. Claiming a key instead of waiting
  // for all front ends keeps links running while other requests are still in NVRTC.
  std::mutex mu;
  std::unordered_map<std::string, std::size_t> leader_of;
  tbb::parallel_for(std::size_t{0}, reqs.size(), [&](std::size_t i) {
    if (cancel && cancel->load()) {
      out[i].ok = false;
      out[i].stage = "cancelled";
      out[i].error = "cancelled before it started (the campaign's deadline)";
      return;
    }
    const auto t0 = Clock::now();
    out[i] = front_end(reqs[i]);
    if (out[i].ok) {
      bool leads = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        leads = leader_of.emplace(out[i].key, i).second;
      }
      if (leads) link(reqs[i], out[i]);
    }
    out[i].seconds = since(t0);
  });

  // Every leader has finished now; a follower still holds its front end's result.
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!out[i].ok) continue;
    const std::size_t l = leader_of.at(out[i].key);
    if (l == i) continue;
    const BuildResult& src = out[l];
    out[i].ok = src.ok;
    out[i].stage = src.stage;
    out[i].error = src.error;
    out[i].link_log = src.link_log;
    out[i].cubin = src.cubin;
    out[i].resources = src.resources;
    out[i].cache_hit = true;
  }
  return out;
}

}  // namespace ptxevo::evaluator
