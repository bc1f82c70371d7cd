// corpus: archs=sm_80,sm_90a opts=-O0,-O2,-O2 -g
// Exercises (LLVM NVPTX): __device__/__constant__ globals with initializers (arrays, structs, pointers to globals -> generic() initializers, strings), addrspace-qualified globals, large byval struct kernel parameters with dynamic indexing, many scalar parameter types, static shared arrays, launch_bounds with min blocks.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))

struct Params {
  float coeffs[32];
  int dims[4];
  double scale;
  char name[8];
};

__constant__ float c_table[8] = {1.0f, 0.5f, 0.25f, 0.125f, 2.0f, 4.0f, 8.0f, 16.0f};
__constant__ Params c_default = {{1.0f, 2.0f, 3.0f}, {4, 3, 2, 1}, 0.5, "llvm"};
__device__ int g_counts[4] = {10, 20, 30, 40};
__device__ int *g_count_ptr = &g_counts[2];
__device__ const char g_name[] = "corpus";
__device__ const char *g_name_ptr = g_name + 2;
__device__ unsigned long long g_big = 0x0123456789abcdefull;
__device__ double g_pi = 3.14159265358979;

extern "C" __global__ void __attribute__((launch_bounds(128, 4))) use_globals(Params p, float *__restrict__ out, char c, short s,
                                                                                long long ll, double d, bool flag) {
  __shared__ float s_tab[128];
  int t = __nvvm_read_ptx_sreg_tid_x();
  s_tab[t] = p.coeffs[t & 31] * c_table[t & 7] + c_default.coeffs[t % 3];
  __syncthreads();
  float v = s_tab[(t + 1) & 127] + (float)p.dims[t & 3] * (float)p.scale + (float)g_counts[t & 3] + (float)*g_count_ptr;
  v += (float)g_name_ptr[t & 3] + (float)p.name[t & 7] + (float)c + (float)s + (float)ll + (float)d + (float)g_pi;
  v += (float)(g_big >> (t & 63));
  out[__nvvm_read_ptx_sreg_ctaid_x() * 128 + t] = flag ? v : -v;
  if (t == 0) __nvvm_atom_add_gen_i(&g_counts[0], 1);
}
