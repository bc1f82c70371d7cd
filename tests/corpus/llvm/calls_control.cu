// corpus: archs=sm_80,sm_90a opts=-O0,-O2,-O2 -g
// Exercises (LLVM NVPTX): noinline device functions (.func, call, .param with struct/array/vector args and returns), recursion, function pointers (prototype-based indirect calls), dense switch lowered to a jump table (brx.idx), dynamically indexed local arrays (__local_depot), select/predication.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __noinline__ __attribute__((noinline))

struct Pair {
  float a;
  int b;
};
struct Big {
  double d[6];
  int tag;
};
typedef float float2v __attribute__((ext_vector_type(2)));

__device__ __noinline__ Pair make_pair(float a, int b) { return Pair{a * 2.0f, b + 1}; }
__device__ __noinline__ double sum_big(Big b) {
  double s = 0;
  for (int i = 0; i < 6; ++i) s += b.d[i];
  return s + b.tag;
}
__device__ __noinline__ float2v swap2(float2v v) { return float2v{v.y, v.x}; }
__device__ __noinline__ int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }

typedef int (*binop)(int, int);
__device__ __noinline__ int op_add(int a, int b) { return a + b; }
__device__ __noinline__ int op_sub(int a, int b) { return a - b; }
__device__ __noinline__ int op_xor(int a, int b) { return a ^ b; }
__device__ binop g_ops[3] = {op_add, op_sub, op_xor};

__device__ __noinline__ int classify(int k) {
  switch (k) {
    case 0: return 17;
    case 1: return gcd(k, 9) * 5;
    case 2: return op_add(k, 4);
    case 3: return op_sub(k, 11);
    case 4: return 3 * k + 1;
    case 5: return k << 4;
    case 6: return gcd(48, k * 3);
    case 7: return op_xor(k, 0x55);
    case 8: return -k;
    case 9: return k * k * k;
    default: return 0;
  }
}

extern "C" __global__ void calls_and_switch(const int *__restrict__ in, float *__restrict__ fout, int *__restrict__ iout,
                                            double *__restrict__ dout, int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
  if (i >= n) return;
  int v = in[i];
  Pair p = make_pair((float)v, v);
  Big b = {{1.0 * v, 2.0, 3.0, 4.0, 5.0, 6.0}, v & 7};
  float2v s = swap2(float2v{p.a, (float)p.b});
  binop f = g_ops[(unsigned)v % 3u];
  int r = f(v, i) + classify(v & 15) + gcd(v | 1, 36);
  // local array indexed by data -> local memory
  int hist[16];
  for (int k = 0; k < 16; ++k) hist[k] = k * v;
  r += hist[(v >> 4) & 15];
  fout[i] = s.x - s.y;
  iout[i] = r > 100 ? r - 100 : r;
  dout[i] = sum_big(b);
}
