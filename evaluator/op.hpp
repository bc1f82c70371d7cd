// What an operation tells the engine: its tensors, how to launch a candidate for a shape and
// knob assignment, an fp64 CPU reference, bytes and flops per shape, and default tolerances.
// A candidate is device code only; everything here is engine-owned host code.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "evaluator/op_export.hpp"
#include "evaluator/spec_error.hpp"
#include "evaluator/tensor.hpp"

namespace ptxevo::evaluator {

// Named problem dimensions, e.g. {M: 32768, N: 4096}.
using Shape = std::map<std::string, std::int64_t>;
std::string shape_to_string(const Shape& s);  // "M=32768,N=4096"

// Knob values chosen by a genome; become -DNAME=VALUE for the template.
using KnobValue = std::variant<std::int64_t, std::string>;
using Knobs = std::map<std::string, KnobValue>;
std::int64_t knob_int(const Knobs& k, const std::string& name, std::int64_t fallback);

// Knob names an op still accepts for renamed knobs: old name -> current name.
using KnobAliases = std::map<std::string, std::string>;
// The knobs with every old name replaced by its current one, so that specs, command lines and
// trace databases written before a rename keep working. Throws std::invalid_argument when an old
// and its current name are both given. Names the aliases do not know are left for the op to judge.
Knobs canonical_knobs(const KnobAliases& aliases, Knobs k);

// Op options fixed by the spec for a whole campaign (dtypes, optional inputs, eps, ...).
using OpConfig = std::map<std::string, std::string>;

enum class Role { In, Out, InOut, Scratch };
const char* to_string(Role r);

// Input distributions; the gate draws every input from each of all_distributions() in turn.
// DegenerateRows is not among them: the gate adds it on every shape when an input declares
// degenerate rows (TensorDesc::degenerate_rows).
enum class Distribution { Normal, LargeUniform, SparseSpikes, HeavyTail, DegenerateRows };
const char* to_string(Distribution d);
const std::vector<Distribution>& all_distributions();

// Rows (along an input's last dimension) that break kernels which divide by a norm, drop an
// epsilon, flush small values or overflow a sum of squares. Under Distribution::DegenerateRows
// the odd rows are normal(0, 1) and even row 2j is of kind kinds[j % kinds.size()].
enum class DegenerateRow {
  Zero,           // every element 0
  Constant,       // one value, repeated
  Tiny,           // normal(0, 1) * 1e-30
  Denormal,       // below the dtype's smallest normal (fp32 and bf16: ~1e-39; fp16: ~1e-5)
  LargestFinite,  // +-(0.5 .. 1) x the dtype's largest finite value (only where the op can take it)
};
const char* to_string(DegenerateRow k);
std::optional<DegenerateRow> degenerate_row_from(const std::string& name);

struct TensorDesc {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  Role role = Role::In;
  // Inputs an op wants drawn its own way (e.g. a weight near 1) say so; others follow the gate.
  bool fixed_distribution = false;
  // The degenerate rows this input can take (empty: none; the op's math decides, e.g. largest
  // finite values only where no fp32 sum of their squares overflows).
  std::vector<DegenerateRow> degenerate_rows{};
  // A fixed distribution's parameter that depends on the shape (a declared op's offsets fill:
  // the last offset of the packed batch).
  std::int64_t fill_total = 0;
};

struct Dim3 {
  std::uint32_t x = 1, y = 1, z = 1;
};

// A kernel argument: a tensor's device pointer (an empty name passes a null pointer, for an
// optional tensor that is absent), or a scalar.
struct ArgTensor {
  std::string name;
};
// A TMA tensor map over a tensor's device buffer, encoded by the engine (cuTensorMapEncodeTiled)
// and passed by value as a `const __grid_constant__ CUtensorMap` parameter. Dimensions are
// listed innermost first, as the driver wants them; see tensor_map.hpp for the rules.
struct ArgTensorMap {
  std::string tensor;
  std::vector<std::uint64_t> dims;           // elements per dimension
  std::vector<std::uint64_t> strides_bytes;  // rank - 1 entries: byte strides of dims 1..rank-1
  std::vector<std::uint32_t> box;            // box (tile) size per dimension
  std::vector<std::uint32_t> element_strides;  // empty: all 1
  int swizzle_bytes = 0;                     // 0, 32, 64 or 128
  int l2_promotion_bytes = 0;                // 0, 64, 128 or 256
  bool oob_nan = false;                      // out-of-bounds reads give NaN instead of zero
};
using KernelArg = std::variant<ArgTensor, std::int32_t, std::int64_t, float, double, ArgTensorMap>;

struct KernelLaunch {
  std::string entry;
  Dim3 grid, block;
  std::uint32_t shared_bytes = 0;  // dynamic shared memory
  Dim3 cluster;                    // {1,1,1}: no cluster
  std::vector<KernelArg> args;
  // Programmatic dependent launch: this kernel may start once every CTA of the previous one has
  // executed griddepcontrol.launch_dependents (or exited), instead of after it completes. The
  // kernel then owns the synchronisation with its predecessor (griddepcontrol.wait or flags).
  bool programmatic = false;
};

struct LaunchPlan {
  std::vector<KernelLaunch> kernels;
};

// The fp64 reference as trusted device code (optional; see Op::device_reference_plan).
struct DeviceReferencePlan {
  // Outputs it computes; the engine allocates an F64 buffer of the output's shape for each and
  // passes it as the tensor "ref:<name>".
  std::vector<std::string> outputs;
  std::vector<TensorDesc> scratch;  // work buffers the launches need, by name
  LaunchPlan plan;                  // arguments name the op's inputs, "ref:<output>" and the scratch
};

struct Tolerance {
  double rel_l2 = 1e-2;   // ||out - ref|| / ||ref||
  double max_abs = 1e-1;  // max |out - ref| / max(1, max |ref|)
};

class Op {
 public:
  virtual ~Op() = default;
  virtual std::string name() const = 0;
  // Checks the spec's options; returns an error message or "" when they are valid.
  virtual std::string validate(const OpConfig& cfg) const = 0;
  // Every tensor of the op, each Scratch tensor as large as any plan the op can make needs.
  virtual std::vector<TensorDesc> tensors(const Shape& s, const OpConfig& cfg) const = 0;
  // The tensors one build with knobs `k` needs: tensors() with each Scratch tensor sized for that
  // build's plan (the default: tensors()). Throws std::invalid_argument like launch_plan.
  virtual std::vector<TensorDesc> build_tensors(const Shape& s, const OpConfig& cfg, const Knobs& k) const;
  // Preprocessor definitions the op's templates need for this config (element types, optional
  // features), passed to NVRTC as -DNAME=VALUE next to the knobs.
  virtual std::map<std::string, std::string> template_defines(const OpConfig& cfg) const = 0;
  // Throws std::invalid_argument with a user-facing message for a plan the knobs cannot make.
  virtual LaunchPlan launch_plan(const Shape& s, const OpConfig& cfg, const Knobs& k) const = 0;
  // Computes every Out/InOut tensor in fp64. `tensors` holds all tensors of `tensors()`, in
  // order; the outputs are written as F64 host tensors into `reference`.
  virtual void reference(const Shape& s, const OpConfig& cfg, const std::vector<HostTensor>& tensors,
                         std::vector<HostTensor>& reference) const = 0;
  virtual double bytes(const Shape& s, const OpConfig& cfg) const = 0;
  virtual double flops(const Shape& s, const OpConfig& cfg) const = 0;
  virtual Tolerance tolerance(const std::string& output, const OpConfig& cfg) const = 0;
  // The same fp64 reference as device code, for shapes where computing it on the host and
  // uploading it would dominate an evaluation (benchmark shapes of 10^9 elements). The source
  // is built with NVRTC by the engine, never by a candidate; before first use in a process its
  // results are compared with reference() on the spec's small shapes (device_reference.hpp).
  // An op without one returns "" and is always checked against the host reference.
  virtual std::string device_reference_source(const OpConfig& cfg) const;
  virtual DeviceReferencePlan device_reference_plan(const Shape& s, const OpConfig& cfg) const;
  // Fills an input drawn its own way (TensorDesc::fixed_distribution).
  virtual void fill_fixed(const TensorDesc& d, std::mt19937_64& rng, HostTensor& t) const;
  // False for an op whose only reference is its device reference (a declared op): the gate then
  // computes the reference on the GPU on every shape, and trusts it after it wrote every element
  // the same way twice, instead of comparing it with reference() (which such an op cannot run).
  virtual bool has_host_reference() const { return true; }
  // A seed's knobs (its defaults) must give what the op's launch plan reads; "" or the problem.
  virtual std::string check_seed_knobs(const Knobs& defaults) const;
  // The files the op was declared in (the declaration first, then what it reads, such as its
  // reference source); none for an op compiled into ptxevo. A campaign records them.
  virtual std::vector<std::string> declaration_files() const { return {}; }
  // Old knob names of renamed knobs, mapped to the current ones (canonical_knobs).
  virtual KnobAliases knob_aliases() const { return {}; }
  // For `ptxevo export` (op_export.hpp): the host side of the exported .cu for these options and
  // knobs, given the entries the candidate's PTX defines; nullopt for an op that has none.
  // Throws std::invalid_argument with a user-facing message for what it cannot export.
  virtual std::optional<HostExport> host_export(const OpConfig& cfg, const Knobs& k,
                                                const std::set<std::string>& defined) const;
  // The PyTorch binding and module (op_export.hpp), or nullopt. Throws std::invalid_argument.
  virtual std::optional<TorchExport> torch_export(const OpConfig& cfg) const;
};

// canonical_knobs with the op's aliases; the one step every place that takes knobs from a user,
// a spec or a trace database runs before using them.
Knobs canonical_knobs(const Op& op, Knobs k);
// The tensors a batch of builds (their knob sets) shares: tensors() with each Scratch tensor as
// large as the largest build_tensors() of the sets asks for. A set whose knobs make no plan is left
// out (its launch plan fails on its own); with none left, tensors().
std::vector<TensorDesc> batch_tensors(const Op& op, const Shape& s, const OpConfig& cfg, const std::vector<Knobs>& knobs);
// The current name of a knob (the name itself when it was never renamed).
std::string canonical_knob_name(const Op& op, const std::string& name);

// Reads an op declared in a file; nullptr and *error (FILE:LINE:COL) when it cannot.
using OpFileLoader = std::function<std::unique_ptr<Op>(const std::string& path, SpecError* error)>;

// Ops by name: those compiled in, and those declared in files, loaded on first use. Owned by
// the caller (no global registry).
class OpRegistry {
 public:
  OpRegistry();
  explicit OpRegistry(OpFileLoader loader);
  OpRegistry(OpRegistry&&) noexcept;
  OpRegistry& operator=(OpRegistry&&) noexcept;
  ~OpRegistry();

  void add(std::unique_ptr<Op> op);
  const Op* find(const std::string& name) const;  // compiled-in or already loaded from a file
  std::vector<std::string> names() const;
  // The op declared in `path`, loaded once per file (so logically const: what a name means never
  // changes). nullptr and *error when the file is bad, there is no loader, or its name is taken.
  const Op* load_file(const std::string& path, SpecError* error) const;

 private:
  struct FileOps;
  std::map<std::string, std::unique_ptr<Op>> ops_;
  OpFileLoader loader_;
  std::unique_ptr<FileOps> files_;
};

}  // namespace ptxevo::evaluator
