#include "declared_ops/op_declaration.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "evaluator/tensor.hpp"
#include "evaluator/toml_reader.hpp"

namespace ptxevo::declared_ops {

using evaluator::ExprKind;
using evaluator::ExprTypes;
using evaluator::Role;
using evaluator::TomlFailure;

const char* to_string(OptionType t) {
  switch (t) {
    case OptionType::Int: return "int";
    case OptionType::Float: return "float";
    case OptionType::Bool: return "bool";
    case OptionType::Enum: return "enum";
    case OptionType::DType: return "dtype";
  }
  return "?";
}

const OptionDecl* OpDeclaration::option(const std::string& n) const {
  for (const auto& o : options)
    if (o.name == n) return &o;
  return nullptr;
}

const TensorDecl* OpDeclaration::tensor(const std::string& n) const {
  for (const auto& t : tensors)
    if (t.name == n) return &t;
  return nullptr;
}

namespace {

bool is_float_dtype(evaluator::DType t) {
  using evaluator::DType;
  return t == DType::F64 || t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

class Reader : evaluator::TomlReader {
 public:
  explicit Reader(std::string path) : TomlReader(std::move(path)) {}

  OpDeclaration read(const toml::table& root) {
    check_keys(root, {"op", "options", "let", "tensor", "launch", "reference"}, "the top-level table");
    d_.path = path_;
    read_op(table_of(required(root, "op", "the top-level table"), "[op]"));
    if (const toml::node* o = root.get("options")) read_options(table_of(*o, "[options]"));
    shape_types_ = types(false);
    launch_types_ = types(true);
    if (const toml::node* l = root.get("let")) {
      for (const auto& [key, v] : evaluator::in_file_order(table_of(*l, "[let]"))) {
        const std::string name(key->str());
        claim(*v, name, "let value");
        d_.lets.emplace_back(name, expression(*v, "let value '" + name + "'", launch_types_, ExprKind::Int));
        launch_types_[name] = ExprKind::Int;
      }
    }
    const toml::node& ts = required(root, "tensor", "the top-level table (an op needs [[tensor]] entries)");
    for (const toml::node& t : tables(ts, "tensor")) d_.tensors.push_back(read_tensor(*t.as_table(), false));
    bool any_out = false;
    for (const auto& t : d_.tensors) any_out |= t.role == Role::Out || t.role == Role::InOut;
    if (!any_out) fail(ts, "the op has no output: give a [[tensor]] role \"out\" or \"inout\"");
    for (const toml::node& l : tables(required(root, "launch", "the top-level table (an op needs a [[launch]])"), "launch"))
      d_.launches.push_back(read_launch(*l.as_table(), "[[launch]]", launch_types_, false));
    read_reference(table_of(required(root, "reference", "the top-level table (an op needs an fp64 [reference])"), "[reference]"));
    if (const toml::node* b = op_table_->get("bytes")) d_.bytes = expression(*b, "'bytes'", shape_types_, ExprKind::Int);
    if (const toml::node* f = op_table_->get("flops")) d_.flops = expression(*f, "'flops'", shape_types_, ExprKind::Int);
    return std::move(d_);
  }

 private:
  const toml::array& tables(const toml::node& n, const std::string& key) const {
    const auto* a = n.as_array();
    if (!a || !a->is_array_of_tables() || a->empty())
      fail(n, "'" + key + "' must be one or more tables (write each as [[" + key + "]]), got " + evaluator::type_name(n));
    return *a;
  }

  void claim(const toml::node& at, const std::string& name, const std::string& what) {
    if (!evaluator::is_identifier(name)) fail(at, what + " '" + name + "' must be a C identifier");
    if (auto it = names_.find(name); it != names_.end()) fail(at, what + " '" + name + "' is already " + it->second);
    names_[name] = "the " + what + " at " + evaluator::position(at);
  }

  void read_op(const toml::table& t) {
    op_table_ = &t;
    check_keys(t, {"name", "summary", "dims", "knobs", "bytes", "flops"}, "[op]");
    d_.name = identifier_of(required(t, "name", "[op]"), "the op's 'name'");
    if (const toml::node* s = t.get("summary")) d_.summary = string_of(*s, "'summary'");
    const toml::node& dn = required(t, "dims", "[op]");
    const toml::array& dims = array_of(dn, "'dims'");
    if (dims.empty()) fail(dn, "'dims' must name at least one dimension, e.g. [\"M\", \"N\"]");
    for (const toml::node& e : dims) {
      const std::string dim = string_of(e, "a dimension");
      claim(e, dim, "dimension");
      d_.dims.push_back(dim);
    }
    if (const toml::node* k = t.get("knobs")) {
      for (const auto& [key, v] : evaluator::in_file_order(table_of(*k, "'knobs' (e.g. { THREADS = \"int\" })"))) {
        const std::string name(key->str());
        claim(*v, name, "knob");
        const std::string kind = string_of(*v, "the kind of knob '" + name + "'");
        if (kind != "int" && kind != "string") fail(*v, "the kind of knob '" + name + "' must be \"int\" or \"string\", got \"" + kind + "\"");
        d_.knobs.emplace_back(name, kind == "int" ? ExprKind::Int : ExprKind::Str);
      }
    }
  }

  void read_options(const toml::table& t) {
    for (const auto& [key, v] : evaluator::in_file_order(t)) {
      OptionDecl o;
      o.name = std::string(key->str());
      claim(*v, o.name, "option");
      const std::string where = "[options." + o.name + "]";
      const toml::table& ot = table_of(*v, where);
      check_keys(ot, {"type", "values", "default", "min", "max", "define"}, where);
      const toml::node& tn = required(ot, "type", where);
      const std::string type = string_of(tn, "'type' of " + where);
      const std::map<std::string, OptionType> kinds = {{"int", OptionType::Int}, {"float", OptionType::Float},
                                                       {"bool", OptionType::Bool}, {"enum", OptionType::Enum},
                                                       {"dtype", OptionType::DType}};
      auto it = kinds.find(type);
      if (it == kinds.end()) fail(tn, "'type' of " + where + " must be one of: int, float, bool, enum, dtype; got \"" + type + "\"");
      o.type = it->second;
      const bool listed = o.type == OptionType::Enum || o.type == OptionType::DType;
      const toml::node* vals = ot.get("values");
      if (listed && !vals) fail(ot, "missing required key 'values' in " + where + " (the " + type + "s a spec may choose)");
      if (!listed && vals) fail(*vals, "'values' is for enum and dtype options; " + where + " is " + type);
      if (vals) {
        for (const toml::node& e : array_of(*vals, "'values' of " + where)) {
          const std::string s = string_of(e, "a value of " + where);
          if (o.type == OptionType::DType) {
            evaluator::DType dt;
            if (!evaluator::parse_dtype(s, &dt)) fail(e, "unknown dtype '" + s + "'; dtypes: f64, f32, f16, bf16, i64, i32, u8");
          } else if (!evaluator::is_identifier(s)) {
            fail(e, "an enum value must be a C identifier (it can become a define), got '" + s + "'");
          }
          if (std::find(o.values.begin(), o.values.end(), s) != o.values.end()) fail(e, "duplicate value '" + s + "' in " + where);
          o.values.push_back(s);
        }
        if (o.values.empty()) fail(*vals, "'values' of " + where + " must not be empty");
      }
      for (const char* bound : {"min", "max"})
        if (const toml::node* b = ot.get(bound)) {
          if (o.type != OptionType::Int && o.type != OptionType::Float) fail(*b, std::string("'") + bound + "' is for int and float options");
          (bound[1] == 'i' ? o.min : o.max) = o.type == OptionType::Int ? static_cast<double>(int_of(*b, bound)) : number_of(*b, bound);
        }
      const toml::node& def = required(ot, "default", where);
      switch (o.type) {
        case OptionType::Int: o.default_value = std::to_string(int_of(def, "the default of " + where)); break;
        case OptionType::Float: o.default_value = evaluator::number_to_string(number_of(def, "the default of " + where)); break;
        case OptionType::Bool: o.default_value = bool_of(def, "the default of " + where) ? "true" : "false"; break;
        default:
          o.default_value = string_of(def, "the default of " + where);
          if (std::find(o.values.begin(), o.values.end(), o.default_value) == o.values.end())
            fail(def, "the default '" + o.default_value + "' of " + where + " is not one of its values");
      }
      if (o.type == OptionType::Int || o.type == OptionType::Float) {
        const double dv = std::stod(o.default_value);
        if ((o.min && dv < *o.min) || (o.max && dv > *o.max)) fail(def, "the default of " + where + " is outside [min, max]");
      }
      if (const toml::node* dn = ot.get("define")) {
        o.define = identifier_of(*dn, "'define' of " + where);
        claim(*dn, o.define, "define");
      }
      d_.options.push_back(std::move(o));
    }
  }

  ExprTypes types(bool with_knobs) const {
    ExprTypes t;
    for (const auto& dim : d_.dims) t[dim] = ExprKind::Int;
    for (const auto& o : d_.options) {
      if (o.type == OptionType::Float) continue;  // reals are not expression values (see f32:/f64: arguments)
      t[o.name] = o.type == OptionType::Int ? ExprKind::Int : o.type == OptionType::Bool ? ExprKind::Bool : ExprKind::Str;
    }
    if (with_knobs)
      for (const auto& [k, kind] : d_.knobs) t[k] = kind;
    return t;
  }

  // An expression, checked; errors point into the string when the file holds it verbatim.
  std::string expression(const toml::node& n, const std::string& what, const ExprTypes& types, ExprKind want) const {
    std::string e;
    if (const auto* i = n.as_integer()) e = std::to_string(i->get());
    else e = string_of(n, what + " (an expression)");
    check(n, e, what, types, want);
    return e;
  }

  void check(const toml::node& n, const std::string& e, const std::string& what, const ExprTypes& types, ExprKind want) const {
    auto err = evaluator::check_expression(e, types, want);
    if (!err) return;
    const toml::source_region& src = n.source();
    const bool exact = n.is_string() && src.begin.line == src.end.line && src.end.column - src.begin.column == e.size() + 2;
    if (exact) {
      toml::source_position at = src.begin;
      at.column = static_cast<toml::source_index>(at.column + err->column);
      fail(at, "invalid " + what + ": " + err->message);
    }
    fail(n, "invalid " + what + " (column " + std::to_string(err->column) + " of the expression): " + err->message);
  }

  std::vector<std::string> expressions(const toml::node& n, const std::string& what, const ExprTypes& types,
                                       std::size_t min_count, std::size_t max_count) const {
    std::vector<std::string> out;
    if (n.is_string() || n.is_integer()) {
      out.push_back(expression(n, what, types, ExprKind::Int));
    } else {
      const toml::array& a = array_of(n, what + " (an expression or a list of them)");
      for (const toml::node& e : a) out.push_back(expression(e, what, types, ExprKind::Int));
    }
    if (out.size() < min_count || out.size() > max_count)
      fail(n, what + " takes " + std::to_string(min_count) + " to " + std::to_string(max_count) + " expressions, got " +
                  std::to_string(out.size()));
    return out;
  }

  TensorDecl read_tensor(const toml::table& t, bool scratch_of_reference) {
    const std::string where0 = scratch_of_reference ? "[[reference.scratch]]" : "[[tensor]]";
    check_keys(t, {"name", "role", "dtype", "define", "shape", "present", "fill", "tolerance", "degenerate_rows"}, where0);
    TensorDecl td;
    const toml::node& nn = required(t, "name", where0);
    td.name = string_of(nn, "a tensor's 'name'");
    claim(nn, td.name, "tensor");
    const std::string where = "tensor '" + td.name + "'";
    if (scratch_of_reference) {
      td.role = Role::Scratch;
    } else {
      const toml::node& rn = required(t, "role", where);
      const std::string role = string_of(rn, "'role' of " + where);
      const std::map<std::string, Role> roles = {{"in", Role::In}, {"out", Role::Out}, {"inout", Role::InOut}, {"scratch", Role::Scratch}};
      auto it = roles.find(role);
      if (it == roles.end()) fail(rn, "'role' of " + where + " must be in, out, inout or scratch; got \"" + role + "\"");
      td.role = it->second;
    }
    const toml::node& dn = required(t, "dtype", where);
    td.dtype = string_of(dn, "'dtype' of " + where);
    evaluator::DType dt;
    const OptionDecl* opt = d_.option(td.dtype);
    if (opt && opt->type != OptionType::DType && opt->type != OptionType::Enum)
      fail(dn, "option '" + td.dtype + "' is " + to_string(opt->type) + ", not a dtype option");
    bool all_float = true;
    if (opt) {
      for (const auto& v : opt->values) {
        if (!evaluator::parse_dtype(v, &dt))
          fail(dn, "option '" + td.dtype + "' can be '" + v + "', which is not a dtype");
        all_float &= is_float_dtype(dt);
      }
    } else if (evaluator::parse_dtype(td.dtype, &dt)) {
      all_float = is_float_dtype(dt);
    } else {
      // A string expression over the options, e.g. "w_dtype == \"same\" ? x_dtype : \"fp32\"";
      // its value is checked when the options are known.
      check(dn, td.dtype, "'dtype' of " + where + " (a dtype, a dtype option, or a string expression giving one)",
            shape_types_, ExprKind::Str);
      all_float = true;
    }
    if (const toml::node* def = t.get("define")) {
      td.define = identifier_of(*def, "'define' of " + where);
      claim(*def, td.define, "define");
    }
    td.shape = expressions(required(t, "shape", where), "'shape' of " + where, shape_types_, 1, 8);
    if (const toml::node* p = t.get("present")) td.present = expression_bool(*p, "'present' of " + where);
    const bool input = td.role == Role::In || td.role == Role::InOut;
    if (const toml::node* f = t.get("fill")) {
      if (!input) fail(*f, "'fill' is for inputs; " + where + " is " + evaluator::to_string(td.role));
      td.fill = read_fill(*f, where, all_float);
    } else if (input && !all_float) {
      fail(t, where + " is an integer tensor: give it a 'fill' (int_range, constant or offsets); the gate's distributions are for floats");
    }
    if (const toml::node* dr = t.get("degenerate_rows")) {
      if (!input || td.fill.kind != FillKind::Gate || !all_float)
        fail(*dr, "'degenerate_rows' is for float inputs the gate draws; " + where + " is not one");
      const auto* a = dr->as_array();
      if (!a) fail(*dr, "'degenerate_rows' of " + where + " must be an array of kinds (zero, constant, tiny, denormal, "
                        "largest_finite) or { kind = ..., when = ... } tables");
      for (const toml::node& e : *a) {
        const toml::node* kn = &e;
        std::string when;
        if (const auto* et = e.as_table()) {
          check_keys(*et, {"kind", "when"}, "a degenerate row of " + where);
          kn = &required(*et, "kind", "a degenerate row of " + where);
          if (const toml::node* w = et->get("when")) when = expression_bool(*w, "'when' of a degenerate row of " + where);
        }
        const std::string name = string_of(*kn, "a degenerate row kind of " + where);
        const auto kind = evaluator::degenerate_row_from(name);
        if (!kind) fail(*kn, "unknown degenerate row kind \"" + name + "\" (zero, constant, tiny, denormal, largest_finite)");
        td.degenerate_rows.emplace_back(*kind, when);
      }
    }
    const bool output = td.role == Role::Out || td.role == Role::InOut;
    if (const toml::node* tol = t.get("tolerance")) {
      if (!output) fail(*tol, "'tolerance' is for outputs; " + where + " is " + evaluator::to_string(td.role));
      const auto read_one = [&](const toml::node& n) {
        const toml::table& tt = table_of(n, "a tolerance of " + where);
        check_keys(tt, {"when", "rel_l2", "max_abs"}, "a tolerance of " + where);
        ToleranceDecl x;
        if (const toml::node* w = tt.get("when")) x.when = expression_bool(*w, "'when' of a tolerance of " + where);
        x.tol.rel_l2 = non_negative(required(tt, "rel_l2", "a tolerance of " + where), "rel_l2");
        x.tol.max_abs = non_negative(required(tt, "max_abs", "a tolerance of " + where), "max_abs");
        td.tolerances.push_back(x);
      };
      if (const auto* a = tol->as_array()) {
        for (const toml::node& e : *a) read_one(e);
      } else {
        read_one(*tol);
      }
      if (td.tolerances.empty() || !td.tolerances.back().when.empty())
        fail(*tol, "the last tolerance of " + where + " must have no 'when' (it is the default)");
    }
    return td;
  }

  double non_negative(const toml::node& n, const std::string& what) const {
    const double v = number_of(n, what);
    if (v < 0) fail(n, what + " must not be negative");
    return v;
  }

  std::string expression_bool(const toml::node& n, const std::string& what) const {
    const std::string e = string_of(n, what + " (a condition)");
    check(n, e, what, shape_types_, ExprKind::Bool);
    return e;
  }

  FillDecl read_fill(const toml::node& n, const std::string& where, bool is_float) const {
    FillDecl f;
    const std::string what = "'fill' of " + where;
    if (const auto* s = n.as_string()) {
      if (s->get() != "gate") fail(n, what + " as a string must be \"gate\"; other fills are tables, e.g. { kind = \"normal\", mean = 1, std = 0.5 }");
      if (!is_float) fail(n, what + ": the gate's distributions are for float tensors");
      return f;
    }
    const toml::table& t = table_of(n, what);
    const toml::node& kn = required(t, "kind", what);
    const std::string kind = string_of(kn, "'kind' of " + what);
    auto num = [&](const char* key) { return number_of(required(t, key, what), std::string("'") + key + "' of " + what); };
    if (kind == "gate") {
      check_keys(t, {"kind"}, what);
      if (!is_float) fail(kn, what + ": the gate's distributions are for float tensors");
    } else if (kind == "normal") {
      check_keys(t, {"kind", "mean", "std"}, what);
      f = {FillKind::Normal, num("mean"), num("std"), {}};
    } else if (kind == "uniform") {
      check_keys(t, {"kind", "low", "high"}, what);
      f = {FillKind::Uniform, num("low"), num("high"), {}};
      if (!(f.a < f.b)) fail(t, what + ": low must be below high");
    } else if (kind == "constant") {
      check_keys(t, {"kind", "value"}, what);
      f = {FillKind::Constant, num("value"), 0, {}};
    } else if (kind == "int_range") {
      check_keys(t, {"kind", "low", "high"}, what);
      f = {FillKind::IntRange, static_cast<double>(int_of(required(t, "low", what), "'low'")),
           static_cast<double>(int_of(required(t, "high", what), "'high'")), {}};
      if (f.a > f.b) fail(t, what + ": low must not be above high");
    } else if (kind == "offsets") {
      check_keys(t, {"kind", "total"}, what);
      if (is_float) fail(kn, what + ": offsets are integers; give the tensor an integer dtype");
      f.kind = FillKind::Offsets;
      f.total = expression(required(t, "total", what), "'total' of " + what, shape_types_, ExprKind::Int);
    } else {
      fail(kn, "'kind' of " + what + " must be gate, normal, uniform, constant, int_range or offsets; got \"" + kind + "\"");
    }
    return f;
  }

  LaunchDecl read_launch(const toml::table& t, const std::string& where0, const ExprTypes& types, bool reference) {
    check_keys(t, {"entry", "grid", "block", "cluster", "shared_bytes", "programmatic", "when", "args"}, where0);
    LaunchDecl l;
    l.entry = identifier_of(required(t, "entry", where0), "'entry' of " + where0 + " (the kernel's extern \"C\" name)");
    const std::string where = "launch '" + l.entry + "'";
    l.grid = expressions(required(t, "grid", where), "'grid' of " + where, types, 1, 3);
    l.block = expressions(required(t, "block", where), "'block' of " + where, types, 1, 3);
    if (const toml::node* c = t.get("cluster")) l.cluster = expressions(*c, "'cluster' of " + where, types, 1, 3);
    if (const toml::node* s = t.get("shared_bytes")) l.shared_bytes = expression(*s, "'shared_bytes' of " + where, types, ExprKind::Int);
    if (const toml::node* p = t.get("programmatic")) l.programmatic = bool_of(*p, "'programmatic' of " + where);
    if (const toml::node* w = t.get("when")) {
      l.when = string_of(*w, "'when' of " + where);
      check(*w, l.when, "'when' of " + where, types, ExprKind::Bool);
    }
    for (const toml::node& a : array_of(required(t, "args", where), "'args' of " + where)) l.args.push_back(read_arg(a, where, types, reference));
    return l;
  }

  ArgDecl read_arg(const toml::node& n, const std::string& where, const ExprTypes& types, bool reference) const {
    ArgDecl a;
    if (const auto* tt = n.as_table()) {
      const std::string what = "a tensor map argument of " + where;
      check_keys(*tt, {"tensor_map", "dims", "strides_bytes", "box", "swizzle", "l2_promotion", "oob_nan"}, what);
      a.kind = ArgKind::TensorMap;
      a.map.tensor = string_of(required(*tt, "tensor_map", what), "'tensor_map'");
      if (!d_.tensor(a.map.tensor)) fail(*tt->get("tensor_map"), "'tensor_map' names no declared tensor: '" + a.map.tensor + "'");
      a.map.dims = expressions(required(*tt, "dims", what), "'dims' of " + what, types, 1, 5);
      a.map.box = expressions(required(*tt, "box", what), "'box' of " + what, types, 1, 5);
      if (a.map.box.size() != a.map.dims.size()) fail(*tt->get("box"), "'box' needs one entry per dimension");
      if (const toml::node* s = tt->get("strides_bytes")) a.map.strides_bytes = expressions(*s, "'strides_bytes' of " + what, types, 1, 4);
      if (a.map.strides_bytes.size() + 1 != a.map.dims.size() && a.map.dims.size() > 1)
        fail(*tt, "'strides_bytes' needs one entry per dimension after the first");
      if (const toml::node* s = tt->get("swizzle")) a.map.swizzle_bytes = static_cast<int>(int_of(*s, "'swizzle'"));
      if (const toml::node* s = tt->get("l2_promotion")) a.map.l2_promotion_bytes = static_cast<int>(int_of(*s, "'l2_promotion'"));
      if (const toml::node* s = tt->get("oob_nan")) a.map.oob_nan = bool_of(*s, "'oob_nan'");
      return a;
    }
    const std::string s = string_of(n, "an argument of " + where + " (a tensor name, \"i64: EXPR\", or a tensor map table)");
    const auto colon = s.find(':');
    const std::string head = colon == std::string::npos ? s : s.substr(0, colon);
    const std::map<std::string, ArgKind> scalar = {{"i32", ArgKind::I32}, {"i64", ArgKind::I64}, {"f32", ArgKind::F32}, {"f64", ArgKind::F64}};
    if (auto it = scalar.find(head); it != scalar.end() && colon != std::string::npos) {
      a.kind = it->second;
      a.text = s.substr(colon + 1);
      a.text.erase(0, a.text.find_first_not_of(' '));
      const bool real = a.kind == ArgKind::F32 || a.kind == ArgKind::F64;
      const OptionDecl* o = d_.option(a.text);
      if (real && o && o->type == OptionType::Float) return a;
      if (o && o->type == OptionType::Float) fail(n, "float option '" + a.text + "' is passed as f32: or f64:, not " + head + ":");
      check(n, a.text, "argument '" + s + "' of " + where, types, ExprKind::Int);
      return a;
    }
    a.kind = ArgKind::Tensor;
    a.text = s;
    if (reference && s.rfind("ref:", 0) == 0) {
      const TensorDecl* t = d_.tensor(s.substr(4));
      if (!t || (t->role != Role::Out && t->role != Role::InOut))
        fail(n, "'" + s + "' names no output of the op (a reference writes \"ref:OUTPUT\", in fp64)");
      return a;
    }
    const bool declared = d_.tensor(s) || (reference && std::any_of(d_.reference_scratch.begin(), d_.reference_scratch.end(),
                                                                     [&](const TensorDecl& t) { return t.name == s; }));
    if (!declared)
      fail(n, "argument '" + s + "' of " + where + " is not a declared tensor" +
                  (reference ? std::string(", a reference output (\"ref:NAME\") or a [[reference.scratch]]") : std::string()) +
                  "; scalars are written \"i32: EXPR\", \"i64: EXPR\", \"f32: EXPR\" or \"f64: EXPR\"");
    if (reference) {
      const TensorDecl* t = d_.tensor(s);
      if (t && t->role != Role::In) fail(n, "the reference reads the op's inputs only; '" + s + "' is " + evaluator::to_string(t->role) + " (write \"ref:" + s + "\")");
    }
    return a;
  }

  void read_reference(const toml::table& t) {
    check_keys(t, {"source", "launch", "scratch"}, "[reference]");
    const toml::node& sn = required(t, "source", "[reference]");
    const std::string rel = nonempty_string_of(sn, "'source' of [reference]");
    d_.reference_path = (std::filesystem::path(path_).parent_path() / rel).lexically_normal().string();
    std::string why;
    if (!evaluator::read_text_file(d_.reference_path, &d_.reference_source, &why))
      fail(sn, "reference source '" + rel + "' cannot be read (" + d_.reference_path + "): " + why);
    if (const toml::node* s = t.get("scratch"))
      for (const toml::node& e : tables(*s, "reference.scratch")) d_.reference_scratch.push_back(read_tensor(*e.as_table(), true));
    for (const toml::node& l : tables(required(t, "launch", "[reference] (the reference needs a [[reference.launch]])"), "reference.launch"))
      d_.reference_launches.push_back(read_launch(*l.as_table(), "[[reference.launch]]", shape_types_, true));
    std::set<std::string> written;
    for (const auto& l : d_.reference_launches)
      for (const auto& a : l.args)
        if (a.kind == ArgKind::Tensor && a.text.rfind("ref:", 0) == 0) written.insert(a.text.substr(4));
    for (const auto& td : d_.tensors)
      if ((td.role == Role::Out || td.role == Role::InOut) && !written.count(td.name))
        fail(t, "no [[reference.launch]] is passed \"ref:" + td.name + "\": the reference must compute every output");
  }

  OpDeclaration d_;
  const toml::table* op_table_ = nullptr;
  std::map<std::string, std::string> names_;  // every declared name -> where
  ExprTypes shape_types_, launch_types_;
};

}  // namespace

OpDeclarationResult parse_op_declaration(const std::string& text, const std::string& path) {
  OpDeclarationResult r;
  try {
    const toml::table root = toml::parse(std::string_view(text), std::string_view(path));
    r.decl = Reader(path).read(root);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    r.error = evaluator::SpecError{path, at.line, at.column, "invalid TOML: " + std::string(e.description())};
  } catch (const TomlFailure& f) {
    r.error = f.error;
  }
  return r;
}

OpDeclarationResult load_op_declaration(const std::string& path) {
  std::string text, why;
  if (!evaluator::read_text_file(path, &text, &why))
    return OpDeclarationResult{std::nullopt, evaluator::SpecError{path, 0, 0, "cannot read op file: " + why}};
  return parse_op_declaration(text, path);
}

}  // namespace ptxevo::declared_ops
