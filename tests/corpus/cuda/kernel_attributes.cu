// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: __launch_bounds__ (maxntid / minnctapersm), __maxnreg__ (.maxnreg), many kernels in one module, non-extern-C (mangled) templated kernels, kernels with no params, .reqntid-like fixed block assumptions, __restrict__ and const params, __builtin_assume / __builtin_expect / __assume_aligned.

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2) scale_kernel(T *__restrict__ x, T s, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) x[i] = x[i] * s;
}

template __global__ void scale_kernel<float, 256>(float *, float, int);
template __global__ void scale_kernel<double, 128>(double *, double, int);
template __global__ void scale_kernel<int, 512>(int *, int, int);

extern "C" __global__ void __launch_bounds__(1024) lb_1024(float *x) { x[threadIdx.x] += 1.0f; }

extern "C" __global__ void __launch_bounds__(64, 8) lb_64_8(const float *__restrict__ a, float *__restrict__ b, int n) {
  __builtin_assume(n > 0);
  int i = blockIdx.x * 64 + threadIdx.x;
  if (__builtin_expect(i < n, 1)) b[i] = a[i] * a[i];
}

extern "C" __global__ void __maxnreg__(40) maxnreg_40(const float *__restrict__ a, float *__restrict__ b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) acc[k] = a[(i + k * 97) % n];
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += acc[k] * acc[(k + 3) & 7];
  b[i] = s;
}

extern "C" __global__ void __maxnreg__(128) maxnreg_128(double *__restrict__ d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] = sqrt(d[i]) + 1.0;
}

extern "C" __global__ void no_params() {
  __shared__ int s;
  if (threadIdx.x == 0) s = 0;
  __syncthreads();
  atomicAdd(&s, 1);
}

extern "C" __global__ void aligned_hint(const float *a, float *b, int n) {
  const float *aa = static_cast<const float *>(__builtin_assume_aligned(a, 16));
  float *bb = static_cast<float *>(__builtin_assume_aligned(b, 16));
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i + 3 < n) {
#pragma unroll
    for (int k = 0; k < 4; ++k) bb[i + k] = aa[i + k] + 1.0f;
  }
}

// Uses every dimension of the built-in index registers.
extern "C" __global__ void __launch_bounds__(256) index_3d(int *out) {
  int lin = ((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * (blockDim.x * blockDim.y * blockDim.z) +
            (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  out[lin] = threadIdx.x + 10 * threadIdx.y + 100 * threadIdx.z;
}
