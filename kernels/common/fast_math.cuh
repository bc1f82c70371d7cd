// Fast fp32 math and warp primitives through inline PTX, shared by the seed templates: ex2, lg2,
// rcp and rsqrt (approx.ftz), the butterfly shuffle, and a read-only bf16 load widened to fp32.
// A part, not a header: ptxevo expands it where a template includes it
// (evaluator/template_source.hpp), so it has no include guard and defines only functions. A
// kernel-on-host test supplies CPU versions of these names instead (kernels/tests/
// kda_host_emulation.hpp), so a template includes this outside its emulation.

__device__ __forceinline__ float ex2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float lg2(float x) {
  float r;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float rcp(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float rsqrt(float x) {
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float shfl_bfly(float v, int lane_mask) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(lane_mask));
  return r;
}
__device__ __forceinline__ float load_bf16(const __nv_bfloat16* p) {
  unsigned short h;
  asm("ld.global.nc.u16 %0, [%1];" : "=h"(h) : "l"(p));
  return __uint_as_float((unsigned int)h << 16);
}
