#include "kernels/kda/kda_bwd_op.hpp"

#include <algorithm>
#include <stdexcept>

namespace ptxevo::kernels {

using evaluator::DType;
using evaluator::HostTensor;
using evaluator::Knobs;
using evaluator::OpConfig;
using evaluator::Role;
using evaluator::Shape;
using evaluator::TensorDesc;

namespace {

constexpr std::int64_t D = KdaBwdOp::kHeadDim;

[[noreturn]] void fail(const std::string& m) { throw std::invalid_argument("kda_bwd: " + m); }

const HostTensor& find(const std::vector<HostTensor>& ts, const std::string& name, DType dtype, std::int64_t numel) {
  for (const auto& t : ts) {
    if (t.name != name) continue;
    if (t.dtype != dtype || t.numel() != numel)
      fail("reference: tensor '" + name + "' is " + evaluator::to_string(t.dtype) + " of " + std::to_string(t.numel()) +
           " elements; the shape and options want " + evaluator::to_string(dtype) + " of " + std::to_string(numel));
    return t;
  }
  fail("reference: no input tensor named '" + name + "'");
}

std::vector<double> widened(const HostTensor& t) {
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) out[static_cast<std::size_t>(i)] = t.get(i);
  return out;
}

HostTensor f64(const std::string& name, const std::vector<std::int64_t>& shape, const std::vector<double>& v) {
  HostTensor t(name, DType::F64, shape);
  for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
  return t;
}

}  // namespace

KdaBwdOp::Geometry KdaBwdOp::geometry(const Knobs& k) {
  Geometry g;
  for (const auto& [name, value] : k) {
    const auto* v = std::get_if<std::int64_t>(&value);
    if (!v) fail("knob " + name + " must be an integer");
    if (name == "BV") g.bv = *v;
    else if (name == "CKPT") g.ckpt = *v;
    else if (name == "SUB") g.sub = *v;
    else fail("unknown knob '" + name + "' (knobs: BV, CKPT, SUB)");
  }
  if (g.bv != 16 && g.bv != 32)
    fail("BV must be 16 or 32 (the workspace holds " + std::to_string(kMaxSlices) + " slices' shares), got " +
         std::to_string(g.bv));
  if (g.ckpt != 32 && g.ckpt != 64 && g.ckpt != 128) fail("CKPT must be 32, 64 or 128, got " + std::to_string(g.ckpt));
  if (g.sub < 2 || g.sub > 16) fail("SUB must be in [2, 16], got " + std::to_string(g.sub));
  if (g.sub * g.bv > 256)
    fail("SUB * BV must be at most 256 (the replayed states a thread keeps), got " + std::to_string(g.sub * g.bv));
  return g;
}

Knobs KdaBwdOp::knob_defaults() { return {{"BV", std::int64_t{16}}, {"CKPT", std::int64_t{64}}, {"SUB", std::int64_t{8}}}; }

std::vector<Knobs> KdaBwdOp::covering_knobs() {
  return {knob_defaults(),
          {{"BV", std::int64_t{16}}, {"CKPT", std::int64_t{32}}, {"SUB", std::int64_t{16}}},
          {{"BV", std::int64_t{32}}, {"CKPT", std::int64_t{128}}, {"SUB", std::int64_t{2}}},
          {{"BV", std::int64_t{32}}, {"CKPT", std::int64_t{32}}, {"SUB", std::int64_t{8}}}};
}

std::int64_t KdaBwdOp::share_offset(const KdaDims& d) { return d.heads * (d.total_tokens() / 32 + d.sequences) * D * D; }

std::int64_t KdaBwdOp::sums_offset(const KdaDims& d) {
  return share_offset(d) + kMaxSlices * d.total_tokens() * d.heads * (3 * D + 1);
}

std::int64_t KdaBwdOp::finish_chunks(const KdaDims& d) { return (d.total_tokens() + kFinishTokens - 1) / kFinishTokens; }

std::int64_t KdaBwdOp::workspace_words(const KdaDims& d) { return sums_offset(d) + finish_chunks(d) * d.heads * (D + 1); }

std::vector<std::string> KdaBwdOp::outputs(const Config& c) {
  std::vector<std::string> out = {"dq", "dk", "dv", "dg", "dbeta", "dA_log", "ddt_bias"};
  if (c.initial_state) out.push_back("d_initial_state");
  return out;
}

std::string KdaBwdOp::validate(const OpConfig& cfg) const {
  try {
    KdaFwdOp::parse(cfg);
  } catch (const std::invalid_argument& e) {
    return std::string("kda_bwd: ") + (std::string(e.what()).rfind("kda_fwd: ", 0) == 0 ? e.what() + 9 : e.what());
  }
  return "";
}

std::vector<TensorDesc> KdaBwdOp::tensors(const Shape& s, const OpConfig& cfg) const {
  const Config c = KdaFwdOp::parse(cfg);
  const KdaDims d = kda_dims(s);
  const std::vector<std::int64_t> tok = {d.batch, d.tokens, d.heads, D};
  const std::vector<std::int64_t> state = {d.sequences, d.heads, D, D};
  // The forward's inputs, in its order (q ... initial_state), then the gradients coming back.
  std::vector<TensorDesc> out;
  for (auto& t : forward_.tensors(s, cfg))
    if (t.role == Role::In) out.push_back(std::move(t));
  out.push_back({"d_out", DType::BF16, tok, Role::In, false});
  if (c.final_state) out.push_back({"d_final_state", DType::F32, state, Role::In, false});
  out.push_back({"dq", DType::F32, tok, Role::Out, false});
  out.push_back({"dk", DType::F32, tok, Role::Out, false});
  out.push_back({"dv", DType::F32, tok, Role::Out, false});
  out.push_back({"dg", DType::F32, tok, Role::Out, false});
  out.push_back({"dbeta", DType::F32, {d.batch, d.tokens, d.heads}, Role::Out, false});
  out.push_back({"dA_log", DType::F32, {d.heads}, Role::Out, false});
  out.push_back({"ddt_bias", DType::F32, {d.heads, D}, Role::Out, false});
  if (c.initial_state) out.push_back({"d_initial_state", DType::F32, state, Role::Out, false});
  out.push_back({"workspace", DType::F32, {workspace_words(d)}, Role::Scratch, false});
  return out;
}

std::map<std::string, std::string> KdaBwdOp::template_defines(const OpConfig& cfg) const {
  return forward_.template_defines(cfg);
}

evaluator::LaunchPlan KdaBwdOp::launch_plan(const Shape& s, const OpConfig& cfg, const Knobs& k) const {
  const Config c = KdaFwdOp::parse(cfg);
  const KdaDims d = kda_dims(s);
  const Geometry g = geometry(k);
  using evaluator::ArgTensor;
  const auto heads = static_cast<std::int32_t>(d.heads);
  const auto lower_bound = static_cast<float>(c.lower_bound);
  evaluator::LaunchPlan p;
  if (d.total_tokens() > 0x7fffffff / kFinishTokens || finish_chunks(d) > 0x7fffffff) fail("too many tokens");
  const std::int64_t part_off = share_offset(d), sums_off = sums_offset(d);

  evaluator::KernelLaunch rec;
  rec.entry = kRecurrentEntry;
  rec.grid = {static_cast<std::uint32_t>(d.sequences), static_cast<std::uint32_t>(d.heads),
              static_cast<std::uint32_t>(D / g.bv)};
  rec.block = {static_cast<std::uint32_t>(D), 1, 1};
  rec.args = {ArgTensor{"q"},
              ArgTensor{"k"},
              ArgTensor{"v"},
              ArgTensor{"g"},
              ArgTensor{"beta"},
              ArgTensor{"A_log"},
              ArgTensor{"dt_bias"},
              ArgTensor{d.packed ? "cu_seqlens" : ""},
              ArgTensor{c.initial_state ? "initial_state" : ""},
              ArgTensor{"d_out"},
              ArgTensor{c.final_state ? "d_final_state" : ""},
              ArgTensor{"dv"},
              ArgTensor{c.initial_state ? "d_initial_state" : ""},
              ArgTensor{"workspace"},
              std::int64_t{d.tokens},
              heads,
              static_cast<std::int32_t>(d.sequences),
              static_cast<float>(c.scale),
              lower_bound,
              part_off};
  p.kernels.push_back(std::move(rec));

  evaluator::KernelLaunch fin;
  fin.entry = kFinishEntry;
  fin.grid = {static_cast<std::uint32_t>(finish_chunks(d)), static_cast<std::uint32_t>(d.heads), 1};
  fin.block = {static_cast<std::uint32_t>(D), 1, 1};
  fin.args = {ArgTensor{"q"},     ArgTensor{"k"},  ArgTensor{"g"},  ArgTensor{"beta"},  ArgTensor{"A_log"},
              ArgTensor{"dt_bias"}, ArgTensor{"dq"}, ArgTensor{"dk"}, ArgTensor{"dg"},    ArgTensor{"dbeta"},
              ArgTensor{"workspace"}, std::int64_t{d.total_tokens()}, heads, lower_bound, part_off, sums_off};
  p.kernels.push_back(std::move(fin));

  evaluator::KernelLaunch red;
  red.entry = kReduceEntry;
  red.grid = {static_cast<std::uint32_t>(d.heads), 1, 1};
  red.block = {static_cast<std::uint32_t>(D), 1, 1};
  red.args = {ArgTensor{"workspace"}, ArgTensor{"dA_log"}, ArgTensor{"ddt_bias"}, sums_off,
              static_cast<std::int32_t>(finish_chunks(d)), heads};
  p.kernels.push_back(std::move(red));
  return p;
}

KdaBwdOp::Problem KdaBwdOp::problem(const KdaDims& d, const Config& c, const std::vector<HostTensor>& tensors) {
  Problem p;
  p.inputs = kda_inputs(KdaFwdOp::problem(d, c, tensors));
  const std::int64_t tok = d.total_tokens() * d.heads * D;
  p.d_out = widened(find(tensors, "d_out", DType::BF16, tok));
  if (c.final_state) p.d_final_state = widened(find(tensors, "d_final_state", DType::F32, d.sequences * d.heads * D * D));
  return p;
}

void KdaBwdOp::reference(const Shape& s, const OpConfig& cfg, const std::vector<HostTensor>& tensors,
                         std::vector<HostTensor>& reference) const {
  const Config c = KdaFwdOp::parse(cfg);
  const KdaDims d = kda_dims(s);
  const Problem p = problem(d, c, tensors);
  const KdaGradients gr = kda_backward(p.inputs, p.d_out.data(), c.final_state ? p.d_final_state.data() : nullptr);
  const std::vector<std::int64_t> tok = {d.batch, d.tokens, d.heads, D};
  reference.clear();
  reference.push_back(f64("dq", tok, gr.dq));
  reference.push_back(f64("dk", tok, gr.dk));
  reference.push_back(f64("dv", tok, gr.dv));
  reference.push_back(f64("dg", tok, gr.dg));
  reference.push_back(f64("dbeta", {d.batch, d.tokens, d.heads}, gr.dbeta));
  reference.push_back(f64("dA_log", {d.heads}, gr.da_log));
  reference.push_back(f64("ddt_bias", {d.heads, D}, gr.ddt_bias));
  if (c.initial_state) reference.push_back(f64("d_initial_state", {d.sequences, d.heads, D, D}, gr.dinitial_state));
}

// Reads q, k, g, v, d_out (bf16), beta; writes dq, dk, dv, dg (fp32) and dbeta; the states and
// their gradients (fp32); A_log, dt_bias and their gradients. The seed reads each token many times
// more (the replays); this is what any backward must move at least.
double KdaBwdOp::bytes(const Shape& s, const OpConfig& cfg) const {
  const Config c = KdaFwdOp::parse(cfg);
  const KdaDims d = kda_dims(s);
  const double th = static_cast<double>(d.total_tokens()) * static_cast<double>(d.heads);
  const double state = static_cast<double>(d.sequences) * static_cast<double>(d.heads) * D * D * 4.0;
  double b = th * (2.0 * D * 5 /* q, k, g, v, d_out */ + 2.0 /* beta */ + 4.0 * D * 4 /* dq, dk, dv, dg */ + 4.0);
  b += (c.initial_state ? 2 * state : 0.0) + (c.final_state ? state : 0.0);
  b += 2.0 * static_cast<double>(d.heads) * (4.0 + 4.0 * D);
  if (d.packed) b += 8.0 * static_cast<double>(d.sequences + 1);
  return b;
}

// The forward's three state products again (6 K V per token-head: the states are recomputed) and
// the backward's own (dS += q dO^T, dq = S dO, dr = dS^T k, dk = dS r + S' dr, dS' = dS - k dr^T,
// da = dS' . S': 12 K V): 18 K V per token-head.
double KdaBwdOp::flops(const Shape& s, const OpConfig& cfg) const {
  KdaFwdOp::parse(cfg);
  const KdaDims d = kda_dims(s);
  return 18.0 * static_cast<double>(d.total_tokens()) * static_cast<double>(d.heads) * D * D;
}

// Relative RMS error 1e-2 and max-abs 5e-2 (of max(1, max |ref|)), the forward's bounds: the seed
// keeps every state and gradient in fp32, and on the CPU emulation of its arithmetic
// (kernels/tests/kda_bwd_host_test.cpp) errs by well under a tenth of that.
evaluator::Tolerance KdaBwdOp::tolerance(const std::string& output, const OpConfig& cfg) const {
  const Config c = KdaFwdOp::parse(cfg);
  const auto outs = outputs(c);
  if (std::find(outs.begin(), outs.end(), output) != outs.end()) return {1e-2, 5e-2};
  std::string names;
  for (const auto& o : outs) names += (names.empty() ? "" : ", ") + o;
  fail("no output named '" + output + "' (outputs: " + names + ")");
}

void KdaBwdOp::fill_fixed(const TensorDesc& d, std::mt19937_64& rng, HostTensor& t) const {
  forward_.fill_fixed(d, rng, t);
}

}  // namespace ptxevo::kernels
