#include "kernels/rmsnorm/rmsnorm_device_reference.hpp"

#include <algorithm>

namespace ptxevo::kernels {
namespace {

using evaluator::ArgTensor;
using evaluator::DeviceReferencePlan;
using evaluator::DType;
using evaluator::KernelLaunch;

constexpr std::uint32_t kThreads = 256;
// Row slices of the dw reduction: enough CTAs to fill the GPU for any N.
constexpr std::int64_t kSlices = 64;

int kind(DType t) {
  switch (t) {
    case DType::F32: return 1;
    case DType::F16: return 2;
    case DType::BF16: return 3;
    default: return 0;
  }
}

// Loads of f64/f32/f16/bf16 elements as doubles (exact), and an fp64 block sum.
constexpr const char* kPrelude = R"cu(
#define THREADS 256
__device__ __forceinline__ double half_bits_to_double(unsigned int h) {
  const unsigned int sign = h >> 15, e = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (e == 0) v = ldexp((double)man, -24);
  else if (e == 31) v = man ? __longlong_as_double(0x7ff8000000000000ll) : __longlong_as_double(0x7ff0000000000000ll);
  else v = ldexp((double)(man | 0x400), (int)e - 25);
  return sign ? -v : v;
}
template <int K> __device__ __forceinline__ double ld(const void* p, long long i) {
  if (K == 0) return ((const double*)p)[i];
  if (K == 1) return (double)((const float*)p)[i];
  if (K == 2) return half_bits_to_double(((const unsigned short*)p)[i]);
  return (double)__uint_as_float((unsigned int)((const unsigned short*)p)[i] << 16);
}
// Sum over the block; every thread gets the total.
__device__ double block_sum(double v) {
  __shared__ double sh[THREADS];
  __syncthreads();
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int o = THREADS / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
    __syncthreads();
  }
  return sh[0];
}
)cu";

constexpr const char* kFwd = R"cu(
extern "C" __global__ void __launch_bounds__(THREADS) ptxevo_ref_rmsnorm_fwd(
    const void* x, const void* w, const void* b, const void* res, double* out, double* res_out, double* rstd,
    long long M, long long N, double eps) {
  for (long long m = blockIdx.x; m < M; m += gridDim.x) {
    const long long base = m * N;
    double ss = 0;
    for (long long j = threadIdx.x; j < N; j += THREADS) {
      double v = ld<X_KIND>(x, base + j);
      if (HAS_RESIDUAL) v += ld<X_KIND>(res, base + j);
      ss += v * v;
    }
    const double r = 1.0 / sqrt(block_sum(ss) / (double)N + eps);
    if (STORE_RSTD && threadIdx.x == 0) rstd[m] = r;
    for (long long j = threadIdx.x; j < N; j += THREADS) {
      double v = ld<X_KIND>(x, base + j);
      if (HAS_RESIDUAL) v += ld<X_KIND>(res, base + j);
      const double wv = HAS_WEIGHT ? ld<W_KIND>(w, j) : 1.0;
      const double bv = HAS_BIAS ? ld<B_KIND>(b, j) : 0.0;
      out[base + j] = v * r * wv + bv;
      if (HAS_RESIDUAL) res_out[base + j] = v;
    }
  }
}
)cu";

constexpr const char* kBwd = R"cu(
// dx per row: c1 = sum_j x*rstd*dout*w / N; dx = (dout*w - x*rstd*c1) * rstd.
extern "C" __global__ void __launch_bounds__(THREADS) ptxevo_ref_rmsnorm_bwd_dx(
    const void* x, const void* w, const void* dout, const float* rstd, double* dx, long long M, long long N) {
  for (long long m = blockIdx.x; m < M; m += gridDim.x) {
    const long long base = m * N;
    const double rs = (double)rstd[m];
    double c = 0;
    for (long long j = threadIdx.x; j < N; j += THREADS) {
      const double wv = HAS_WEIGHT ? ld<W_KIND>(w, j) : 1.0;
      c += ld<X_KIND>(x, base + j) * rs * ld<X_KIND>(dout, base + j) * wv;
    }
    const double c1 = block_sum(c) / (double)N;
    for (long long j = threadIdx.x; j < N; j += THREADS) {
      const double wv = HAS_WEIGHT ? ld<W_KIND>(w, j) : 1.0;
      const double xh = ld<X_KIND>(x, base + j) * rs;
      dx[base + j] = (ld<X_KIND>(dout, base + j) * wv - xh * c1) * rs;
    }
  }
}
// dw[j] = sum_m dout*x*rstd: each CTA (blockIdx.y = slice) sums a slice of rows for a strip of
// columns into partial[slice, j]; the second kernel sums the slices in order.
extern "C" __global__ void __launch_bounds__(THREADS) ptxevo_ref_rmsnorm_bwd_dw_partial(
    const void* x, const void* dout, const float* rstd, double* partial, long long M, long long N, long long slices) {
  const long long j = (long long)blockIdx.x * THREADS + threadIdx.x;
  if (j >= N) return;
  const long long rows = (M + slices - 1) / slices;
  const long long m0 = blockIdx.y * rows, m1 = min(M, m0 + rows);
  double acc = 0;
  for (long long m = m0; m < m1; ++m) acc += ld<X_KIND>(dout, m * N + j) * ld<X_KIND>(x, m * N + j) * (double)rstd[m];
  partial[blockIdx.y * N + j] = acc;
}
extern "C" __global__ void __launch_bounds__(THREADS) ptxevo_ref_rmsnorm_bwd_dw_sum(
    const double* partial, double* dw, long long N, long long slices) {
  const long long j = (long long)blockIdx.x * THREADS + threadIdx.x;
  if (j >= N) return;
  double acc = 0;
  for (long long s = 0; s < slices; ++s) acc += partial[s * N + j];
  dw[j] = acc;
}
)cu";

std::string define(const char* name, long v) { return std::string("#define ") + name + " " + std::to_string(v) + "\n"; }

// One CTA per row up to a grid cap; the kernels loop over the rest.
std::uint32_t row_grid(std::int64_t m) { return static_cast<std::uint32_t>(std::clamp<std::int64_t>(m, 1, 65535)); }

std::uint32_t col_grid(std::int64_t n) {
  return static_cast<std::uint32_t>(std::max<std::int64_t>(1, (n + kThreads - 1) / kThreads));
}

}  // namespace

std::string rmsnorm_fwd_device_reference_source(const RmsNormFwdRefConfig& c) {
  return define("X_KIND", kind(c.x)) + define("W_KIND", kind(c.w)) + define("B_KIND", kind(c.b)) +
         define("HAS_WEIGHT", c.has_weight) + define("HAS_BIAS", c.has_bias) + define("HAS_RESIDUAL", c.has_residual) +
         define("STORE_RSTD", c.store_rstd) + kPrelude + kFwd;
}

DeviceReferencePlan rmsnorm_fwd_device_reference_plan(const RmsNormFwdRefConfig& c, std::int64_t m, std::int64_t n) {
  DeviceReferencePlan p;
  p.outputs = {"out"};
  if (c.has_residual) p.outputs.push_back("residual_out");
  if (c.store_rstd) p.outputs.push_back("rstd");
  KernelLaunch l;
  l.entry = "ptxevo_ref_rmsnorm_fwd";
  l.grid = {row_grid(m), 1, 1};
  l.block = {kThreads, 1, 1};
  l.args = {ArgTensor{"x"},
            ArgTensor{c.has_weight ? "w" : ""},
            ArgTensor{c.has_bias ? "b" : ""},
            ArgTensor{c.has_residual ? "residual" : ""},
            ArgTensor{"ref:out"},
            ArgTensor{c.has_residual ? "ref:residual_out" : ""},
            ArgTensor{c.store_rstd ? "ref:rstd" : ""},
            m,
            n,
            c.eps};
  p.plan.kernels.push_back(l);
  return p;
}

std::string rmsnorm_bwd_device_reference_source(DType x, DType w, bool has_weight) {
  return define("X_KIND", kind(x)) + define("W_KIND", kind(w)) + define("HAS_WEIGHT", has_weight) + kPrelude + kBwd;
}

DeviceReferencePlan rmsnorm_bwd_device_reference_plan(bool has_weight, std::int64_t m, std::int64_t n) {
  DeviceReferencePlan p;
  p.outputs = {"dx"};
  KernelLaunch dx;
  dx.entry = "ptxevo_ref_rmsnorm_bwd_dx";
  dx.grid = {row_grid(m), 1, 1};
  dx.block = {kThreads, 1, 1};
  dx.args = {ArgTensor{"x"}, ArgTensor{has_weight ? "w" : ""}, ArgTensor{"dout"}, ArgTensor{"rstd"},
             ArgTensor{"ref:dx"}, m, n};
  p.plan.kernels.push_back(dx);
  if (has_weight) {
    const std::int64_t slices = std::min(kSlices, m);
    p.outputs.push_back("dw");
    p.scratch.push_back({"ref_scratch:dw_partial", DType::F64, {slices, n}, evaluator::Role::Scratch, false});
    KernelLaunch part;
    part.entry = "ptxevo_ref_rmsnorm_bwd_dw_partial";
    part.grid = {col_grid(n), static_cast<std::uint32_t>(slices), 1};
    part.block = {kThreads, 1, 1};
    part.args = {ArgTensor{"x"}, ArgTensor{"dout"}, ArgTensor{"rstd"}, ArgTensor{"ref_scratch:dw_partial"}, m, n, slices};
    p.plan.kernels.push_back(part);
    KernelLaunch sum;
    sum.entry = "ptxevo_ref_rmsnorm_bwd_dw_sum";
    sum.grid = {col_grid(n), 1, 1};
    sum.block = {kThreads, 1, 1};
    sum.args = {ArgTensor{"ref_scratch:dw_partial"}, ArgTensor{"ref:dw"}, n, slices};
    p.plan.kernels.push_back(sum);
  }
  return p;
}

}  // namespace ptxevo::kernels
