#include "evaluator/spec.hpp"

#include "evaluator/evaluation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

namespace ptxevo::evaluator {
namespace {

namespace fs = std::filesystem;

// A stand-in op: options x_dtype (bf16|f32, required when `needs_dtype`), eps, fused, groups;
// dimensions M and N (N at most 65536); one output "out"; one template define X_T; knobs renamed
// as `aliases` says (old name -> current name).
class SpecTestOp : public Op {
 public:
  SpecTestOp(std::string name, bool needs_dtype, KnobAliases aliases = {})
      : name_(std::move(name)), needs_dtype_(needs_dtype), aliases_(std::move(aliases)) {}
  std::string name() const override { return name_; }
  KnobAliases knob_aliases() const override { return aliases_; }
  std::string validate(const OpConfig& cfg) const override {
    if (needs_dtype_ && !cfg.count("x_dtype")) return "x_dtype is required";
    for (const auto& [k, v] : cfg) {
      if (k != "x_dtype" && k != "eps" && k != "fused" && k != "groups") return "unknown option '" + k + "'";
      if (k == "x_dtype" && v != "bf16" && v != "f32") return "unsupported x_dtype '" + v + "'";
    }
    return "";
  }
  std::vector<TensorDesc> tensors(const Shape& s, const OpConfig&) const override {
    if (!s.count("M") || !s.count("N")) throw std::invalid_argument("needs dimensions M and N");
    if (s.at("N") > 65536) throw std::invalid_argument("N must be at most 65536");
    const std::int64_t m = s.at("M"), n = s.at("N");
    return {{"x", DType::BF16, {m, n}, Role::In, false},
            {"w", DType::BF16, {n}, Role::In, true},
            {"out", DType::BF16, {m, n}, Role::Out, false}};
  }
  std::map<std::string, std::string> template_defines(const OpConfig&) const override { return {{"X_T", "bf16"}}; }
  LaunchPlan launch_plan(const Shape&, const OpConfig&, const Knobs&) const override { return {}; }
  void reference(const Shape&, const OpConfig&, const std::vector<HostTensor>&,
                 std::vector<HostTensor>&) const override {}
  double bytes(const Shape&, const OpConfig&) const override { return 0; }
  double flops(const Shape&, const OpConfig&) const override { return 0; }
  Tolerance tolerance(const std::string& output, const OpConfig&) const override {
    if (output != "out") throw std::invalid_argument("no output " + output);
    return Tolerance{0.25, 0.5};
  }

 private:
  std::string name_;
  bool needs_dtype_;
  KnobAliases aliases_;
};

// Line numbers below are part of the tests: error positions are asserted exactly.
const std::string kSpec = R"(op = "test_norm"
arch = "sm_90a"

[options]
x_dtype = "bf16"
eps = 1e-6
fused = true
groups = 4

[shapes]
benchmark = [ { M = 32768, N = 256 }, { M = 32768, N = 512 } ]
correctness = [ { M = 1, N = 1 } ]
heldout = [ { M = 3, N = 4097 } ]

[tolerance.out]
rel_l2 = 5e-3
max_abs = 1e-2

[objective]
baseline = "seed_a"
metric = "geomean_speedup"

[budget]
evaluations = 2000
minutes = 60.0

[[seed]]
name = "seed_a"
source = "kernel.cu"
entry = "rmsnorm_fwd"
constraints = [ "THREADS % TPR == 0", "TPR <= THREADS" ]
[seed.knobs]
VEC = { values = [2, 4, 8], default = 8 }
THREADS = { values = [64, 128, 256], default = 256 }
TPR = { values = [32, 64], default = 32 }
LOADER = { values = ["plain", "cp_async"], default = "plain" }

[[seed]]
name = "seed_b"
source = "sub/other.cu"
entry = "other"
)";

const std::string kMinimal = R"(op = "test_norm"
[shapes]
benchmark = [ { M = 8, N = 8 } ]
correctness = [ { M = 1, N = 1 } ]
[[seed]]
name = "only"
source = "kernel.cu"
entry = "k"
)";

// `text` with the single occurrence of `from` replaced by `to`.
std::string edit(const std::string& text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from << " is ambiguous";
  std::string out = text;
  return at == std::string::npos ? out : out.replace(at, from.size(), to);
}

class SpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ptxevo-spec-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "sub");
    std::ofstream(dir_ / "kernel.cu") << "// seed\n";
    std::ofstream(dir_ / "sub" / "other.cu") << "// seed\n";
    registry_.add(std::make_unique<SpecTestOp>("test_norm", false,
                                               KnobAliases{{"NTHREADS", "THREADS"}, {"LOAD", "LOADER"}}));
    registry_.add(std::make_unique<SpecTestOp>("other_op", true));
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string spec_path() const { return (dir_ / "spec.toml").string(); }

  SpecResult load(const std::string& text) {
    std::ofstream(spec_path(), std::ios::binary | std::ios::trunc) << text;
    return load_spec(spec_path(), registry_);
  }

  // Loads `text` and expects an error at line:col whose message contains `needle`.
  void expect_error(const std::string& text, std::uint32_t line, std::uint32_t col, const std::string& needle) {
    const SpecResult r = load(text);
    ASSERT_FALSE(r.spec.has_value());
    ASSERT_TRUE(r.error.has_value());
    EXPECT_EQ(r.error->file, spec_path());
    EXPECT_EQ(r.error->line, line) << r.error->format();
    EXPECT_EQ(r.error->col, col) << r.error->format();
    EXPECT_NE(r.error->message.find(needle), std::string::npos) << r.error->format();
  }

  fs::path dir_;
  OpRegistry registry_;
};

TEST_F(SpecTest, FullSpecRoundTripsEveryField) {
  const SpecResult r = load(kSpec);
  ASSERT_FALSE(r.error.has_value()) << r.error->format();
  ASSERT_TRUE(r.spec.has_value());
  const Spec& s = *r.spec;
  EXPECT_EQ(s.path, spec_path());
  EXPECT_EQ(s.op, "test_norm");
  EXPECT_EQ(s.arch, "sm_90a");
  const OpConfig want_cfg = {{"x_dtype", "bf16"}, {"eps", "1e-06"}, {"fused", "true"}, {"groups", "4"}};
  EXPECT_EQ(s.config, want_cfg);
  EXPECT_EQ(s.benchmark_shapes, (std::vector<Shape>{{{"M", 32768}, {"N", 256}}, {{"M", 32768}, {"N", 512}}}));
  EXPECT_EQ(s.correctness_shapes, (std::vector<Shape>{{{"M", 1}, {"N", 1}}}));
  EXPECT_EQ(s.heldout_shapes, (std::vector<Shape>{{{"M", 3}, {"N", 4097}}}));
  ASSERT_EQ(s.tolerances.size(), 1u);
  EXPECT_DOUBLE_EQ(s.tolerances.at("out").rel_l2, 5e-3);
  EXPECT_DOUBLE_EQ(s.tolerances.at("out").max_abs, 1e-2);
  EXPECT_EQ(s.baseline, "seed_a");
  EXPECT_EQ(s.metric, "geomean_speedup");
  EXPECT_EQ(s.budget_evaluations, 2000);
  EXPECT_DOUBLE_EQ(s.budget_minutes, 60.0);

  ASSERT_EQ(s.seeds.size(), 2u);
  const SeedTemplate& a = s.seeds[0];
  EXPECT_EQ(a.name, "seed_a");
  EXPECT_EQ(fs::path(a.source_path), dir_ / "kernel.cu");
  EXPECT_EQ(a.entry, "rmsnorm_fwd");
  EXPECT_EQ(a.constraints, (std::vector<std::string>{"THREADS % TPR == 0", "TPR <= THREADS"}));
  ASSERT_EQ(a.knobs.size(), 4u);  // in file order, not key order
  EXPECT_EQ(a.knobs[0].name, "VEC");
  EXPECT_EQ(a.knobs[0].values, (std::vector<KnobValue>{std::int64_t{2}, std::int64_t{4}, std::int64_t{8}}));
  EXPECT_EQ(a.knobs[0].default_value, KnobValue(std::int64_t{8}));
  EXPECT_EQ(a.knobs[1].name, "THREADS");
  EXPECT_EQ(a.knobs[1].default_value, KnobValue(std::int64_t{256}));
  EXPECT_EQ(a.knobs[2].name, "TPR");
  EXPECT_EQ(a.knobs[3].name, "LOADER");
  EXPECT_EQ(a.knobs[3].values, (std::vector<KnobValue>{std::string("plain"), std::string("cp_async")}));
  EXPECT_EQ(a.knobs[3].default_value, KnobValue(std::string("plain")));
  const Knobs want_defaults = {{"VEC", std::int64_t{8}},
                               {"THREADS", std::int64_t{256}},
                               {"TPR", std::int64_t{32}},
                               {"LOADER", std::string("plain")}};
  EXPECT_EQ(default_knobs(a), want_defaults);

  const SeedTemplate& b = s.seeds[1];
  EXPECT_EQ(b.name, "seed_b");
  EXPECT_EQ(fs::path(b.source_path), dir_ / "sub" / "other.cu");
  EXPECT_EQ(b.entry, "other");
  EXPECT_TRUE(b.knobs.empty());
  EXPECT_TRUE(b.constraints.empty());
}

TEST_F(SpecTest, ParseSpecFromText) {
  const SpecResult r = parse_spec(kSpec, spec_path(), registry_);
  ASSERT_TRUE(r.spec.has_value()) << r.error->format();
  EXPECT_EQ(r.spec->seeds.size(), 2u);
}

TEST_F(SpecTest, MinimalSpecGetsDefaults) {
  const SpecResult r = load(kMinimal);
  ASSERT_TRUE(r.spec.has_value()) << r.error->format();
  EXPECT_EQ(r.spec->arch, "sm_90a");
  EXPECT_TRUE(r.spec->config.empty());
  EXPECT_TRUE(r.spec->heldout_shapes.empty());
  EXPECT_TRUE(r.spec->tolerances.empty());
  EXPECT_EQ(r.spec->baseline, "only");  // no [objective]: the first seed
  EXPECT_EQ(r.spec->metric, "geomean_speedup");
  EXPECT_EQ(r.spec->budget_evaluations, 0);
  EXPECT_EQ(r.spec->budget_minutes, 0.0);
}

TEST_F(SpecTest, ArrayOfTablesShapes) {
  const SpecResult r = load(R"(op = "test_norm"
[[seed]]
name = "only"
source = "kernel.cu"
entry = "k"
[shapes]
correctness = [ { M = 1, N = 1 } ]
[[shapes.benchmark]]
M = 8
N = 8
[[shapes.benchmark]]
M = 16
N = 8
)");
  ASSERT_TRUE(r.spec.has_value()) << r.error->format();
  EXPECT_EQ(r.spec->benchmark_shapes, (std::vector<Shape>{{{"M", 8}, {"N", 8}}, {{"M", 16}, {"N", 8}}}));
}

TEST_F(SpecTest, ArchAliases) {
  const auto arch_of = [&](const std::string& arch) {
    const SpecResult r = load(edit(kSpec, "arch = \"sm_90a\"", "arch = \"" + arch + "\""));
    return r.spec ? r.spec->arch : r.error->format();
  };
  EXPECT_EQ(arch_of("sm_90"), "sm_90a");
  EXPECT_EQ(arch_of("sm_100"), "sm_100a");
  EXPECT_EQ(arch_of("sm_80"), "sm_80");
  EXPECT_EQ(arch_of("sm_100a"), "sm_100a");
  expect_error(edit(kSpec, "arch = \"sm_90a\"", "arch = \"sm_89\""), 2, 8,
               "unknown arch 'sm_89'; expected one of: sm_80, sm_90, sm_90a, sm_100, sm_100a");
}

TEST_F(SpecTest, PartialToleranceTakesTheOpDefault) {
  const SpecResult r = load(edit(kSpec, "max_abs = 1e-2\n", ""));
  ASSERT_TRUE(r.spec.has_value()) << r.error->format();
  EXPECT_DOUBLE_EQ(r.spec->tolerances.at("out").rel_l2, 5e-3);
  EXPECT_DOUBLE_EQ(r.spec->tolerances.at("out").max_abs, 0.5);
}

TEST_F(SpecTest, UnreadableFile) {
  const std::string missing = (dir_ / "missing.toml").string();
  SpecResult r = load_spec(missing, registry_);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->format(), missing + ":0:0: error: cannot read spec file: no such file");
  r = load_spec(dir_.string(), registry_);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->line, 0u);
  EXPECT_EQ(r.error->col, 0u);
  EXPECT_EQ(r.error->message, "cannot read spec file: it is a directory");
}

TEST_F(SpecTest, ErrorFormat) {
  const SpecResult r = load(edit(kSpec, "op = \"test_norm\"", "op = 3"));
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->format(), spec_path() + ":1:6: error: 'op' must be a string, got an integer");
}

TEST_F(SpecTest, InvalidToml) {
  expect_error(edit(kSpec, "eps = 1e-6", "eps = "), 6, 7, "invalid TOML");
  expect_error(edit(kSpec, "groups = 4", "eps = 4"), 8, 7, "cannot redefine existing");  // duplicate key
  expect_error("", 1, 1, "missing required key 'op' (a built-in op) or 'op_file' (an op declared in a file)");
}

TEST_F(SpecTest, UnknownKeys) {
  expect_error(edit(kSpec, "[budget]", "[budgte]"), 23, 2,
               "unknown key 'budgte' in the top-level table; expected one of: op, op_file, arch, options, shapes, "
               "tolerance, objective, budget, seed");
  expect_error(edit(kSpec, "metric =", "metrc ="), 21, 1, "unknown key 'metrc' in [objective]");
  expect_error(edit(kSpec, "heldout =", "held_out ="), 13, 1, "unknown key 'held_out' in [shapes]");
  expect_error(edit(kSpec, "max_abs =", "maxabs ="), 17, 1, "unknown key 'maxabs' in [tolerance.out]");
  expect_error(edit(kSpec, "minutes =", "minute ="), 25, 1, "unknown key 'minute' in [budget]");
  expect_error(edit(kSpec, "entry = \"other\"", "entry = \"other\"\nentyr = \"x\""), 42, 1,
               "unknown key 'entyr' in [[seed]]");
  expect_error(edit(kSpec, "default = 8 }", "defualt = 8 }"), 33, 29,
               "unknown key 'defualt' in knob 'VEC'; expected one of: values, default");
}

TEST_F(SpecTest, WrongTypes) {
  expect_error(edit(kSpec, "op = \"test_norm\"", "op = 3"), 1, 6, "'op' must be a string, got an integer");
  expect_error(edit(kSpec, "evaluations = 2000", "evaluations = \"2000\""), 24, 15,
               "'evaluations' must be a positive integer, got a string");
  expect_error(edit(kSpec, "groups = 4", "groups = [4]"), 8, 10,
               "option 'groups' must be a string, number or boolean, got an array");
  expect_error(edit(kSpec, "minutes = 60.0", "minutes = true"), 25, 11,
               "'minutes' must be a positive number, got a boolean");
  expect_error(edit(kSpec, "heldout = [ { M = 3, N = 4097 } ]", "heldout = { M = 3, N = 4097 }"), 13, 11,
               "shapes.heldout must be an array, got a table");
  expect_error(edit(kSpec, "entry = \"other\"", "entry = 7"), 41, 9, "'entry' of seed 'seed_b' must be a string");
  expect_error(edit(kMinimal, "[[seed]]", "[seed]"), 5, 1,
               "'seed' must be an array of tables (write each as [[seed]])");
  expect_error(edit(kSpec, "TPR = { values = [32, 64], default = 32 }", "TPR = [32, 64]"), 35, 7,
               "knob 'TPR' (e.g. { values = [1, 2], default = 1 }) must be a table, got an array");
}

TEST_F(SpecTest, MissingRequiredKeys) {
  expect_error(edit(kSpec, "op = \"test_norm\"\n", ""), 1, 1, "missing required key 'op' (a built-in op) or 'op_file' (an op declared in a file)");
  expect_error(edit(kSpec, "correctness = [ { M = 1, N = 1 } ]\n", ""), 10, 1,
               "missing required key 'correctness' in [shapes]");
  expect_error(edit(kSpec, "source = \"kernel.cu\"\n", ""), 27, 1, "missing required key 'source' in seed 'seed_a'");
  expect_error(edit(kSpec, "name = \"seed_b\"\n", ""), 38, 1, "missing required key 'name' in [[seed]]");
  expect_error(edit(kSpec, ", default = 32 }", " }"), 35, 7, "missing required key 'default' in knob 'TPR'");
  expect_error(edit(kMinimal, "[[seed]]\nname = \"only\"\nsource = \"kernel.cu\"\nentry = \"k\"\n", ""), 1, 1,
               "missing required key 'seed' in the top-level table");
}

TEST_F(SpecTest, UnknownOpListsKnownOnes) {
  expect_error(edit(kSpec, "op = \"test_norm\"", "op = \"test_nrom\""), 1, 6,
               "unknown op 'test_nrom'; known ops: other_op, test_norm");
}

TEST_F(SpecTest, OpRejectsOptions) {
  expect_error(edit(kSpec, "x_dtype = \"bf16\"", "x_dtype = \"f8\""), 4, 1,
               "op 'test_norm' rejects the options: unsupported x_dtype 'f8'");
  // Without an [options] table the error points at the op's name.
  expect_error(edit(kMinimal, "\"test_norm\"", "\"other_op\""), 1, 6,
               "op 'other_op' rejects the options: x_dtype is required");
}

TEST_F(SpecTest, ShapeErrors) {
  expect_error(edit(kSpec, "{ M = 1, N = 1 }", "{ M = 1, N = 0 }"), 12, 30,
               "dimension 'N' must be a positive integer, got 0");
  expect_error(edit(kSpec, "{ M = 1, N = 1 }", "{ M = 1, N = 1.5 }"), 12, 30,
               "dimension 'N' must be a positive integer, got a floating-point number");
  expect_error(
      edit(kSpec, "{ M = 1, N = 1 }", "{ M = 1, K = 1 }"), 12, 26,
      "dimension 'K' is not one of the first benchmark shape's (M, N); every shape must use the same dimensions");
  expect_error(edit(kSpec, "{ M = 1, N = 1 }", "{ M = 1 }"), 12, 17,
               "shape is missing dimension 'N'; every shape must use the same dimensions (M, N)");
  expect_error(edit(kSpec, "{ M = 1, N = 1 }", "{}"), 12, 17, "must have at least one dimension");
  expect_error(edit(kSpec, "benchmark = [ { M = 32768, N = 256 }, { M = 32768, N = 512 } ]", "benchmark = []"), 11, 13,
               "shapes.benchmark must list at least one shape");
  expect_error(edit(kSpec, "{ M = 32768, N = 512 }", "{ M = 32768, N = 256 }"), 11, 39,
               "duplicate shape M=32768,N=256 in shapes.benchmark (also at line 11, column 15)");
  expect_error(edit(kSpec, "{ M = 3, N = 4097 }", "{ M = 3, N = 100000 }"), 13, 13,
               "op 'test_norm' rejects shape M=3,N=100000: N must be at most 65536");
  expect_error(edit(kSpec, "heldout = [ { M = 3, N = 4097 } ]", "heldout = [ 3 ]"), 13, 13,
               "a shape in shapes.heldout must be a table, got an integer");
}

TEST_F(SpecTest, ToleranceErrors) {
  expect_error(edit(kSpec, "rel_l2 = 5e-3", "rel_l2 = 0.0"), 16, 10, "rel_l2 must be a positive finite number, got 0");
  expect_error(edit(kSpec, "rel_l2 = 5e-3", "rel_l2 = -1"), 16, 10, "rel_l2 must be a positive finite number, got -1");
  expect_error(edit(kSpec, "rel_l2 = 5e-3", "rel_l2 = inf"), 16, 10, "must be a positive finite number, got inf");
  expect_error(edit(kSpec, "max_abs = 1e-2", "max_abs = nan"), 17, 11, "must be a positive finite number, got nan");
  expect_error(edit(kSpec, "[tolerance.out]", "[tolerance.outt]"), 15, 12,
               "op 'test_norm' has no output 'outt'; outputs: out");
}

TEST_F(SpecTest, KnobErrors) {
  expect_error(edit(kSpec, "default = 8 }", "default = 16 }"), 33, 39,
               "default 16 of knob 'VEC' is not one of its values");
  expect_error(edit(kSpec, "default = \"plain\"", "default = \"plan\""), 36, 54,
               "default \"plan\" of knob 'LOADER' is not one of its values");
  expect_error(edit(kSpec, "default = \"plain\"", "default = 1"), 36, 54,
               "the default of knob 'LOADER' must be a string like its first value, got an integer");
  expect_error(edit(kSpec, "[2, 4, 8]", "[2, 4, 4]"), 33, 25,
               "duplicate value 4 in knob 'VEC' (also at line 33, column 22)");
  expect_error(edit(kSpec, "[2, 4, 8]", "[2, \"x\", 8]"), 33, 22,
               "a value of knob 'VEC' must be an integer like its first value, got a string");
  expect_error(edit(kSpec, "[2, 4, 8]", "[2.0, 4.0]"), 33, 19,
               "the values of knob 'VEC' must be integers or strings, got a floating-point number");
  expect_error(edit(kSpec, "[2, 4, 8]", "[]"), 33, 18, "'values' of knob 'VEC' must not be empty");
  expect_error(edit(kSpec, "[\"plain\", \"cp_async\"]", "[\"plain\", \"cp async\"]"), 36, 31,
               "a value of knob 'LOADER' must be non-empty and use only letters, digits and '_', got \"cp async\"");
  expect_error(edit(kSpec, "TPR = {", "X_T = {"), 35, 1,
               "knob 'X_T' collides with a define the op sets for its templates");
  expect_error(edit(kSpec, "TPR = {", "\"2TPR\" = {"), 35, 1, "knob name '2TPR' must be a C identifier");
}

TEST_F(SpecTest, SeedErrors) {
  expect_error(edit(kSpec, "source = \"kernel.cu\"", "source = \"nothere.cu\""), 29, 10,
               "seed source 'nothere.cu' not found (looked for " + (dir_ / "nothere.cu").string() + ")");
  expect_error(edit(kSpec, "source = \"kernel.cu\"", "source = \"sub\""), 29, 10, "seed source 'sub' not found");
  // A template split over parts that include each other: the cycle, with its file and line.
  std::ofstream(dir_ / "sub" / "a.cu") << "// a\n#include \"b.cuh\"\n";
  std::ofstream(dir_ / "sub" / "b.cuh") << "// b\n\n#include \"a.cu\"\n";
  expect_error(edit(kSpec, "source = \"kernel.cu\"", "source = \"sub/a.cu\""), 29, 10,
               "seed source 'sub/a.cu': " + (dir_ / "sub" / "b.cuh").string() + ":3: include cycle: a.cu -> b.cuh -> a.cu");
  expect_error(edit(kSpec, "name = \"seed_b\"", "name = \"seed_a\""), 39, 8,
               "duplicate seed name 'seed_a' (also at line 28, column 8)");
  expect_error(edit(kSpec, "entry = \"rmsnorm_fwd\"", "entry = \"rms-norm\""), 30, 9,
               "'entry' of seed 'seed_a' must be a C identifier");
  expect_error(edit(kSpec, "name = \"seed_b\"", "name = \"\""), 39, 8, "seed 'name' must not be empty");
}

TEST_F(SpecTest, ObjectiveAndBudgetErrors) {
  expect_error(edit(kSpec, "baseline = \"seed_a\"", "baseline = \"seed_c\""), 20, 12,
               "baseline 'seed_c' names no seed; seeds: seed_a, seed_b");
  expect_error(edit(kSpec, "metric = \"geomean_speedup\"", "metric = \"max\""), 21, 10,
               "unknown metric 'max'; expected \"geomean_speedup\"");
  expect_error(edit(kSpec, "minutes = 60.0", "minutes = 0"), 25, 11,
               "'minutes' must be a positive finite number, got 0");
  expect_error(edit(kSpec, "evaluations = 2000", "evaluations = -5"), 24, 15,
               "'evaluations' must be a positive integer, got -5");
}

TEST_F(SpecTest, ConstraintErrors) {
  // The string starts at column 17; expression column 11 ("TPRR") is file column 17 + 11.
  expect_error(edit(kSpec, "\"THREADS % TPR == 0\"", "\"THREADS % TPRR == 0\""), 31, 28,
               "invalid constraint: unknown knob 'TPRR'; knobs: LOADER, THREADS, TPR, VEC");
  expect_error(edit(kSpec, "\"TPR <= THREADS\"", "\"TPR <= (THREADS\""), 31, 55,
               "invalid constraint: expected ')' to close the '(' at column 8");
  expect_error(edit(kSpec, "\"TPR <= THREADS\"", "\"LOADER == 1\""), 31, 50,
               "invalid constraint: '==' compares a string with an integer");
  // A literal string has no escapes either.
  expect_error(edit(kSpec, "\"TPR <= THREADS\"", "'LOADER == \"x\" && VEC'"), 31, 39 + 18,
               "invalid constraint: '&&' expects a condition, got an integer");
  // With escapes the text and the source differ, so the error points at the string.
  expect_error(edit(kSpec, "\"TPR <= THREADS\"", R"("LOADER == \"plain\" && VEC")"), 31, 39,
               "invalid constraint (column 22 of the string): '&&' expects a condition, got an integer");
  expect_error(edit(kSpec, "\"TPR <= THREADS\"", "\"TPR > THREADS\""), 31, 39,
               "the default knobs of seed 'seed_a' violate constraint 'TPR > THREADS' "
               "(LOADER=\"plain\", THREADS=256, TPR=32, VEC=8)");
  expect_error(edit(kSpec, "\"TPR <= THREADS\"", "\"THREADS % (TPR - 32) == 0\""), 31, 39,
               "constraint cannot be evaluated for the default knobs");
  expect_error(edit(kSpec, "\"TPR <= THREADS\"", "3"), 31, 39, "a constraint of seed 'seed_a' must be a string");
  expect_error(edit(kSpec, "\"TPR <= THREADS\"", "\"" + std::string(100, '(') + "\""), 31, 39 + 65,
               "nesting deeper than 64");
}

// --max-benchmark-shapes limits timing only: every benchmark shape is still gated.
TEST_F(SpecTest, MaxBenchmarkShapesLimitsTimingNotTheGate) {
  const SpecResult r = load(kSpec);
  ASSERT_TRUE(r.spec.has_value()) << r.error->format();
  for (int max : {-1, 0, 1}) {
    ShapeSelection sel;
    sel.max_benchmark_shapes = max;
    int benchmark = 0, timed = 0;
    for (const auto& sc : select_shapes(*r.spec, sel)) {
      if (sc.cls != ShapeClass::Benchmark) continue;
      ++benchmark;
      timed += sc.timed ? 1 : 0;
    }
    EXPECT_EQ(benchmark, 2) << "max " << max;
    EXPECT_EQ(timed, max < 0 ? 2 : max) << "max " << max;
  }
}

// A knob value the spec does not declare is refused before anything is built, naming the
// spec's line for that knob.
TEST_F(SpecTest, KnobValuesOutsideTheSpecAreRefusedWithItsLine) {
  const SpecResult r = load(kSpec);
  ASSERT_TRUE(r.spec.has_value()) << r.error->format();
  const auto vec_at = kSpec.find("VEC = {");
  const auto line = 1 + std::count(kSpec.begin(), kSpec.begin() + static_cast<std::ptrdiff_t>(vec_at), '\n');
  EXPECT_EQ(r.spec->seeds[0].knobs[0].line, static_cast<std::uint32_t>(line));
  Builder builder(nullptr);
  CandidateInput input;
  input.knob_overrides["VEC"] = std::int64_t{3};
  const auto p = prepare_evaluation(*r.spec, *registry_.find("test_norm"), builder, input, {}, 1);
  ASSERT_EQ(p.reasons.size(), 1u);
  EXPECT_EQ(p.reasons[0], "knobs: VEC=3 is not one of the values the spec declares for VEC at " + spec_path() + ":" +
                              std::to_string(line) + ":1 (2, 4, 8)");
  input.knob_overrides = {{"LOADER", std::string("tma")}};
  const auto q = prepare_evaluation(*r.spec, *registry_.find("test_norm"), builder, input, {}, 1);
  ASSERT_EQ(q.reasons.size(), 1u);
  EXPECT_NE(q.reasons[0].find("LOADER=tma is not one of the values"), std::string::npos) << q.reasons[0];
}

// A candidate source that is one of the spec's seeds is judged by that seed's knobs and
// constraints, not the baseline's: seed_b declares no knobs, so VEC is refused for it by name
// (before anything is built).
TEST_F(SpecTest, ASourceThatIsASeedTakesThatSeedsKnobs) {
  const SpecResult r = load(kSpec);
  ASSERT_TRUE(r.spec.has_value()) << r.error->format();
  Builder builder(nullptr);
  CandidateInput input;
  input.source_path = (dir_ / "sub" / "other.cu").string();
  input.knob_overrides["VEC"] = std::int64_t{4};
  const auto p = prepare_evaluation(*r.spec, *registry_.find("test_norm"), builder, input, {}, 1);
  ASSERT_EQ(p.reasons.size(), 1u);
  EXPECT_EQ(p.reasons[0], "knobs: seed 'seed_b' has no knob 'VEC'");
  // The baseline's own source keeps its knobs: VEC=3 is refused as a value, not as a name.
  input.source_path = (dir_ / "kernel.cu").string();
  input.knob_overrides["VEC"] = std::int64_t{3};
  const auto q = prepare_evaluation(*r.spec, *registry_.find("test_norm"), builder, input, {}, 1);
  ASSERT_EQ(q.reasons.size(), 1u);
  EXPECT_NE(q.reasons[0].find("VEC=3 is not one of the values"), std::string::npos) << q.reasons[0];
}

// Knobs an op renamed: the old name is mapped to the current one wherever knobs are given.
TEST_F(SpecTest, CanonicalKnobsMapsAnOldNameToTheCurrentOne) {
  const Op& op = *registry_.find("test_norm");
  EXPECT_EQ(canonical_knobs(op, {{"NTHREADS", std::int64_t{128}}, {"VEC", std::int64_t{4}}}),
            (Knobs{{"THREADS", std::int64_t{128}}, {"VEC", std::int64_t{4}}}));
  EXPECT_EQ(canonical_knobs(op, {{"LOAD", std::string("cp_async")}}), (Knobs{{"LOADER", std::string("cp_async")}}));
  EXPECT_EQ(canonical_knob_name(op, "NTHREADS"), "THREADS");
  EXPECT_EQ(canonical_knob_name(op, "TPR"), "TPR");
}

TEST_F(SpecTest, CanonicalKnobsRefusesAKnobGivenUnderBothNames) {
  try {
    (void)canonical_knobs(*registry_.find("test_norm"),
                          {{"NTHREADS", std::int64_t{128}}, {"THREADS", std::int64_t{128}}});
    FAIL() << "both names accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "knob NTHREADS was renamed THREADS; give one of NTHREADS and THREADS, not both");
  }
}

// A name the aliases do not know is the op's to judge (its launch plan or the spec's knob list).
TEST_F(SpecTest, CanonicalKnobsLeavesUnknownNamesToTheOp) {
  const Knobs k = {{"THREAD", std::int64_t{1}}, {"TPR", std::int64_t{32}}};
  EXPECT_EQ(canonical_knobs(*registry_.find("test_norm"), k), k);
  const Knobs old = {{"NTHREADS", std::int64_t{64}}};
  EXPECT_EQ(canonical_knobs(*registry_.find("other_op"), old), old);  // an op that renamed nothing
}

// A spec from before the rename: its knob table and constraints may use the old names; the loaded
// spec holds only the current ones (string literals in a constraint stay as written).
TEST_F(SpecTest, OldKnobNamesInASpecTakeTheCurrentOnes) {
  std::string old = edit(kSpec, "THREADS = {", "NTHREADS = {");
  old = edit(old, "LOADER = {", "LOAD = {");
  old = edit(old, "\"THREADS % TPR == 0\", \"TPR <= THREADS\"",
             "\"NTHREADS % TPR == 0\", 'TPR <= NTHREADS && LOAD != \"LOAD\"'");
  const SpecResult r = load(old);
  ASSERT_TRUE(r.spec.has_value()) << r.error->format();
  const SeedTemplate& seed = r.spec->seeds.at(0);
  std::vector<std::string> names;
  for (const auto& k : seed.knobs) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"VEC", "THREADS", "TPR", "LOADER"}));
  EXPECT_EQ(seed.constraints, (std::vector<std::string>{"THREADS % TPR == 0", "TPR <= THREADS && LOADER != \"LOAD\""}));
  EXPECT_EQ(default_knobs(seed), default_knobs(load(kSpec).spec->seeds.at(0)));
}

TEST_F(SpecTest, OldKnobNameErrors) {
  // Both names in one knob table: at the old one.
  expect_error(edit(kSpec, "LOADER = {", "NTHREADS = { values = [64], default = 64 }\nLOADER = {"), 36, 1,
               "knob NTHREADS was renamed THREADS; give one of NTHREADS and THREADS, not both");
  // An error in a constraint that uses an old name points into the text as written.
  expect_error(edit(kSpec, "\"THREADS % TPR == 0\"", "\"NTHREADS % TPRR == 0\""), 31, 29,
               "invalid constraint: unknown knob 'TPRR'");
  // A template that reads only the old name would take its own default for the current one.
  std::ofstream(dir_ / "kernel.cu") << "#ifndef NTHREADS\n#define NTHREADS 256\n#endif\n";
  expect_error(kSpec, 29, 10,
               "seed 'seed_a': its template reads knob NTHREADS, which op 'test_norm' renamed THREADS; build from a "
               "template that reads THREADS");
  // One that names both (it refuses the old one) is current.
  std::ofstream(dir_ / "kernel.cu") << "#ifdef NTHREADS\n#error \"renamed THREADS\"\n#endif\n#define X THREADS\n";
  EXPECT_TRUE(load(kSpec).spec.has_value());
}

}  // namespace
}  // namespace ptxevo::evaluator
