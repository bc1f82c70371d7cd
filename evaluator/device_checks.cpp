#include "evaluator/device_checks.hpp"

#include <cstring>
#include <limits>

#include "evaluator/builder.hpp"

namespace ptxevo::evaluator {
namespace {

// One statistics block; doubles first so every field is naturally aligned.
struct RawStats {
  double sum_d2, sum_r2, sum_o2, max_d, max_r, out_min, out_max, ref_min, ref_max;
  unsigned long long unwritten, nonfinite, ref_nonfinite, counted, fp;
};

constexpr const char* kSource = R"cu(
// ptxevo's trusted gate kernels. Sums go through per-block shared-memory trees and one atomic
// per block; max and min of doubles through compare-and-swap. Element kinds: 0 f64, 1 f32,
// 2 f16, 3 bf16.
struct RawStats {
  double sum_d2, sum_r2, sum_o2, max_d, max_r, out_min, out_max, ref_min, ref_max;
  unsigned long long unwritten, nonfinite, ref_nonfinite, counted, fp;
};

__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ bool finite(double v) { return !isnan(v) && !isinf(v); }
__device__ __forceinline__ double half_to_double(unsigned int h) {
  const unsigned int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0) v = ldexp((double)man, -24);
  else if (exp == 31) v = man ? __longlong_as_double(0x7ff8000000000000ll) : __longlong_as_double(0x7ff0000000000000ll);
  else v = ldexp((double)(man | 0x400), (int)exp - 25);
  return sign ? -v : v;
}
template <int K> __device__ __forceinline__ unsigned long long load_bits(const void* p, long long i) {
  if (K == 0) return ((const unsigned long long*)p)[i];
  if (K == 1) return ((const unsigned int*)p)[i];
  return ((const unsigned short*)p)[i];
}
template <int K> __device__ __forceinline__ double value(unsigned long long b) {
  if (K == 0) return __longlong_as_double((long long)b);
  if (K == 1) return (double)__uint_as_float((unsigned int)b);
  if (K == 2) return half_to_double((unsigned int)b);
  return (double)__uint_as_float((unsigned int)b << 16);
}
__device__ void atomic_max_d(double* a, double v) {
  unsigned long long* p = (unsigned long long*)a;
  unsigned long long old = *p;
  while (v > __longlong_as_double((long long)old)) {
    const unsigned long long prev = atomicCAS(p, old, (unsigned long long)__double_as_longlong(v));
    if (prev == old) break;
    old = prev;
  }
}
__device__ void atomic_min_d(double* a, double v) {
  unsigned long long* p = (unsigned long long*)a;
  unsigned long long old = *p;
  while (v < __longlong_as_double((long long)old)) {
    const unsigned long long prev = atomicCAS(p, old, (unsigned long long)__double_as_longlong(v));
    if (prev == old) break;
    old = prev;
  }
}

#define THREADS 256
template <int K>
__device__ void stats_body(const void* out, const double* ref, long long n, unsigned long long poison, RawStats* s) {
  const double inf = __longlong_as_double(0x7ff0000000000000ll);
  const double pv = value<K>(poison);
  double sd2 = 0, sr2 = 0, so2 = 0, md = 0, mr = 0, omin = inf, omax = -inf, rmin = inf, rmax = -inf;
  unsigned long long uw = 0, onf = 0, rnf = 0, cnt = 0, fp = 0;
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n; i += (long long)gridDim.x * THREADS) {
    const unsigned long long b = load_bits<K>(out, i);
    const double rv = ref[i];
    const double ov = value<K>(b);
    fp += mix64((unsigned long long)i * 0x9E3779B97F4A7C15ull ^ b);
    const bool is_uw = (b == poison) && !(rv == pv);
    const bool is_rnf = !is_uw && !finite(rv);
    const bool is_onf = !is_uw && !is_rnf && !finite(ov);
    const bool ok = !is_uw && !is_rnf && !is_onf;
    uw += is_uw;
    rnf += is_rnf;
    onf += is_onf;
    cnt += ok;
    const double x = ok ? ov : 0.0, y = ok ? rv : 0.0, d = x - y;
    sd2 += d * d;
    sr2 += y * y;
    so2 += x * x;
    md = fmax(md, fabs(d));
    mr = fmax(mr, fabs(y));
    if (ok) {
      omin = fmin(omin, x);
      omax = fmax(omax, x);
      rmin = fmin(rmin, y);
      rmax = fmax(rmax, y);
    }
  }
  __shared__ double sh[9][THREADS];
  __shared__ unsigned long long su[5][THREADS];
  const int t = threadIdx.x;
  sh[0][t] = sd2; sh[1][t] = sr2; sh[2][t] = so2; sh[3][t] = md; sh[4][t] = mr;
  sh[5][t] = omin; sh[6][t] = omax; sh[7][t] = rmin; sh[8][t] = rmax;
  su[0][t] = uw; su[1][t] = onf; su[2][t] = rnf; su[3][t] = cnt; su[4][t] = fp;
  __syncthreads();
  for (int o = THREADS / 2; o > 0; o >>= 1) {
    if (t < o) {
      sh[0][t] += sh[0][t + o]; sh[1][t] += sh[1][t + o]; sh[2][t] += sh[2][t + o];
      sh[3][t] = fmax(sh[3][t], sh[3][t + o]); sh[4][t] = fmax(sh[4][t], sh[4][t + o]);
      sh[5][t] = fmin(sh[5][t], sh[5][t + o]); sh[6][t] = fmax(sh[6][t], sh[6][t + o]);
      sh[7][t] = fmin(sh[7][t], sh[7][t + o]); sh[8][t] = fmax(sh[8][t], sh[8][t + o]);
      for (int k = 0; k < 5; ++k) su[k][t] += su[k][t + o];
    }
    __syncthreads();
  }
  if (t == 0) {
    atomicAdd(&s->sum_d2, sh[0][0]);
    atomicAdd(&s->sum_r2, sh[1][0]);
    atomicAdd(&s->sum_o2, sh[2][0]);
    atomic_max_d(&s->max_d, sh[3][0]);
    atomic_max_d(&s->max_r, sh[4][0]);
    atomic_min_d(&s->out_min, sh[5][0]);
    atomic_max_d(&s->out_max, sh[6][0]);
    atomic_min_d(&s->ref_min, sh[7][0]);
    atomic_max_d(&s->ref_max, sh[8][0]);
    atomicAdd(&s->unwritten, su[0][0]);
    atomicAdd(&s->nonfinite, su[1][0]);
    atomicAdd(&s->ref_nonfinite, su[2][0]);
    atomicAdd(&s->counted, su[3][0]);
    atomicAdd(&s->fp, su[4][0]);
  }
}
extern "C" __global__ void __launch_bounds__(THREADS) ptxevo_stats_f64(const void* o, const double* r, long long n, unsigned long long p, RawStats* s) { stats_body<0>(o, r, n, p, s); }
extern "C" __global__ void __launch_bounds__(THREADS) ptxevo_stats_f32(const void* o, const double* r, long long n, unsigned long long p, RawStats* s) { stats_body<1>(o, r, n, p, s); }
extern "C" __global__ void __launch_bounds__(THREADS) ptxevo_stats_f16(const void* o, const double* r, long long n, unsigned long long p, RawStats* s) { stats_body<2>(o, r, n, p, s); }
extern "C" __global__ void __launch_bounds__(THREADS) ptxevo_stats_bf16(const void* o, const double* r, long long n, unsigned long long p, RawStats* s) { stats_body<3>(o, r, n, p, s); }

// Position-dependent, order-independent hash of a byte range: 4-byte words, then the tail.
extern "C" __global__ void __launch_bounds__(THREADS) ptxevo_fingerprint(const unsigned char* p, long long bytes, unsigned long long* out) {
  unsigned long long h = 0;
  const long long words = bytes / 4;
  const unsigned int* w = (const unsigned int*)p;
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < words; i += (long long)gridDim.x * THREADS)
    h += mix64((unsigned long long)i * 0x9E3779B97F4A7C15ull ^ w[i]);
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (long long i = words * 4; i < bytes; ++i) h += mix64(0xD1B54A32D192ED03ull ^ ((unsigned long long)i << 8) ^ p[i]);
  __shared__ unsigned long long sh[THREADS];
  sh[threadIdx.x] = h;
  __syncthreads();
  for (int o = THREADS / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, sh[0]);
}

// Holds its SM for `ns` nanoseconds: the gate's later determinism runs start a candidate beside
// a grid of these, so the candidate's CTAs are placed and finish in another order.
extern "C" __global__ void __launch_bounds__(THREADS) ptxevo_occupy(long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < (unsigned long long)ns);
}

extern "C" __global__ void __launch_bounds__(THREADS) ptxevo_fill(void* p, long long n, int elem_bytes, unsigned long long bits) {
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n; i += (long long)gridDim.x * THREADS) {
    if (elem_bytes == 8) ((unsigned long long*)p)[i] = bits;
    else if (elem_bytes == 4) ((unsigned int*)p)[i] = (unsigned int)bits;
    else if (elem_bytes == 2) ((unsigned short*)p)[i] = (unsigned short)bits;
    else ((unsigned char*)p)[i] = (unsigned char)bits;
  }
}
// Gate inputs drawn on the device: the same four distributions as the host's fill_distribution
// (gate.cpp), from a counter-based generator so every element is independent of the launch
// geometry. Used for shapes where drawing and uploading gigabytes on the host would dominate.
__device__ __forceinline__ double unit(unsigned long long seed, long long i, int k) {
  const unsigned long long b = mix64(seed ^ mix64((unsigned long long)i * 4ull + (unsigned long long)k + 0x632BE59BD9B4E019ull));
  return ((double)(b >> 12) + 0.5) * 0x1p-52;  // strictly inside (0, 1)
}
__device__ __forceinline__ double normal01(unsigned long long seed, long long i, int k) {
  return sqrt(-2.0 * log(unit(seed, i, k))) * cospi(2.0 * unit(seed, i, k + 1));
}
extern "C" __global__ void __launch_bounds__(THREADS) ptxevo_random(void* p, long long n, int kind, int dist,
                                                                    unsigned long long seed, double clamp) {
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n; i += (long long)gridDim.x * THREADS) {
    double v;
    if (dist == 0) {
      v = normal01(seed, i, 0);
    } else if (dist == 1) {
      v = -1e3 + 2e3 * unit(seed, i, 0);
    } else if (dist == 2) {
      // At least one spike (element seed % n), as the host fill guarantees.
      const bool forced = i == (long long)(seed % (unsigned long long)n);
      if (forced || unit(seed, i, 0) < 1e-3) v = unit(seed, i, 1) < 0.5 ? -1e2 : 1e2;
      else v = 1e-2 * normal01(seed, i, 2);
    } else {
      const double u = unit(seed, i, 0);
      v = fmin(fmax((2.0 * u - 1.0) / sqrt(2.0 * u * (1.0 - u)), -clamp), clamp);
    }
    if (kind == 0) {
      ((double*)p)[i] = v;
    } else if (kind == 1) {
      ((float*)p)[i] = (float)v;
    } else {
      unsigned short h;
      const float f = (float)v;
      if (kind == 2) asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
      else asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
      ((unsigned short*)p)[i] = h;
    }
  }
}
// Degenerate rows over what ptxevo_random drew (normal): even row 2j of `row_len` elements gets
// kind (kinds >> 4 (j % nkinds)) & 15 (evaluator::DegenerateRow: zero, constant, tiny, denormal,
// largest finite); odd rows stay.
extern "C" __global__ void __launch_bounds__(THREADS) ptxevo_degenerate(void* p, long long n, int kind, long long row_len,
                                                                        unsigned int kinds, int nkinds,
                                                                        unsigned long long seed, double smallest_normal,
                                                                        double largest) {
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n; i += (long long)gridDim.x * THREADS) {
    const long long r = i / row_len;
    if (r & 1) continue;
    const int k = (int)((kinds >> (4 * (int)((r / 2) % nkinds))) & 15u);
    const double u = unit(seed, i, 0), s = unit(seed, i, 1) < 0.5 ? -1.0 : 1.0;
    double v;
    if (k == 0) v = 0.0;
    else if (k == 1) v = (0.5 + 0.25 * (double)(r % 7)) * (((r / 2) & 1) ? -1.0 : 1.0);
    else if (k == 2) v = 1e-30 * normal01(seed, i, 2);
    else if (k == 3) v = s * smallest_normal * (0.05 + 0.9 * u);
    else v = s * largest * (0.5 + 0.5 * u);
    if (kind == 0) {
      ((double*)p)[i] = v;
    } else if (kind == 1) {
      ((float*)p)[i] = (float)v;
    } else {
      unsigned short h;
      const float f = (float)v;
      if (kind == 2) asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
      else asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
      ((unsigned short*)p)[i] = h;
    }
  }
}
)cu";

constexpr unsigned kThreads = 256;

LaunchPlan plan_for(const std::string& entry, const DeviceInfo& info, std::int64_t n, std::vector<KernelArg> args) {
  KernelLaunch l;
  l.entry = entry;
  const std::int64_t want = (n + kThreads - 1) / kThreads;
  const std::int64_t cap = static_cast<std::int64_t>(info.sm_count) * 8;
  l.grid = {static_cast<std::uint32_t>(std::max<std::int64_t>(1, std::min(want, cap))), 1, 1};
  l.block = {kThreads, 1, 1};
  l.args = std::move(args);
  return {{l}};
}

// The largest finite value of a floating dtype: the heavy-tail clamp, as in the host's fill.
double largest_finite(DType t) {
  switch (t) {
    case DType::F16: return 65504.0;
    case DType::BF16: return 3.3895313892515355e38;
    case DType::F32: return static_cast<double>(std::numeric_limits<float>::max());
    default: return std::numeric_limits<double>::max();
  }
}

const char* stats_entry(DType t) {
  switch (t) {
    case DType::F64: return "ptxevo_stats_f64";
    case DType::F32: return "ptxevo_stats_f32";
    case DType::F16: return "ptxevo_stats_f16";
    case DType::BF16: return "ptxevo_stats_bf16";
    default: return nullptr;
  }
}

}  // namespace

const char* device_checks_source() { return kSource; }

bool DeviceChecks::supports(DType t) { return stats_entry(t) != nullptr; }

std::unique_ptr<DeviceChecks> DeviceChecks::create(GpuContext& ctx, std::string* why) {
  Builder builder(nullptr);
  BuildRequest req;
  req.name = "ptxevo_device_checks";
  req.source = kSource;
  req.source_path = "ptxevo_device_checks.cu";
  req.arch = ctx.info().arch();
  const BuildResult b = builder.build(req);
  if (!b.ok) {
    *why = "device checks did not build (" + b.stage + "): " + b.error;
    return nullptr;
  }
  try {
    return std::make_unique<DeviceChecks>(ctx, std::make_unique<GpuModule>(&ctx.api(), b.cubin));
  } catch (const std::exception& e) {
    *why = std::string("device checks did not load: ") + e.what();
    return nullptr;
  }
}

DeviceChecks::DeviceChecks(GpuContext& ctx, std::unique_ptr<GpuModule> m) : ctx_(ctx), module_(std::move(m)) {
  ctx_.check(ctx_.api().cuMemAlloc(&scratch_, sizeof(RawStats)), "cuMemAlloc (device checks)");
  ctx_.check(ctx_.api().cuStreamCreate(&side_stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate (device checks)");
}

DeviceChecks::~DeviceChecks() {
  if (side_stream_) ctx_.api().cuStreamDestroy(side_stream_);
  if (scratch_) ctx_.api().cuMemFree(scratch_);
}

void DeviceChecks::occupy(int ctas, std::int64_t ns) {
  if (ctas <= 0) return;
  LaunchPlan plan;
  KernelLaunch k;
  k.entry = "ptxevo_occupy";
  k.grid = {static_cast<std::uint32_t>(ctas), 1, 1};
  k.block = {256, 1, 1};
  k.args = {static_cast<std::int64_t>(ns)};
  plan.kernels.push_back(k);
  ctx_.launch(*module_, plan, {}, {}, side_stream_);
}

void DeviceChecks::wait_occupied() {
  ctx_.check(ctx_.api().cuStreamSynchronize(side_stream_), "occupying kernel");
}

void DeviceChecks::fill(CUdeviceptr p, DType t, std::int64_t n, std::uint64_t bits) {
  if (n <= 0) return;
  ctx_.launch(*module_,
              plan_for("ptxevo_fill", ctx_.info(), n,
                       {ArgTensor{"p"}, static_cast<std::int64_t>(n), static_cast<std::int32_t>(dtype_size(t)),
                        static_cast<std::int64_t>(bits)}),
              {{"p", p}});
}

OutputStats DeviceChecks::stats(CUdeviceptr out, DType t, CUdeviceptr ref, std::int64_t n, std::uint64_t poison,
                                std::uint64_t* fingerprint) {
  const char* entry = stats_entry(t);
  if (!entry) throw std::invalid_argument("device checks: no statistics kernel for this dtype");
  RawStats init{};
  const double inf = std::numeric_limits<double>::infinity();
  init.out_min = init.ref_min = inf;
  init.out_max = init.ref_max = -inf;
  ctx_.synchronize();
  ctx_.check(ctx_.api().cuMemcpyHtoD(scratch_, &init, sizeof init), "cuMemcpyHtoD (device checks)");
  if (n > 0)
    ctx_.launch(*module_,
                plan_for(entry, ctx_.info(), n,
                         {ArgTensor{"out"}, ArgTensor{"ref"}, static_cast<std::int64_t>(n),
                          static_cast<std::int64_t>(poison), ArgTensor{"stats"}}),
                {{"out", out}, {"ref", ref}, {"stats", scratch_}});
  ctx_.synchronize();
  RawStats r{};
  ctx_.check(ctx_.api().cuMemcpyDtoH(&r, scratch_, sizeof r), "cuMemcpyDtoH (device checks)");
  OutputStats s;
  s.sum_d2 = r.sum_d2;
  s.sum_r2 = r.sum_r2;
  s.sum_o2 = r.sum_o2;
  s.max_d = r.max_d;
  s.max_r = r.max_r;
  s.out_min = r.out_min;
  s.out_max = r.out_max;
  s.ref_min = r.ref_min;
  s.ref_max = r.ref_max;
  s.unwritten = static_cast<std::int64_t>(r.unwritten);
  s.nonfinite = static_cast<std::int64_t>(r.nonfinite);
  s.ref_nonfinite = static_cast<std::int64_t>(r.ref_nonfinite);
  s.counted = static_cast<std::int64_t>(r.counted);
  if (fingerprint) *fingerprint = r.fp;
  return s;
}

void DeviceChecks::random_fill(CUdeviceptr p, DType t, std::int64_t n, Distribution d, std::uint64_t seed) {
  if (n <= 0) return;
  int kind;
  switch (t) {
    case DType::F64: kind = 0; break;
    case DType::F32: kind = 1; break;
    case DType::F16: kind = 2; break;
    case DType::BF16: kind = 3; break;
    default: throw std::invalid_argument(std::string("device inputs: no random fill for dtype ") + to_string(t));
  }
  ctx_.launch(*module_,
              plan_for("ptxevo_random", ctx_.info(), n,
                       {ArgTensor{"p"}, static_cast<std::int64_t>(n), static_cast<std::int32_t>(kind),
                        // Degenerate rows are drawn normal, then overwritten (degenerate_rows()).
                        static_cast<std::int32_t>(d == Distribution::DegenerateRows ? 0 : static_cast<int>(d)),
                        static_cast<std::int64_t>(seed),
                        largest_finite(t)}),
              {{"p", p}});
}

void DeviceChecks::degenerate_rows(CUdeviceptr p, DType t, std::int64_t n, std::int64_t row_len,
                                   const std::vector<DegenerateRow>& kinds, std::uint64_t seed) {
  if (n <= 0 || kinds.empty()) return;
  int kind = 0;
  switch (t) {
    case DType::F64: kind = 0; break;
    case DType::F32: kind = 1; break;
    case DType::F16: kind = 2; break;
    case DType::BF16: kind = 3; break;
    default: throw std::invalid_argument(std::string("device inputs: no degenerate rows for dtype ") + to_string(t));
  }
  std::uint32_t packed = 0;
  for (std::size_t j = 0; j < kinds.size() && j < 8; ++j) packed |= static_cast<std::uint32_t>(kinds[j]) << (4 * j);
  ctx_.launch(*module_,
              plan_for("ptxevo_degenerate", ctx_.info(), n,
                       {ArgTensor{"p"}, static_cast<std::int64_t>(n), static_cast<std::int32_t>(kind),
                        static_cast<std::int64_t>(std::max<std::int64_t>(1, row_len)), static_cast<std::int32_t>(packed),
                        static_cast<std::int32_t>(std::min<std::size_t>(kinds.size(), 8)),
                        static_cast<std::int64_t>(seed ^ 0xDE6E4E2A7Eull), smallest_normal(t), largest_finite(t)}),
              {{"p", p}});
}

std::uint64_t DeviceChecks::fingerprint(CUdeviceptr p, std::size_t bytes) {
  const unsigned long long zero = 0;
  ctx_.synchronize();
  ctx_.check(ctx_.api().cuMemcpyHtoD(scratch_, &zero, sizeof zero), "cuMemcpyHtoD (device checks)");
  if (bytes > 0)
    ctx_.launch(*module_,
                plan_for("ptxevo_fingerprint", ctx_.info(), static_cast<std::int64_t>(bytes / 4 + 1),
                         {ArgTensor{"p"}, static_cast<std::int64_t>(bytes), ArgTensor{"out"}}),
                {{"p", p}, {"out", scratch_}});
  ctx_.synchronize();
  unsigned long long h = 0;
  ctx_.check(ctx_.api().cuMemcpyDtoH(&h, scratch_, sizeof h), "cuMemcpyDtoH (device checks)");
  return h;
}

}  // namespace ptxevo::evaluator
