#include "kernels/rmsnorm/rmsnorm_bwd_op.hpp"
#include "kernels/rmsnorm/rmsnorm_device_reference.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <cmath>
#include <stdexcept>

namespace ptxevo::kernels {

using namespace evaluator;

namespace {

struct Config {
  DType x = DType::BF16;
  DType w = DType::F32;
  bool has_weight = true;
};

Config parse(const OpConfig& cfg) {
  Config c;
  for (const auto& [k, v] : cfg) {
    if (k == "x_dtype") {
      if (!parse_dtype(v, &c.x) || (c.x != DType::BF16 && c.x != DType::F16 && c.x != DType::F32))
        throw std::invalid_argument("rmsnorm_bwd: x_dtype must be bf16, fp16 or fp32, got '" + v + "'");
    } else if (k == "w_dtype") {
      if (v != "fp32" && v != "same") throw std::invalid_argument("rmsnorm_bwd: w_dtype must be fp32 or same");
    } else if (k == "has_weight") {
      if (v != "true" && v != "false") throw std::invalid_argument("rmsnorm_bwd: has_weight must be true or false");
      c.has_weight = v == "true";
    } else if (k == "eps") {
      // Accepted for symmetry with the forward spec; the backward does not use eps (RMSNORM.md 1.3).
    } else {
      throw std::invalid_argument("rmsnorm_bwd: unknown option '" + k + "' (x_dtype, w_dtype, has_weight, eps)");
    }
  }
  auto it = cfg.find("w_dtype");
  c.w = it != cfg.end() && it->second == "same" ? c.x : DType::F32;
  return c;
}

std::pair<std::int64_t, std::int64_t> dims(const Shape& s) {
  auto get = [&](const char* k) {
    auto it = s.find(k);
    if (it == s.end() || it->second < 1)
      throw std::invalid_argument(std::string("rmsnorm_bwd: shape needs ") + k + " >= 1");
    return it->second;
  };
  if (s.size() != 2) throw std::invalid_argument("rmsnorm_bwd: the shape's dimensions are M and N");
  return {get("M"), get("N")};
}

const char* c_type(DType t) {
  return t == DType::BF16 ? "__nv_bfloat16" : t == DType::F16 ? "__half" : "float";
}

const HostTensor& named(const std::vector<HostTensor>& ts, const std::string& n) {
  for (const auto& t : ts)
    if (t.name == n) return t;
  throw std::invalid_argument("rmsnorm_bwd reference: no tensor '" + n + "'");
}

}  // namespace

std::string RmsNormBwdOp::validate(const OpConfig& cfg) const {
  try {
    parse(cfg);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::vector<TensorDesc> RmsNormBwdOp::tensors(const Shape& s, const OpConfig& cfg) const {
  const Config c = parse(cfg);
  const auto [m, n] = dims(s);
  std::vector<TensorDesc> t = {{"x", c.x, {m, n}, Role::In, false}};
  if (c.has_weight) t.push_back({"w", c.w, {n}, Role::In, true});
  t.push_back({"dout", c.x, {m, n}, Role::In, false});
  // rstd is an input of the backward: any positive value defines the function, so it is drawn
  // from a positive range rather than from the gate's signed distributions.
  t.push_back({"rstd", DType::F32, {m}, Role::In, true});
  t.push_back({"dx", c.x, {m, n}, Role::Out, false});
  if (c.has_weight) {
    t.push_back({"dw", DType::F32, {n}, Role::Out, false});
    t.push_back({"dw_partial", DType::F32, {kMaxPartialRows, n}, Role::Scratch, false});
  }
  return t;
}

std::map<std::string, std::string> RmsNormBwdOp::template_defines(const OpConfig& cfg) const {
  const Config c = parse(cfg);
  return {{"XT", c_type(c.x)}, {"WT", c_type(c.w)}, {"HAS_WEIGHT", c.has_weight ? "1" : "0"}};
}

LaunchPlan RmsNormBwdOp::launch_plan(const Shape& s, const OpConfig& cfg, const Knobs& k) const {
  const Config c = parse(cfg);
  const auto [m, n] = dims(s);
  const std::int64_t threads = knob_int(k, "THREADS", 256);
  const std::int64_t blocks = knob_int(k, "BLOCKS", 264);
  const std::int64_t rthreads = knob_int(k, "RTHREADS", 256);
  if (threads < 32 || threads > 1024 || threads % 32 != 0)
    throw std::invalid_argument("rmsnorm_bwd: THREADS must be a multiple of 32 in 32..1024");
  if (blocks < 1 || blocks > kMaxPartialRows)
    throw std::invalid_argument("rmsnorm_bwd: BLOCKS must be 1.." + std::to_string(kMaxPartialRows));
  if (rthreads < 32 || rthreads > 1024) throw std::invalid_argument("rmsnorm_bwd: RTHREADS must be 32..1024");
  const auto used = static_cast<std::uint32_t>(std::min(blocks, m));
  KernelLaunch main;
  main.entry = "rmsnorm_bwd";
  main.grid = {used, 1, 1};
  main.block = {static_cast<std::uint32_t>(threads), 1, 1};
  main.args = {ArgTensor{"x"},  ArgTensor{c.has_weight ? "w" : ""}, ArgTensor{"dout"}, ArgTensor{"rstd"},
               ArgTensor{"dx"}, ArgTensor{c.has_weight ? "dw_partial" : ""}, m, n};
  LaunchPlan plan{{main}};
  if (c.has_weight) {
    KernelLaunch red;
    red.entry = "rmsnorm_bwd_dw_reduce";
    red.grid = {static_cast<std::uint32_t>((n + rthreads - 1) / rthreads), 1, 1};
    red.block = {static_cast<std::uint32_t>(rthreads), 1, 1};
    red.args = {ArgTensor{"dw_partial"}, ArgTensor{"dw"}, static_cast<std::int64_t>(used), n};
    plan.kernels.push_back(red);
  }
  return plan;
}

void RmsNormBwdOp::reference(const Shape& s, const OpConfig& cfg, const std::vector<HostTensor>& ts,
                             std::vector<HostTensor>& ref) const {
  const Config c = parse(cfg);
  const auto [m, n] = dims(s);
  const HostTensor& x = named(ts, "x");
  const HostTensor& dout = named(ts, "dout");
  const HostTensor& rstd = named(ts, "rstd");
  const HostTensor* w = c.has_weight ? &named(ts, "w") : nullptr;
  HostTensor dx("dx", DType::F64, {m, n});
  std::vector<double> wv(static_cast<std::size_t>(n), 1.0);
  if (w)
    for (std::int64_t j = 0; j < n; ++j) wv[static_cast<std::size_t>(j)] = w->get(j);
  auto* dxp = reinterpret_cast<double*>(dx.data.data());
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, m), [&](const tbb::blocked_range<std::int64_t>& rows) {
    for (std::int64_t r = rows.begin(); r < rows.end(); ++r) {
      const double rs = rstd.get(r);
      double c1 = 0;
      for (std::int64_t j = 0; j < n; ++j) c1 += x.get(r * n + j) * rs * dout.get(r * n + j) * wv[static_cast<std::size_t>(j)];
      c1 /= static_cast<double>(n);
      for (std::int64_t j = 0; j < n; ++j) {
        const double xh = x.get(r * n + j) * rs;
        dxp[r * n + j] = (dout.get(r * n + j) * wv[static_cast<std::size_t>(j)] - xh * c1) * rs;
      }
    }
  });
  ref.push_back(std::move(dx));
  if (c.has_weight) {
    // dw[j] = sum over rows of dout * x_hat, reduced over row blocks.
    using Acc = std::vector<double>;
    Acc dw = tbb::parallel_reduce(
        tbb::blocked_range<std::int64_t>(0, m), Acc(static_cast<std::size_t>(n), 0.0),
        [&](const tbb::blocked_range<std::int64_t>& rows, Acc acc) {
          for (std::int64_t r = rows.begin(); r < rows.end(); ++r) {
            const double rs = rstd.get(r);
            for (std::int64_t j = 0; j < n; ++j)
              acc[static_cast<std::size_t>(j)] += dout.get(r * n + j) * x.get(r * n + j) * rs;
          }
          return acc;
        },
        [](Acc a, const Acc& b) {
          for (std::size_t j = 0; j < a.size(); ++j) a[j] += b[j];
          return a;
        });
    HostTensor t("dw", DType::F64, {n});
    for (std::int64_t j = 0; j < n; ++j) t.set(j, dw[static_cast<std::size_t>(j)]);
    ref.push_back(std::move(t));
  }
}

std::string RmsNormBwdOp::device_reference_source(const OpConfig& cfg) const {
  const Config c = parse(cfg);
  return rmsnorm_bwd_device_reference_source(c.x, c.w, c.has_weight);
}

evaluator::DeviceReferencePlan RmsNormBwdOp::device_reference_plan(const Shape& s, const OpConfig& cfg) const {
  const Config c = parse(cfg);
  const auto [m, n] = dims(s);
  return rmsnorm_bwd_device_reference_plan(c.has_weight, m, n);
}

double RmsNormBwdOp::bytes(const Shape& s, const OpConfig& cfg) const {
  const Config c = parse(cfg);
  const auto [m, n] = dims(s);
  const double e = static_cast<double>(dtype_size(c.x));
  // TARGETS.md's convention: x and dout read, dx written, rstd read, dw written.
  return 3.0 * static_cast<double>(m) * static_cast<double>(n) * e + 4.0 * static_cast<double>(m) +
         4.0 * static_cast<double>(n);
}

double RmsNormBwdOp::flops(const Shape& s, const OpConfig&) const {
  const auto [m, n] = dims(s);
  return 8.0 * static_cast<double>(m) * static_cast<double>(n);
}

Tolerance RmsNormBwdOp::tolerance(const std::string& output, const OpConfig& cfg) const {
  const Config c = parse(cfg);
  // dx: one rounding to x's dtype after fp32 arithmetic, as in the forward. dw: an fp32 sum over
  // M rows in a kernel-chosen order; its error grows with M but stays far below 1e-4 relative.
  if (output == "dw") return {1e-4, 1e-3};
  if (c.x == DType::BF16) return {5e-3, 1e-2};
  if (c.x == DType::F16) return {2e-3, 4e-3};
  return {1e-5, 1e-4};
}

void RmsNormBwdOp::fill_fixed(const TensorDesc& d, std::mt19937_64& rng, HostTensor& t) const {
  if (d.name == "w") {
    std::normal_distribution<double> nd(0.0, 1.0);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, 1.0 + 0.5 * nd(rng));
  } else if (d.name == "rstd") {
    std::uniform_real_distribution<double> u(0.5, 2.0);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  } else {
    Op::fill_fixed(d, rng, t);
  }
}

}  // namespace ptxevo::kernels
