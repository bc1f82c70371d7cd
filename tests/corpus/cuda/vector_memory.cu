// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: 128/64-bit vector loads/stores (float4, uint4, int2, double2), __ldg (ld.global.nc), __ldcg/__ldca/__ldcs/__ldlu/__ldcv, __stcg/__stcs/__stwt/__stwb, misaligned tail handling.

extern "C" __global__ void saxpy_vec4(const float *__restrict__ x, float *__restrict__ y, float a, int n) {
  int i4 = blockIdx.x * blockDim.x + threadIdx.x;
  int nvec = n >> 2;
  if (i4 < nvec) {
    float4 xv = __ldg(reinterpret_cast<const float4 *>(x) + i4);
    float4 yv = reinterpret_cast<float4 *>(y)[i4];
    yv.x = fmaf(a, xv.x, yv.x);
    yv.y = fmaf(a, xv.y, yv.y);
    yv.z = fmaf(a, xv.z, yv.z);
    yv.w = fmaf(a, xv.w, yv.w);
    reinterpret_cast<float4 *>(y)[i4] = yv;
  }
  // scalar tail
  int t = (nvec << 2) + i4;
  if (i4 < (n & 3)) y[t] = fmaf(a, __ldg(x + t), y[t]);
}

extern "C" __global__ void copy_u128_hints(const uint4 *__restrict__ src, uint4 *__restrict__ dst,
                                           const uint2 *__restrict__ s2, uint2 *__restrict__ d2, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint4 a = __ldcs(src + i);        // ld.global.cs (evict-first streaming)
  uint4 b = __ldcg(src + n + i);    // ld.global.cg (cache at L2)
  uint4 c = __ldca(src + 2 * n + i);
  uint4 d = __ldlu(src + 3 * n + i);
  uint4 e = __ldcv(src + 4 * n + i);
  uint4 r;
  r.x = a.x ^ b.x ^ c.x ^ d.x ^ e.x;
  r.y = a.y + b.y + c.y + d.y + e.y;
  r.z = a.z | b.z | c.z | d.z | e.z;
  r.w = a.w & b.w & c.w & d.w & e.w;
  __stcs(dst + i, r);
  __stcg(dst + n + i, a);
  __stwt(dst + 2 * n + i, b);
  __stwb(dst + 3 * n + i, c);
  uint2 q = __ldg(s2 + i);
  q.x += q.y;
  d2[i] = q;
}

struct __align__(16) Particle {
  float3 pos;
  float mass;
  float3 vel;
  int id;
};

extern "C" __global__ void integrate_particles(Particle *__restrict__ p, const double2 *__restrict__ forces,
                                               float dt, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Particle q = p[i];
  double2 f = forces[i];
  float inv_m = 1.0f / q.mass;
  q.vel.x += (float)f.x * inv_m * dt;
  q.vel.y += (float)f.y * inv_m * dt;
  q.pos.x += q.vel.x * dt;
  q.pos.y += q.vel.y * dt;
  q.pos.z += q.vel.z * dt;
  p[i] = q;
}

// Byte and short vectors.
extern "C" __global__ void u8_to_f32_vec(const uchar4 *__restrict__ in, float4 *__restrict__ out,
                                         const short2 *__restrict__ s, int2 *__restrict__ o2, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uchar4 v = __ldg(in + i);
  out[i] = make_float4(v.x * (1.f / 255.f), v.y * (1.f / 255.f), v.z * (1.f / 255.f), v.w * (1.f / 255.f));
  short2 w = s[i];
  o2[i] = make_int2(w.x * 3, w.y - w.x);
}
