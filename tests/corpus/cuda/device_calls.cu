// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: __noinline__ device functions (.func, call.uni, .param args/returns incl. structs and vectors), recursion, function pointers (indirect call with .callprototype), extern "C" device functions, multiple return paths.

struct Vec3 {
  float x, y, z;
};
struct Ray {
  Vec3 o, d;
  float tmax;
  int id;
};
struct Hit {
  float t;
  int prim;
  Vec3 n;
};

__device__ __noinline__ Vec3 cross3(Vec3 a, Vec3 b) {
  return Vec3{a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}

__device__ __noinline__ float dot3(const Vec3 &a, const Vec3 &b) { return a.x * b.x + a.y * b.y + a.z * b.z; }

__device__ __noinline__ Hit intersect_sphere(Ray r, Vec3 c, float rad, int prim) {
  Vec3 oc{r.o.x - c.x, r.o.y - c.y, r.o.z - c.z};
  float b = dot3(oc, r.d);
  float cc = dot3(oc, oc) - rad * rad;
  float disc = b * b - cc;
  Hit h{r.tmax, -1, Vec3{0.f, 0.f, 0.f}};
  if (disc < 0.f) return h;
  float t = -b - sqrtf(disc);
  if (t <= 0.f || t >= r.tmax) return h;
  h.t = t;
  h.prim = prim;
  h.n = Vec3{(r.o.x + t * r.d.x - c.x) / rad, (r.o.y + t * r.d.y - c.y) / rad, (r.o.z + t * r.d.z - c.z) / rad};
  return h;
}

// Recursion.
__device__ __noinline__ unsigned long long fib(unsigned n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__device__ __noinline__ int ackermann_bounded(int m, int n, int depth) {
  if (depth > 64) return -1;
  if (m == 0) return n + 1;
  if (n == 0) return ackermann_bounded(m - 1, 1, depth + 1);
  return ackermann_bounded(m - 1, ackermann_bounded(m, n - 1, depth + 1), depth + 1);
}

// Function pointer table (indirect calls).
typedef float (*unary_fn)(float);
__device__ __noinline__ float f_square(float x) { return x * x; }
__device__ __noinline__ float f_half(float x) { return 0.5f * x; }
__device__ __noinline__ float f_neg(float x) { return -x; }
__device__ unary_fn g_fn_table[3] = {f_square, f_half, f_neg};

extern "C" __device__ __noinline__ float4 scale_vec4(float4 v, float s) {
  return make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
}

extern "C" __global__ void trace_spheres(const Ray *__restrict__ rays, const float4 *__restrict__ spheres, int nspheres,
                                         Hit *__restrict__ hits, int nrays) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nrays) return;
  Ray r = rays[i];
  Hit best{r.tmax, -1, Vec3{0.f, 0.f, 0.f}};
  for (int s = 0; s < nspheres; ++s) {
    float4 sp = spheres[s];
    Hit h = intersect_sphere(r, Vec3{sp.x, sp.y, sp.z}, sp.w, s);
    if (h.prim >= 0 && h.t < best.t) best = h;
  }
  best.n = cross3(best.n, r.d);
  hits[i] = best;
}

extern "C" __global__ void call_variety(const float *__restrict__ x, const int *__restrict__ sel, float *__restrict__ out,
                                        unsigned long long *__restrict__ fibs, int *__restrict__ ack, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unary_fn f = g_fn_table[sel[i] % 3];
  float v = f(x[i]);
  float4 q = scale_vec4(make_float4(v, v + 1.f, v + 2.f, v + 3.f), 0.25f);
  out[i] = q.x + q.y + q.z + q.w;
  fibs[i] = fib(i & 15);
  ack[i] = ackermann_bounded(i & 1, i & 3, 0);
}
