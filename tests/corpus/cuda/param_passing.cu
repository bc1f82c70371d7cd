// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: kernel parameter ABI: __grid_constant__ structs (address taken -> cvta.param / generic param pointer), large by-value structs (>1 KiB), arrays in structs indexed dynamically, scalar params of every width (bool, char, short, half, double, long long), vector types, pointer-to-struct params.
#include <cuda_fp16.h>

struct Small {
  int a;
  float b;
};

struct alignas(16) Big {
  float weights[256];
  int dims[4];
  double scale;
  Small pairs[8];
};

struct Geometry {
  int n, c, h, w;
  int stride[4];
  float eps;
};

extern "C" __global__ void big_struct_param(Big p, const float *__restrict__ x, float *__restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  // Dynamic index into a by-value param array: ld.param with register offset or local copy.
  float w = p.weights[i & 255];
  y[i] = x[i] * w * (float)p.scale + (float)p.dims[i & 3] + p.pairs[i & 7].b * (float)p.pairs[(i >> 3) & 7].a;
}

__device__ __noinline__ int volume(const Geometry *g) { return g->n * g->c * g->h * g->w; }

extern "C" __global__ void grid_constant_param(const __grid_constant__ Geometry geo, const __grid_constant__ Big big,
                                               float *__restrict__ out) {
  // Taking the address of a __grid_constant__ param is legal and must not copy it.
  const Geometry *gp = &geo;
  const float *wp = &big.weights[0];
  int v = volume(gp);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < v) out[i] = wp[i & 255] * geo.eps + (float)gp->stride[i & 3];
}

extern "C" __global__ void scalar_zoo(bool flag, char c, unsigned char uc, short s, unsigned short us, __half h,
                                      int i32, unsigned u32, long long i64, unsigned long long u64, float f, double d,
                                      float2 f2, int4 i4, double2 d2, const Small *sp, Small sv, float *__restrict__ out) {
  int t = threadIdx.x;
  double acc = (double)c + uc + s + us + __half2float(h) + i32 + u32 + (double)i64 + (double)u64 + f + d;
  acc += f2.x * f2.y + i4.x + i4.y + i4.z + i4.w + d2.x - d2.y + sp[t].a + sp[t].b + sv.a + sv.b;
  out[blockIdx.x * blockDim.x + t] = flag ? (float)acc : -(float)acc;
}

// Many pointer params (like a fused optimizer step), all __restrict__.
extern "C" __global__ void adam_step(float *__restrict__ p, const float *__restrict__ g, float *__restrict__ m,
                                     float *__restrict__ v, float lr, float beta1, float beta2, float eps,
                                     float weight_decay, float bc1, float bc2, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float gi = g[i] + weight_decay * p[i];
    float mi = beta1 * m[i] + (1.f - beta1) * gi;
    float vi = beta2 * v[i] + (1.f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
  }
}
