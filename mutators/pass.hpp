// Mutators: rule-based rewrites of the PTX IR. Every pass has a name (its id in the trace
// database), a stated legality condition, and string parameters with defaults, so a mutation
// is recorded as (pass name, parameters) and can be replayed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/module.hpp"

namespace ptxevo::mutators {

using PassParams = std::map<std::string, std::string>;

struct PassResult {
  bool applied = false;  // true when at least one change was made
  int changes = 0;       // rewritten instructions / directives
  std::string refusal;   // why nothing was changed, when applied == false
};

class PtxPass {
 public:
  virtual ~PtxPass() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  virtual std::string legality() const = 0;  // the stated legality condition
  // Every parameter the pass reads, with its default. All passes that rewrite instructions
  // also accept `targets` (comma-separated instruction ids; empty: every instruction).
  virtual std::map<std::string, std::string> param_defaults() const = 0;
  // Rewrites `m` in place. Unknown parameter names or bad values are refused (nothing changed).
  virtual PassResult apply(ir::Module& m, const PassParams& params) const = 0;
};

class PassRegistry {
 public:
  void add(std::unique_ptr<PtxPass> pass);          // replaces a pass of the same name
  const PtxPass* find(const std::string& name) const;  // nullptr when unknown
  std::vector<std::string> names() const;           // sorted
  std::size_t size() const { return passes_.size(); }

 private:
  std::map<std::string, std::unique_ptr<PtxPass>> passes_;
};

// Every pass of this directory, freshly constructed (no global state).
PassRegistry builtin_passes();

// ---- helpers shared by the passes -------------------------------------------------------

// Defaults overlaid with `given`; an error message when `given` names an unknown key.
std::optional<std::string> merge_params(const PtxPass& pass, const PassParams& given, PassParams* out);

// The `targets` parameter: instruction ids, or nullopt for "every instruction".
// Sets *error on a malformed list.
std::optional<std::set<std::uint32_t>> parse_targets(const std::string& text, std::string* error);

// "k=v" strings -> params; false with *error on an entry without '='.
bool parse_param_list(const std::vector<std::string>& kv, PassParams* out, std::string* error);

// PTX ISA version as major*10+minor ("8.0" -> 80); 0 when absent.
int ptx_version(const ir::Module& m);
// SM number of the first .target ("sm_90a" -> 90); 0 when absent.
int sm_version(const ir::Module& m);

std::vector<std::string> split_list(const std::string& text, char sep = ',');

}  // namespace ptxevo::mutators
