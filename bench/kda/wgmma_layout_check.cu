// Checks, on the GPU, the wgmma conventions kda_fwd_chunked.cu's MMA = wgmma recurrence relies on
// (its primitives themselves, included from the kernel's source): A in registers in the m16n8k16
// A layout per warp, D in the m16n8k16 accumulator layout per warp and n8 tile, B K-major in
// shared memory in the core-matrix layout `wgl` through `wg_desc` (SBO = 16 x row length, LBO 128)
// with k steps 256 bytes apart. D = A B for A 64 x K, B K x N (K = 32: two k steps), N = 16 and
// 128, against the CPU. Prints the largest error of each; exit status 0 when both are exact to
// fp32 rounding. Build: nvcc -gencode arch=compute_90a,code=sm_90a -o wgmma_layout_check
// bench/kda/wgmma_layout_check.cu
#define FUSED 0
#define CHUNK 16
#define BV 64
#define KSPLIT 1
#define STATE_HI_LO 0
#define MMA wgmma
#include "../../kernels/kda/kda_fwd_chunked.cu"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

constexpr int kK = 32;

template <int N>
__global__ void check_kernel(const unsigned short* a, const unsigned short* b, float* d) {
  using namespace kda_chunked;
  __shared__ __align__(128) unsigned short sb[N * kK];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  // B^T as [N rows][K columns] in the core-matrix layout.
  for (int i = tid; i < N * kK; i += 128) {
    const int n = i / kK, k = i % kK;
    sb[wgl(n, k, kK)] = b[k * N + n];
  }
  fence_proxy_async();
  __syncthreads();
  unsigned int af[kK / 16][4];
  for (int ks = 0; ks < kK / 16; ++ks) {
    auto pair = [&](int r, int k) {
      return (unsigned int)a[r * kK + k] | ((unsigned int)a[r * kK + k + 1] << 16);
    };
    const int r = warp * 16 + g, k = ks * 16 + 2 * t;
    af[ks][0] = pair(r, k);
    af[ks][1] = pair(r + 8, k);
    af[ks][2] = pair(r, k + 8);
    af[ks][3] = pair(r + 8, k + 8);
  }
  float acc[N / 2];
  for (int i = 0; i < N / 2; ++i) {
    acc[i] = 0.f;
    wg_keep(acc[i]);
  }
  const WgDesc desc = wg_desc(smem_addr(sb), kK * 16);
  wg_fence();
  for (int ks = 0; ks < kK / 16; ++ks) {
    if (N == 16) wgmma_n16(acc, af[ks], wg_desc_at(desc, ks * 256));
    else wgmma_n128(acc, af[ks], wg_desc_at(desc, ks * 256));
  }
  wg_commit();
  wg_wait<0>();
  for (int i = 0; i < N / 2; ++i) wg_keep(acc[i]);
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e) d[(warp * 16 + g + (e >> 1) * 8) * N + 8 * j + 2 * t + (e & 1)] = acc[4 * j + e];
}

static unsigned short to_bf16(float x) {
  unsigned int u;
  std::memcpy(&u, &x, 4);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float from_bf16(unsigned short h) {
  unsigned int u = (unsigned int)h << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <int N>
static double run() {
  std::vector<unsigned short> a(64 * kK), b(kK * N);
  srand(N);
  for (auto& x : a) x = to_bf16((float)rand() / RAND_MAX * 2.f - 1.f);
  for (auto& x : b) x = to_bf16((float)rand() / RAND_MAX * 2.f - 1.f);
  unsigned short *da, *db;
  float* dd;
  cudaMalloc(&da, a.size() * 2);
  cudaMalloc(&db, b.size() * 2);
  cudaMalloc(&dd, 64 * N * 4);
  cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice);
  cudaMemset(dd, 0xff, 64 * N * 4);
  check_kernel<N><<<1, 128>>>(da, db, dd);
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::printf("N=%d: %s\n", N, cudaGetErrorString(err));
    return 1e30;
  }
  std::vector<float> d(64 * N);
  cudaMemcpy(d.data(), dd, d.size() * 4, cudaMemcpyDeviceToHost);
  double worst = 0;
  for (int r = 0; r < 64; ++r)
    for (int n = 0; n < N; ++n) {
      double ref = 0;
      for (int k = 0; k < kK; ++k) ref += (double)from_bf16(a[r * kK + k]) * from_bf16(b[k * N + n]);
      const double e = std::fabs(ref - d[r * N + n]);
      worst = std::isnan(e) ? 1e30 : std::max(worst, e);
    }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
  return worst;
}

int main() {
  const double e16 = run<16>(), e128 = run<128>();
  std::printf("wgmma layout check: m64n16k16 x2 max |err| %.3g, m64n128k16 x2 max |err| %.3g\n", e16, e128);
  return e16 < 1e-4 && e128 < 1e-4 ? 0 : 1;
}
