// What a command that builds candidates of one spec needs, made in one place and handed down:
// the op registry (the built-in ops; a spec's op file loads into it), the spec with --arch
// applied, its op, and a builder over the on-disk build cache.
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "evaluator/build_cache.hpp"
#include "evaluator/builder.hpp"
#include "evaluator/evaluation.hpp"
#include "evaluator/op.hpp"
#include "evaluator/spec.hpp"

namespace ptxevo::cli {

// A builder over the default cache folder ($PTXEVO_CACHE_DIR or the user's cache), or over no
// cache with --no-cache or when there is no such folder.
class CachedBuilder {
 public:
  explicit CachedBuilder(bool no_cache);
  const evaluator::Builder& builder() const { return *builder_; }

 private:
  std::optional<evaluator::BuildCache> cache_;
  std::unique_ptr<evaluator::Builder> builder_;
};

class SpecContext {
 public:
  // nullptr after writing why to `err` (FILE:LINE:COL for the spec); *status is the exit code:
  // 1 for a spec that does not load, 2 for a bad --arch.
  static std::unique_ptr<SpecContext> load(const std::string& spec_path, const std::string& arch, bool no_cache,
                                           std::ostream& err, int* status);

  const evaluator::OpRegistry& registry() const { return registry_; }
  const evaluator::Spec& spec() const { return spec_; }
  const evaluator::Op& op() const { return *op_; }
  const evaluator::Builder& builder() const { return builder_.builder(); }

 private:
  explicit SpecContext(bool no_cache) : builder_(no_cache) {}
  evaluator::OpRegistry registry_;
  evaluator::Spec spec_;
  const evaluator::Op* op_ = nullptr;
  CachedBuilder builder_;
};

// The candidate `ptxevo eval` and `ptxevo build` take: --source / --ptx, --knobs over the seed
// defaults, or a campaign's candidate by id (--candidate, --db: its knobs and PTX edits). False
// after writing why to `err`.
struct CandidateOptions {
  std::string source, ptx, knobs, db;
  std::int64_t candidate = 0;
};
bool candidate_input(const SpecContext& ctx, const std::string& spec_path, const CandidateOptions& o,
                     evaluator::CandidateInput* input, std::ostream& err);

}  // namespace ptxevo::cli
