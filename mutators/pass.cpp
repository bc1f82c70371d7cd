#include "mutators/pass.hpp"

#include <cctype>
#include <charconv>

#include "mutators/async_copy.hpp"
#include "mutators/fast_math.hpp"
#include "mutators/hoist_global_loads.hpp"
#include "mutators/if_convert.hpp"
#include "mutators/l1_no_allocate.hpp"
#include "mutators/l2_evict_hint.hpp"
#include "mutators/launch_bounds.hpp"
#include "mutators/ld_global_nc.hpp"
#include "mutators/max_registers.hpp"
#include "mutators/store_streaming.hpp"
#include "mutators/widen_vector.hpp"

namespace ptxevo::mutators {

void PassRegistry::add(std::unique_ptr<PtxPass> pass) {
  std::string n = pass->name();
  passes_[n] = std::move(pass);
}

const PtxPass* PassRegistry::find(const std::string& name) const {
  auto it = passes_.find(name);
  return it == passes_.end() ? nullptr : it->second.get();
}

std::vector<std::string> PassRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [n, p] : passes_) out.push_back(n);
  return out;
}

PassRegistry builtin_passes() {
  PassRegistry r;
  r.add(std::make_unique<LdGlobalNcPass>());
  r.add(std::make_unique<L1NoAllocatePass>());
  r.add(std::make_unique<L2EvictHintPass>());
  r.add(std::make_unique<StoreStreamingPass>());
  r.add(std::make_unique<MaxRegistersPass>());
  r.add(std::make_unique<LaunchBoundsPass>());
  r.add(std::make_unique<FastMathPass>());
  r.add(std::make_unique<HoistGlobalLoadsPass>());
  r.add(std::make_unique<WidenVectorPass>());
  r.add(std::make_unique<AsyncCopyPass>());
  r.add(std::make_unique<IfConvertPass>());
  r.add(std::make_unique<IfUnconvertPass>());
  return r;
}

std::optional<std::string> merge_params(const PtxPass& pass, const PassParams& given, PassParams* out) {
  *out = pass.param_defaults();
  for (const auto& [k, v] : given) {
    auto it = out->find(k);
    if (it == out->end()) {
      std::string known;
      for (const auto& [dk, dv] : *out) known += (known.empty() ? "" : ", ") + dk;
      return "unknown parameter '" + k + "' for pass " + pass.name() + " (known: " +
             (known.empty() ? "none" : known) + ")";
    }
    it->second = v;
  }
  return std::nullopt;
}

std::vector<std::string> split_list(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::optional<std::set<std::uint32_t>> parse_targets(const std::string& text, std::string* error) {
  if (text.empty()) return std::nullopt;
  std::set<std::uint32_t> ids;
  for (const auto& s : split_list(text)) {
    std::uint32_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) {
      *error = "bad instruction id '" + s + "' in targets";
      return std::set<std::uint32_t>{};
    }
    ids.insert(v);
  }
  return ids;
}

bool parse_param_list(const std::vector<std::string>& kv, PassParams* out, std::string* error) {
  for (const auto& s : kv) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) {
      *error = "parameter '" + s + "' is not of the form key=value";
      return false;
    }
    (*out)[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return true;
}

int ptx_version(const ir::Module& m) {
  const std::string v = m.version();
  auto dot = v.find('.');
  if (dot == std::string::npos) return 0;
  int major = 0, minor = 0;
  std::from_chars(v.data(), v.data() + dot, major);
  std::from_chars(v.data() + dot + 1, v.data() + v.size(), minor);
  return major * 10 + minor;
}

int sm_version(const ir::Module& m) {
  const std::string t = m.target();
  if (t.rfind("sm_", 0) != 0) return 0;
  int sm = 0;
  std::from_chars(t.data() + 3, t.data() + t.size(), sm);
  return sm;
}

}  // namespace ptxevo::mutators
