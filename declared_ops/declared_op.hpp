// The Op the engine runs from an OpDeclaration: options checked against their types and ranges,
// tensors, launch plans and sizes evaluated from the declared expressions, inputs drawn as
// declared, and the fp64 reference as device code (no host reference: the gate runs the
// reference on the GPU on every shape, see Op::has_host_reference).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "declared_ops/op_declaration.hpp"
#include "evaluator/op.hpp"

namespace ptxevo::declared_ops {

class DeclaredOp : public evaluator::Op {
 public:
  explicit DeclaredOp(OpDeclaration d) : d_(std::move(d)) {}

  std::string name() const override { return d_.name; }
  std::string validate(const evaluator::OpConfig& cfg) const override;
  std::vector<evaluator::TensorDesc> tensors(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  std::map<std::string, std::string> template_defines(const evaluator::OpConfig& cfg) const override;
  evaluator::LaunchPlan launch_plan(const evaluator::Shape& s, const evaluator::OpConfig& cfg,
                                    const evaluator::Knobs& k) const override;
  // A declared op has no host reference; calling this is a logic error.
  void reference(const evaluator::Shape& s, const evaluator::OpConfig& cfg, const std::vector<evaluator::HostTensor>& tensors,
                 std::vector<evaluator::HostTensor>& reference) const override;
  double bytes(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  double flops(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  evaluator::Tolerance tolerance(const std::string& output, const evaluator::OpConfig& cfg) const override;
  std::string device_reference_source(const evaluator::OpConfig& cfg) const override;
  evaluator::DeviceReferencePlan device_reference_plan(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  void fill_fixed(const evaluator::TensorDesc& d, std::mt19937_64& rng, evaluator::HostTensor& t) const override;
  bool has_host_reference() const override { return false; }
  std::string check_seed_knobs(const evaluator::Knobs& defaults) const override;
  std::vector<std::string> declaration_files() const override { return {d_.path, d_.reference_path}; }

  const OpDeclaration& declaration() const { return d_; }

  // The options of `cfg` with defaults filled in, typed. Throws std::invalid_argument for an
  // unknown option or a value its type or range does not allow.
  struct Options {
    evaluator::Bindings values;             // int, bool, enum and dtype options (dtypes by name)
    std::map<std::string, double> reals;    // float options
    std::map<std::string, evaluator::DType> dtypes;
  };
  Options options(const evaluator::OpConfig& cfg) const;
  // Dims of `s` (exactly the declared ones) plus the options, as expression values.
  evaluator::Bindings shape_values(const evaluator::Shape& s, const Options& o) const;
  evaluator::DType dtype_of(const TensorDecl& t, const Options& o) const;

 private:
  evaluator::LaunchPlan plan(const std::vector<LaunchDecl>& launches, const evaluator::Bindings& values, const Options& o,
                             const evaluator::Shape& s) const;
  OpDeclaration d_;
};

// An OpFileLoader (evaluator/op.hpp) for OpRegistry: the op declared in `path`, or nullptr and *error.
std::unique_ptr<evaluator::Op> load_declared_op(const std::string& path, evaluator::SpecError* error);

// The C type a dtype is in CUDA C++ ("__nv_bfloat16", "float", "long long", ...).
const char* cuda_type(evaluator::DType t);

}  // namespace ptxevo::declared_ops
