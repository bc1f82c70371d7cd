// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: __constant__ arrays/structs with initializers, __device__ globals with initializers (scalars of every width, arrays, strings, pointers to other globals -> generic(...) and generic(...)+offset), zero-initialised and uninitialised globals, static function-scope __shared__/__device__ variables, const lookup tables.
#include <cuda_fp16.h>

struct Coeffs {
  float scale;
  int shift;
  double bias;
  short tag[3];
  char name[6];
};

__constant__ float c_gauss5[5] = {0.0625f, 0.25f, 0.375f, 0.25f, 0.0625f};
__constant__ int c_offsets[8] = {-3, -2, -1, 0, 1, 2, 3, 4};
__constant__ Coeffs c_coeffs = {1.5f, 3, -0.25, {1, 2, 3}, "coef"};
__constant__ double c_dtab[4] = {1.0, 0.5, 0.25, 0.125};
__constant__ unsigned long long c_masks[2] = {0x5555555555555555ull, 0xaaaaaaaaaaaaaaaaull};
__constant__ float c_runtime_set[64];  // set by the host with cudaMemcpyToSymbol

__device__ int g_counter = 42;
__device__ unsigned char g_bytes[7] = {1, 2, 3, 250, 251, 252, 253};
__device__ short g_shorts[4] = {-1, 2, -3, 4};
__device__ long long g_i64 = -1234567890123ll;
__device__ float g_floats[6] = {1.0f, -2.5f, 3.25e-5f, 1e30f, 0.0f, -0.0f};
__device__ double g_double = 3.141592653589793;
__device__ const char g_message[] = "ptx corpus";
__device__ __half g_half_one = __half_raw{0x3c00};
__device__ float *g_float_ptr = g_floats;
__device__ float *g_float_ptr_mid = &g_floats[3];
__device__ int *g_counter_ptr = &g_counter;
__device__ const char *g_msg_ptrs[2] = {g_message, g_message + 4};
__device__ float g_zeroed[128];
__device__ unsigned g_big_table[256] = {
#define R4(i) (i) * 2654435761u, (i + 1) * 2654435761u, (i + 2) * 2654435761u, (i + 3) * 2654435761u
#define R16(i) R4(i), R4(i + 4), R4(i + 8), R4(i + 12)
    R16(0), R16(16), R16(32), R16(48), R16(64), R16(80), R16(96), R16(112),
    R16(128), R16(144), R16(160), R16(176), R16(192), R16(208), R16(224), R16(240)};
static __device__ int s_file_static = 7;

extern "C" __global__ void blur5_const(const float *__restrict__ in, float *__restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 2 || i >= n - 2) return;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 5; ++k) s += c_gauss5[k] * in[i + c_offsets[k + 1]];
  out[i] = s * c_coeffs.scale + (float)c_coeffs.bias + c_runtime_set[i & 63];
}

extern "C" __global__ void read_globals(float *__restrict__ out, unsigned long long *__restrict__ u, int sel) {
  static __device__ int fn_static_counter = 100;
  __shared__ int s_scratch[32];
  int t = threadIdx.x;
  s_scratch[t & 31] = g_shorts[t & 3] + g_bytes[t % 7] + s_file_static;
  __syncthreads();
  float v = g_float_ptr[t % 6] + g_float_ptr_mid[sel & 1] + (float)g_double + __half2float(g_half_one);
  v += (float)g_message[t % 10] + (float)g_msg_ptrs[sel & 1][t & 3] + c_dtab[t & 3];
  v += (float)(g_big_table[t & 255] >> 24) + g_zeroed[t & 127] + (float)s_scratch[(t + 1) & 31];
  out[blockIdx.x * blockDim.x + t] = v;
  if (t == 0) {
    atomicAdd(g_counter_ptr, 1);
    atomicAdd(&fn_static_counter, 1);
    u[blockIdx.x] = (unsigned long long)g_i64 ^ c_masks[sel & 1] ^ (unsigned long long)c_coeffs.shift ^
                    (unsigned long long)c_coeffs.tag[sel % 3] ^ (unsigned long long)c_coeffs.name[sel & 3];
  }
  if (t < 128) g_zeroed[t] = v;
}
