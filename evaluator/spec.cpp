// Spec reading: toml++ parses, a Reader walks the tree and validates every value as it converts
// it. A problem throws an internal Failure carrying the SpecError (the node's position and what
// was expected); load_spec/parse_spec turn it into a SpecResult, so callers never see a throw.
#include "evaluator/spec.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <variant>

#include "evaluator/knob_constraints.hpp"
#include "evaluator/template_source.hpp"
#include "evaluator/toml_reader.hpp"

namespace ptxevo::evaluator {

Knobs default_knobs(const SeedTemplate& seed) {
  Knobs k;
  for (const auto& knob : seed.knobs) k[knob.name] = knob.default_value;
  return k;
}

namespace {

constexpr std::array<std::string_view, 5> kArchs = {"sm_80", "sm_90", "sm_90a", "sm_100", "sm_100a"};
constexpr std::string_view kMetric = "geomean_speedup";

// `expr` with each old knob name among its identifiers replaced by the current one; string
// literals (which have no escapes) and numbers are left as they are.
std::string with_current_knob_names(const std::string& expr, const KnobAliases& aliases) {
  const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  for (std::size_t i = 0; i < expr.size();) {
    std::size_t j = i + 1;
    if (expr[i] == '"') {
      j = expr.find('"', i + 1);
      j = j == std::string::npos ? expr.size() : j + 1;
    } else if (word(expr[i])) {
      while (j < expr.size() && word(expr[j])) ++j;
      const auto it = aliases.find(expr.substr(i, j - i));
      if (it != aliases.end() && !std::isdigit(static_cast<unsigned char>(expr[i]))) {
        out += it->second;
        i = j;
        continue;
      }
    }
    out.append(expr, i, j - i);
    i = j;
  }
  return out;
}

// Whether `name` occurs in `text` as a whole identifier.
bool mentions_identifier(const std::string& text, const std::string& name) {
  const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1))
    if ((at == 0 || !word(text[at - 1])) && (at + name.size() == text.size() || !word(text[at + name.size()])))
      return true;
  return false;
}

std::string knob_value_to_string(const KnobValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  return "\"" + std::get<std::string>(v) + "\"";
}

class Reader : TomlReader {
 public:
  Reader(std::string path, const OpRegistry& registry) : TomlReader(std::move(path)), registry_(registry) {}

  Spec read(const toml::table& root) {
    check_keys(root, {"op", "op_file", "arch", "options", "shapes", "tolerance", "objective", "budget", "seed"},
               "the top-level table");
    Spec spec;
    spec.path = path_;
    const toml::node* file_node = root.get("op_file");
    const toml::node* name_node = root.get("op");
    if (!file_node && !name_node) fail(root, "missing required key 'op' (a built-in op) or 'op_file' (an op declared in a file)");
    const toml::node& op_node = file_node ? *file_node : *name_node;
    if (file_node) {
      const std::string rel = nonempty_string_of(*file_node, "'op_file'");
      spec.op_file = (std::filesystem::path(path_).parent_path() / rel).lexically_normal().string();
      SpecError why;
      op_ = registry_.load_file(spec.op_file, &why);
      if (!op_) {
        if (why.line == 0) fail(*file_node, "op file '" + rel + "': " + why.message);
        throw TomlFailure{why};  // the error is in the op file: name its line there
      }
      spec.op = op_->name();
      if (name_node && string_of(*name_node, "'op'") != spec.op)
        fail(*name_node, "'op' is '" + string_of(*name_node, "'op'") + "' but " + rel + " declares op '" + spec.op +
                             "'; leave 'op' out or make them agree");
    } else {
      spec.op = string_of(*name_node, "'op'");
      op_ = registry_.find(spec.op);
      if (!op_) fail(*name_node, "unknown op '" + spec.op + "'; known ops: " + join(registry_.names()) +
                                     " (an op of your own is declared in a file named by 'op_file')");
    }
    if (const toml::node* n = root.get("arch")) spec.arch = read_arch(*n);
    read_options(root, op_node, spec);
    read_shapes(required(root, "shapes", "the top-level table"), spec);
    if (const toml::node* n = root.get("tolerance")) read_tolerances(*n, spec);
    read_seeds(required(root, "seed", "the top-level table"), spec);
    read_objective(root.get("objective"), spec);
    if (const toml::node* n = root.get("budget")) read_budget(*n, spec);
    return spec;
  }

 private:
  // Runs op code that may throw; its message becomes an error at `at`.
  template <typename F>
  auto call_op(const toml::node& at, const std::string& context, F&& f) const {
    try {
      return f();
    } catch (const std::exception& e) {
      fail(at, context + ": " + e.what());
    }
  }

  // ---- Sections ----------------------------------------------------------------------------

  std::string read_arch(const toml::node& n) const {
    const std::string arch = string_of(n, "'arch'");
    // Plain sm_90/sm_100 lack the arch-specific instructions (wgmma, tcgen05) kernels want.
    if (arch == "sm_90") return "sm_90a";
    if (arch == "sm_100") return "sm_100a";
    if (std::find(kArchs.begin(), kArchs.end(), arch) == kArchs.end())
      fail(n, "unknown arch '" + arch + "'; expected one of: " + join({kArchs.begin(), kArchs.end()}));
    return arch;
  }

  // Options are op-defined, so any key is allowed here; the op's validate() judges them.
  void read_options(const toml::table& root, const toml::node& op_node, Spec& spec) const {
    const toml::node* n = root.get("options");
    if (n) {
      for (const auto& [k, v] : in_file_order(table_of(*n, "[options]"))) {
        const std::string what = "option '" + std::string(k->str()) + "'";
        if (const auto* s = v->as_string()) {
          spec.config[std::string(k->str())] = s->get();
        } else if (const auto* i = v->as_integer()) {
          spec.config[std::string(k->str())] = std::to_string(i->get());
        } else if (const auto* f = v->as_floating_point()) {
          spec.config[std::string(k->str())] = number_to_string(f->get());
        } else if (const auto* b = v->as_boolean()) {
          spec.config[std::string(k->str())] = b->get() ? "true" : "false";
        } else {
          fail(*v, what + " must be a string, number or boolean, got " + type_name(*v));
        }
      }
    }
    const toml::node& at = n ? *n : op_node;
    const std::string problem =
        call_op(at, "op '" + spec.op + "' rejects the options", [&] { return op_->validate(spec.config); });
    if (!problem.empty()) fail(at, "op '" + spec.op + "' rejects the options: " + problem);
  }

  void read_shapes(const toml::node& n, Spec& spec) const {
    const toml::table& t = table_of(n, "[shapes]");
    check_keys(t, {"benchmark", "correctness", "heldout"}, "[shapes]");
    std::vector<std::string> dims;  // the first benchmark shape's dimension names
    spec.benchmark_shapes = read_shape_list(required(t, "benchmark", "[shapes]"), "benchmark", true, dims, spec);
    spec.correctness_shapes = read_shape_list(required(t, "correctness", "[shapes]"), "correctness", true, dims, spec);
    if (const toml::node* h = t.get("heldout")) spec.heldout_shapes = read_shape_list(*h, "heldout", false, dims, spec);
  }

  std::vector<Shape> read_shape_list(const toml::node& n, const std::string& list, bool need_one,
                                     std::vector<std::string>& dims, const Spec& spec) const {
    const std::string what = "shapes." + list;
    const toml::array& a = array_of(n, what);
    if (need_one && a.empty()) fail(n, what + " must list at least one shape");
    std::vector<Shape> shapes;
    std::vector<const toml::node*> nodes;
    for (const toml::node& e : a) {
      Shape s = read_shape(e, what, dims);
      for (std::size_t i = 0; i < shapes.size(); ++i)
        if (shapes[i] == s)
          fail(e, "duplicate shape " + shape_to_string(s) + " in " + what + " (also at " + position(*nodes[i]) + ")");
      // Ask the op too: it knows which dimensions it needs and which sizes it supports.
      call_op(e, "op '" + spec.op + "' rejects shape " + shape_to_string(s),
              [&] { return op_->tensors(s, spec.config); });
      shapes.push_back(std::move(s));
      nodes.push_back(&e);
    }
    return shapes;
  }

  Shape read_shape(const toml::node& n, const std::string& what, std::vector<std::string>& dims) const {
    const toml::table& t = table_of(n, "a shape in " + what);
    if (t.empty()) fail(n, "a shape in " + what + " must have at least one dimension, e.g. { M = 1024 }");
    Shape s;
    for (const auto& [k, v] : in_file_order(t)) {
      const std::string dim(k->str());
      if (!dims.empty() && std::find(dims.begin(), dims.end(), dim) == dims.end())
        fail(k->source().begin, "dimension '" + dim + "' is not one of the first benchmark shape's (" + join(dims) +
                                    "); every shape must use the same dimensions");
      s[dim] = positive_int_of(*v, "dimension '" + dim + "'");
    }
    if (dims.empty()) {
      for (const auto& [k, v] : in_file_order(t)) dims.emplace_back(k->str());
    } else {
      for (const auto& d : dims)
        if (!s.count(d))
          fail(n,
               "shape is missing dimension '" + d + "'; every shape must use the same dimensions (" + join(dims) + ")");
    }
    return s;
  }

  void read_tolerances(const toml::node& n, Spec& spec) const {
    // The op's outputs for the first benchmark shape: a tolerance must name one of them.
    const auto descs = op_->tensors(spec.benchmark_shapes.front(), spec.config);
    std::vector<std::string> outputs;
    for (const auto& d : descs)
      if (d.role == Role::Out || d.role == Role::InOut) outputs.push_back(d.name);
    for (const auto& [k, v] : in_file_order(table_of(n, "[tolerance]"))) {
      const std::string out(k->str());
      if (std::find(outputs.begin(), outputs.end(), out) == outputs.end())
        fail(k->source().begin, "op '" + spec.op + "' has no output '" + out +
                                    "'; outputs: " + (outputs.empty() ? std::string("(none)") : join(outputs)));
      const std::string where = "[tolerance." + out + "]";
      const toml::table& t = table_of(*v, where);
      check_keys(t, {"rel_l2", "max_abs"}, where);
      Tolerance tol = call_op(*v, "op '" + spec.op + "' has no tolerance for '" + out + "'",
                              [&] { return op_->tolerance(out, spec.config); });
      if (const toml::node* x = t.get("rel_l2")) tol.rel_l2 = positive_number_of(*x, "rel_l2");
      if (const toml::node* x = t.get("max_abs")) tol.max_abs = positive_number_of(*x, "max_abs");
      spec.tolerances[out] = tol;
    }
  }

  void read_seeds(const toml::node& n, Spec& spec) const {
    const auto* a = n.as_array();
    if (a && a->empty()) fail(n, "at least one [[seed]] is required");
    if (!a || !a->is_array_of_tables())
      fail(n, "'seed' must be an array of tables (write each as [[seed]]), got " + std::string(type_name(n)));
    // Knob names become -DNAME=VALUE next to the op's own defines, so they must not collide.
    const auto defines = call_op(n, "op '" + spec.op + "' cannot list its template defines",
                                 [&] { return op_->template_defines(spec.config); });
    std::map<std::string, const toml::node*> names;
    for (const toml::node& e : *a) {
      SeedTemplate seed = read_seed(*e.as_table(), defines);
      const toml::node& name_node = *e.as_table()->get("name");
      const std::string missing = op_->check_seed_knobs(default_knobs(seed));
      if (!missing.empty()) fail(e, "seed '" + seed.name + "': " + missing);
      if (auto it = names.find(seed.name); it != names.end())
        fail(name_node, "duplicate seed name '" + seed.name + "' (also at " + position(*it->second) + ")");
      names[seed.name] = &name_node;
      spec.seeds.push_back(std::move(seed));
    }
  }

  SeedTemplate read_seed(const toml::table& t, const std::map<std::string, std::string>& defines) const {
    check_keys(t, {"name", "source", "entry", "constraints", "knobs"}, "[[seed]]");
    SeedTemplate seed;
    seed.name = nonempty_string_of(required(t, "name", "[[seed]]"), "seed 'name'");
    const std::string where = "seed '" + seed.name + "'";
    const toml::node& source = required(t, "source", where);
    seed.source_path = resolve_source(source, nonempty_string_of(source, "'source' of " + where));
    const toml::node& entry = required(t, "entry", where);
    seed.entry = string_of(entry, "'entry' of " + where);
    if (!is_identifier(seed.entry))
      fail(entry, "'entry' of " + where + " must be a C identifier (the kernel's extern \"C\" name), got '" +
                      seed.entry + "'");
    if (const toml::node* k = t.get("knobs")) {
      for (const auto& [key, v] : in_file_order(table_of(*k, "'knobs' of " + where)))
        seed.knobs.push_back(read_knob(*key, *v, defines));
      rename_old_knobs(seed.knobs);
      refuse_template_before_renames(seed, source);
    }
    if (const toml::node* c = t.get("constraints")) {
      const Knobs defaults = default_knobs(seed);
      for (const toml::node& e : array_of(*c, "'constraints' of " + where))
        seed.constraints.push_back(read_constraint(e, defaults, where));
    }
    return seed;
  }

  // A knob given under its old name (a spec written before the op renamed it) takes the current
  // name; one given under both is an error at the old one.
  void rename_old_knobs(std::vector<KnobSpace>& knobs) const {
    Knobs given;
    for (const auto& knob : knobs) given[knob.name] = knob.default_value;
    try {
      (void)canonical_knobs(*op_, std::move(given));
    } catch (const std::invalid_argument& e) {
      const auto old = std::find_if(knobs.begin(), knobs.end(),
                                    [&](const KnobSpace& k) { return canonical_knob_name(*op_, k.name) != k.name; });
      toml::source_position at{};
      if (old != knobs.end()) at = {old->line, old->col};
      fail(at, e.what());
    }
    for (auto& knob : knobs) knob.name = canonical_knob_name(*op_, knob.name);
  }

  // A template written before the op renamed a knob (e.g. one a campaign recorded) reads the old
  // -D name: built with the current one it would silently take its own default.
  void refuse_template_before_renames(const SeedTemplate& seed, const toml::node& at) const {
    std::string why;
    const auto t = read_template(seed.source_path, &why);
    if (!t) return;  // resolve_source has read it already
    for (const auto& [old_name, name] : op_->knob_aliases()) {
      const bool declared = std::any_of(seed.knobs.begin(), seed.knobs.end(),
                                        [&](const KnobSpace& k) { return k.name == name; });
      if (declared && mentions_identifier(t->text, old_name) && !mentions_identifier(t->text, name))
        fail(at, "seed '" + seed.name + "': its template reads knob " + old_name + ", which op '" + op_->name() +
                     "' renamed " + name + "; build from a template that reads " + name);
    }
  }

  // Relative to the spec file's directory, so a spec and its templates move together.
  std::string resolve_source(const toml::node& n, const std::string& source) const {
    const std::filesystem::path p = (std::filesystem::path(path_).parent_path() / source).lexically_normal();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec))
      fail(n, "seed source '" + source + "' not found (looked for " + p.string() + ")");
    // A template split over parts: an include cycle or an unreadable part is an error of the spec.
    std::string why;
    if (!read_template(p.string(), &why)) fail(n, "seed source '" + source + "': " + why);
    return p.string();
  }

  KnobSpace read_knob(const toml::key& key, const toml::node& n,
                      const std::map<std::string, std::string>& defines) const {
    KnobSpace knob;
    knob.name = std::string(key.str());
    knob.line = static_cast<std::uint32_t>(key.source().begin.line);
    knob.col = static_cast<std::uint32_t>(key.source().begin.column);
    if (!is_identifier(knob.name))
      fail(key.source().begin,
           "knob name '" + knob.name + "' must be a C identifier (it becomes -D" + knob.name + "=...)");
    if (defines.count(knob.name))
      fail(key.source().begin, "knob '" + knob.name + "' collides with a define the op sets for its templates");
    const std::string what = "knob '" + knob.name + "'";
    const toml::table& t = table_of(n, what + " (e.g. { values = [1, 2], default = 1 })");
    check_keys(t, {"values", "default"}, what);
    const toml::node& values_node = required(t, "values", what);
    const toml::array& values = array_of(values_node, "'values' of " + what);
    if (values.empty()) fail(values_node, "'values' of " + what + " must not be empty");
    std::vector<const toml::node*> nodes;
    for (const toml::node& v : values) {
      KnobValue kv = knob_value(v, "a value of " + what, what, values.front());
      for (std::size_t i = 0; i < knob.values.size(); ++i)
        if (knob.values[i] == kv)
          fail(v, "duplicate value " + knob_value_to_string(kv) + " in " + what + " (also at " + position(*nodes[i]) +
                      ")");
      knob.values.push_back(std::move(kv));
      nodes.push_back(&v);
    }
    const toml::node& def = required(t, "default", what);
    knob.default_value = knob_value(def, "the default of " + what, what, values.front());
    if (std::find(knob.values.begin(), knob.values.end(), knob.default_value) == knob.values.end())
      fail(def, "default " + knob_value_to_string(knob.default_value) + " of " + what + " is not one of its values");
    return knob;
  }

  // Integer or string, of the same kind as `first` (a knob's values share one kind).
  KnobValue knob_value(const toml::node& v, const std::string& what, const std::string& knob,
                       const toml::node& first) const {
    if (!first.is_integer() && !first.is_string())
      fail(first, "the values of " + knob + " must be integers or strings, got " + type_name(first));
    if (first.is_integer()) {
      if (const auto* i = v.as_integer()) return i->get();
      fail(v, what + " must be an integer like its first value, got " + type_name(v));
    }
    const auto* s = v.as_string();
    if (!s) fail(v, what + " must be a string like its first value, got " + type_name(v));
    const std::string& str = s->get();
    // String values are pasted into -DNAME=VALUE, so only identifier characters are safe.
    const bool ok = !str.empty() && std::all_of(str.begin(), str.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
    if (!ok) fail(v, what + " must be non-empty and use only letters, digits and '_', got \"" + str + "\"");
    return str;
  }

  std::string read_constraint(const toml::node& n, const Knobs& defaults, const std::string& where) const {
    const std::string given = string_of(n, "a constraint of " + where);
    // Old knob names are kept renamed; the text as written is checked with them bound to the
    // renamed knobs' values, so that an error's column points into it.
    const KnobAliases aliases = op_->knob_aliases();
    const std::string expr = with_current_knob_names(given, aliases);
    Knobs names = defaults;
    if (expr != given)
      for (const auto& [old_name, name] : aliases)
        if (const auto it = defaults.find(name); it != defaults.end()) names[old_name] = it->second;
    if (auto err = check_constraint(given, names)) {
      // Point into the string when its source is the text itself plus two quotes (no escapes,
      // one line); otherwise at the string, naming the column within it.
      const toml::source_region& src = n.source();
      const bool exact = src.begin.line == src.end.line && src.end.column - src.begin.column == given.size() + 2;
      if (exact) {
        toml::source_position at = src.begin;
        at.column = static_cast<toml::source_index>(at.column + err->column);
        fail(at, "invalid constraint: " + err->message);
      }
      fail(n, "invalid constraint (column " + std::to_string(err->column) + " of the string): " + err->message);
    }
    bool holds = false;
    try {
      holds = constraint_holds(expr, defaults);
    } catch (const std::invalid_argument& e) {
      fail(n, std::string("constraint cannot be evaluated for the default knobs: ") + e.what());
    }
    if (!holds) {
      std::string knobs;
      for (const auto& [k, v] : defaults) knobs += (knobs.empty() ? "" : ", ") + k + "=" + knob_value_to_string(v);
      fail(n, "the default knobs of " + where + " violate constraint '" + given + "' (" + knobs + ")");
    }
    return expr;
  }

  void read_objective(const toml::node* n, Spec& spec) const {
    spec.baseline = spec.seeds.front().name;  // no [objective]: the first seed is the baseline
    if (!n) return;
    const toml::table& t = table_of(*n, "[objective]");
    check_keys(t, {"baseline", "metric"}, "[objective]");
    if (const toml::node* b = t.get("baseline")) {
      spec.baseline = string_of(*b, "'baseline'");
      const bool found = std::any_of(spec.seeds.begin(), spec.seeds.end(),
                                     [&](const SeedTemplate& s) { return s.name == spec.baseline; });
      if (!found) {
        std::vector<std::string> names;
        for (const auto& s : spec.seeds) names.push_back(s.name);
        fail(*b, "baseline '" + spec.baseline + "' names no seed; seeds: " + join(names));
      }
    }
    if (const toml::node* m = t.get("metric")) {
      spec.metric = string_of(*m, "'metric'");
      if (spec.metric != kMetric)
        fail(*m, "unknown metric '" + spec.metric + "'; expected \"" + std::string(kMetric) + "\"");
    }
  }

  void read_budget(const toml::node& n, Spec& spec) const {
    const toml::table& t = table_of(n, "[budget]");
    check_keys(t, {"evaluations", "minutes"}, "[budget]");
    if (const toml::node* e = t.get("evaluations")) spec.budget_evaluations = positive_int_of(*e, "'evaluations'");
    if (const toml::node* m = t.get("minutes")) spec.budget_minutes = positive_number_of(*m, "'minutes'");
  }

  const OpRegistry& registry_;
  const Op* op_ = nullptr;
};

}  // namespace

SpecResult parse_spec(const std::string& text, const std::string& path, const OpRegistry& registry) {
  SpecResult r;
  try {
    const toml::table root = toml::parse(std::string_view(text), std::string_view(path));
    r.spec = Reader(path, registry).read(root);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    r.error = SpecError{path, at.line, at.column, "invalid TOML: " + std::string(e.description())};
  } catch (const TomlFailure& f) {
    r.error = f.error;
  }
  return r;
}

SpecResult load_spec(const std::string& path, const OpRegistry& registry) {
  std::string text, why;
  if (!read_text_file(path, &text, &why)) return SpecResult{std::nullopt, SpecError{path, 0, 0, "cannot read spec file: " + why}};
  return parse_spec(text, path, registry);
}

}  // namespace ptxevo::evaluator
