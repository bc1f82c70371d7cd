// An operation declared in a TOML file: its dims, options, tensors (with how the gate draws each
// input), launch plan, fp64 reference (CUDA C++ the engine builds and runs on the GPU), sizes and
// tolerances. Every expression is in the language of evaluator/expression.hpp, checked at load
// with the names it may use. The format is documented in docs/new_op.md; DeclaredOp
// (declared_op.hpp) is the Op the engine runs from it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "evaluator/expression.hpp"
#include "evaluator/op.hpp"
#include "evaluator/spec_error.hpp"

namespace ptxevo::declared_ops {

enum class OptionType { Int, Float, Bool, Enum, DType };

struct OptionDecl {
  std::string name;
  OptionType type = OptionType::Int;
  std::vector<std::string> values;  // Enum and DType: the values a spec may choose
  std::string default_value;        // as a spec writes it: "4", "1e-06", "true", "bf16"
  std::optional<double> min, max;   // Int and Float: the inclusive range
  std::string define;               // the template define it gives ("" none)
};

enum class FillKind { Gate, Normal, Uniform, Constant, IntRange, Offsets };

// How an input is drawn. Gate: each of the gate's distributions in turn (float tensors only);
// the others are fixed: normal(mean, std), uniform(low, high), constant(value), int_range(low,
// high) inclusive, offsets: the sorted start offsets of a packed batch, 0 first and `total` last
// with every segment at least one element long.
struct FillDecl {
  FillKind kind = FillKind::Gate;
  double a = 0, b = 1;  // normal: mean, std; uniform and int_range: low, high; constant: a
  std::string total;    // offsets: the last offset, an expression over dims and options
};

struct ToleranceDecl {
  std::string when;  // condition over options; "" always
  evaluator::Tolerance tol;
};

struct TensorDecl {
  std::string name;
  evaluator::Role role = evaluator::Role::In;
  std::string dtype;               // a dtype name, or a string expression over options giving one
  std::string define;              // a template define set to the C type of its dtype ("" none)
  std::vector<std::string> shape;  // expressions over dims and options
  std::string present;             // condition over options; "" always present
  FillDecl fill;
  std::vector<ToleranceDecl> tolerances;  // outputs: the first whose `when` holds
  // Gate-drawn float inputs: the degenerate rows they take (evaluator::DegenerateRow), each with
  // a condition over options ("" always).
  std::vector<std::pair<evaluator::DegenerateRow, std::string>> degenerate_rows;
};

struct TensorMapDecl {
  std::string tensor;
  std::vector<std::string> dims, strides_bytes, box;  // expressions, innermost dimension first
  int swizzle_bytes = 0;
  int l2_promotion_bytes = 0;
  bool oob_nan = false;
};

enum class ArgKind { Tensor, I32, I64, F32, F64, TensorMap };

struct ArgDecl {
  ArgKind kind = ArgKind::Tensor;
  std::string text;  // Tensor: its name ("ref:NAME" for a reference output); scalars: the expression
  TensorMapDecl map;
};

struct LaunchDecl {
  std::string entry;
  std::vector<std::string> grid, block, cluster;  // one to three expressions: x, y, z
  std::string shared_bytes = "0";
  bool programmatic = false;
  std::string when;  // condition; "" always launched
  std::vector<ArgDecl> args;
};

struct OpDeclaration {
  std::string path;
  std::string name, summary;
  std::vector<std::string> dims;
  std::vector<std::pair<std::string, evaluator::ExprKind>> knobs;  // what the launch plan reads
  // Named integers for the launch plans, in order: each may use dims, options, knobs and the
  // names before it (e.g. need = "cdiv(N, ITEMS * VEC)").
  std::vector<std::pair<std::string, std::string>> lets;
  std::vector<OptionDecl> options;
  std::vector<TensorDecl> tensors;
  std::vector<LaunchDecl> launches;
  std::string bytes, flops;  // expressions; "" bytes: every tensor read or written once
  std::string reference_path, reference_source;
  std::vector<TensorDecl> reference_scratch;
  std::vector<LaunchDecl> reference_launches;

  const OptionDecl* option(const std::string& name) const;
  const TensorDecl* tensor(const std::string& name) const;
};

struct OpDeclarationResult {
  std::optional<OpDeclaration> decl;
  std::optional<evaluator::SpecError> error;
};

// Never throws for a bad file: the first problem is the error, at its FILE:LINE:COL (the
// reference source is read relative to the op file).
OpDeclarationResult load_op_declaration(const std::string& path);
OpDeclarationResult parse_op_declaration(const std::string& text, const std::string& path);

const char* to_string(OptionType t);  // "int", "float", "bool", "enum", "dtype"

}  // namespace ptxevo::declared_ops
