// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: #pragma unroll (full, N, 1 = no unrolling; NVRTC has no '#pragma nounroll'), nested loops, do-while, break/continue, loop-carried dependencies, runtime trip counts with remainder loops, 1-D stencil, polynomial evaluation.

template <int K>
__device__ __forceinline__ float dot_unrolled(const float *a, const float *b) {
  float acc = 0.f;
#pragma unroll
  for (int k = 0; k < K; ++k) acc = fmaf(a[k], b[k], acc);
  return acc;
}

extern "C" __global__ void fir_filter(const float *__restrict__ x, const float *__restrict__ taps,
                                      float *__restrict__ y, int n) {
  __shared__ float s_taps[16];
  if (threadIdx.x < 16) s_taps[threadIdx.x] = taps[threadIdx.x];
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i + 16 > n) return;
  float win[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) win[k] = x[i + k];
  y[i] = dot_unrolled<16>(win, s_taps);
}

extern "C" __global__ void partial_unroll(const float *__restrict__ x, float *__restrict__ y, int n, int reps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.f;
#pragma unroll 4
  for (int r = 0; r < reps; ++r) acc = acc * 0.5f + x[(i + r * 37) % n];
  float acc2 = 0.f;
#pragma unroll 1
  for (int r = 0; r < reps; ++r) {
    if (r & 1) continue;
    acc2 += x[(i * 7 + r) % n];
    if (acc2 > 1e6f) break;
  }
  int k = 0;
  float acc3 = 1.f;
#pragma unroll 1
  do {
    acc3 *= 1.0001f;
    ++k;
  } while (acc3 < 1.5f && k < reps);
  if (i < n) y[i] = acc + acc2 + acc3 + (float)k;
}

// 3-point stencil over a 2-D grid, nested loops with fixed inner trip count.
extern "C" __global__ void stencil2d(const float *__restrict__ in, float *__restrict__ out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  if (x < 1 || x >= w - 1) return;
  for (int yy = 1 + blockIdx.y; yy < h - 1; yy += gridDim.y) {
    float s = 0.f;
#pragma unroll
    for (int dy = -1; dy <= 1; ++dy)
#pragma unroll
      for (int dx = -1; dx <= 1; ++dx) s += in[(yy + dy) * w + x + dx] * (dx == 0 && dy == 0 ? 0.5f : 0.0625f);
    out[yy * w + x] = s;
  }
}

// Horner polynomial with compile-time coefficients; while loop with data-dependent exit (Collatz).
__constant__ float c_poly[9] = {1.0f, -0.5f, 0.25f, -0.125f, 0.0625f, -0.03125f, 0.015625f, -0.0078125f, 0.00390625f};

extern "C" __global__ void poly_collatz(const float *__restrict__ x, const unsigned *__restrict__ seeds,
                                        float *__restrict__ out, unsigned *__restrict__ steps, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i], p = c_poly[8];
#pragma unroll
  for (int k = 7; k >= 0; --k) p = fmaf(p, v, c_poly[k]);
  out[i] = p;
  unsigned s = seeds[i] | 1u, cnt = 0;
  while (s != 1u && cnt < 1000u) {
    s = (s & 1u) ? 3u * s + 1u : s >> 1;
    ++cnt;
  }
  steps[i] = cnt;
}
