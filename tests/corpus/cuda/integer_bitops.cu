// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: integer ops: mul.hi/mul.wide/mad.wide, __mul24/__umul24, __sad, bfe/bfi (asm), popc, clz, brev, ffs, __byte_perm (prmt), funnel shifts (shf), dp4a/dp2a, SIMD video __vabsdiffu4/__vadd2, div/rem 32/64-bit, bmsk/szext (asm), 128-bit multiply via mul.lo/hi.u64.

__device__ __forceinline__ unsigned bfe_u32(unsigned v, unsigned pos, unsigned len) {
  unsigned r;
  asm("bfe.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(v), "r"(pos), "r"(len));
  return r;
}
__device__ __forceinline__ int bfe_s32(int v, unsigned pos, unsigned len) {
  int r;
  asm("bfe.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(v), "r"(pos), "r"(len));
  return r;
}
__device__ __forceinline__ unsigned bfi_b32(unsigned ins, unsigned base, unsigned pos, unsigned len) {
  unsigned r;
  asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(ins), "r"(base), "r"(pos), "r"(len));
  return r;
}
__device__ __forceinline__ unsigned long long bfe_u64(unsigned long long v, unsigned pos, unsigned len) {
  unsigned long long r;
  asm("bfe.u64 %0, %1, %2, %3;" : "=l"(r) : "l"(v), "r"(pos), "r"(len));
  return r;
}

extern "C" __global__ void int_ops(const int *__restrict__ a, const int *__restrict__ b,
                                   unsigned *__restrict__ out, long long *__restrict__ wide, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int x = a[i], y = b[i];
  unsigned ux = (unsigned)x, uy = (unsigned)y;
  unsigned r = (unsigned)__mulhi(x, y) ^ __umulhi(ux, uy) ^ (unsigned)__mul24(x, y) ^ __umul24(ux, uy);
  r += __sad(x, y, 7u) + __usad(ux, uy, 3u);
  r += __popc(ux) + __clz(x) + __ffs(x) + __brev(ux);
  r ^= __byte_perm(ux, uy, 0x5140) ^ __byte_perm(ux, uy, 0x3210 + (i & 0x7));
  r += __funnelshift_l(ux, uy, i & 31) ^ __funnelshift_r(ux, uy, (i >> 5) & 31) ^ __funnelshift_lc(ux, uy, 40) ^
       __funnelshift_rc(ux, uy, 7);
  r += bfe_u32(ux, 4, 8) + (unsigned)bfe_s32(x, i & 15, 5) + bfi_b32(uy, ux, 8, 12);
  r += (unsigned)__dp4a(x, y, 17) + __dp2a_lo(ux, uy, 3u) + (unsigned)__dp2a_hi(x, y, -4);
  r += __vabsdiffu4(ux, uy) + __vadd2(ux, uy) + __vmaxs4(ux, uy) + __vsetgtu2(ux, uy) + __vsub4(ux, uy);
  r += (unsigned)(x / (y | 1)) + (unsigned)(x % (y | 1)) + ux / 13u + ux % 10u;
  out[i] = r;
  long long w = (long long)x * (long long)y + (long long)i;          // mad.wide.s32
  unsigned long long uw = (unsigned long long)ux * uy;               // mul.wide.u32
  unsigned long long h = __umul64hi(uw, (unsigned long long)w);      // mul.hi.u64
  long long sh = __mul64hi(w, -3ll);
  w += (long long)(uw ^ h) + sh + __popcll(uw) + __clzll(w) + __ffsll(w) + (long long)__brevll(uw);
  w += (long long)bfe_u64(uw, 12, 20) + w / (long long)(y | 1) + (long long)(uw % 1000003ull);
  wide[i] = w;
}

extern "C" __global__ void bit_tricks(const unsigned *__restrict__ in, unsigned *__restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = in[i];
  unsigned m, s, z;
  asm("bmsk.clamp.b32 %0, %1, %2;" : "=r"(m) : "r"(v & 31), "r"((v >> 8) & 63));
  asm("szext.wrap.s32 %0, %1, %2;" : "=r"(s) : "r"(v), "r"(v >> 27));
  asm("szext.clamp.u32 %0, %1, %2;" : "=r"(z) : "r"(v), "r"(12u));
  unsigned fns;
  asm("fns.b32 %0, %1, %2, %3;" : "=r"(fns) : "r"(v), "r"(0u), "r"(3));
  unsigned lop;
  asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(lop) : "r"(v), "r"(m), "r"(s));
  unsigned prmt;
  asm("prmt.b32.f4e %0, %1, %2, %3;" : "=r"(prmt) : "r"(v), "r"(m), "r"(i));
  unsigned long long u = ((unsigned long long)v << 32) | m;
  // rotate, byte swap, Morton interleave
  u = (u << 17) | (u >> 47);
  unsigned bs = __byte_perm(v, 0, 0x0123);
  unsigned mort = v & 0xffff;
  mort = (mort | (mort << 8)) & 0x00ff00ffu;
  mort = (mort | (mort << 4)) & 0x0f0f0f0fu;
  mort = (mort | (mort << 2)) & 0x33333333u;
  mort = (mort | (mort << 1)) & 0x55555555u;
  out[i] = m ^ s ^ z ^ fns ^ lop ^ prmt ^ (unsigned)u ^ (unsigned)(u >> 32) ^ bs ^ mort;
}

// 8/16-bit integer types and saturating arithmetic.
extern "C" __global__ void small_ints(const signed char *__restrict__ a, const unsigned short *__restrict__ b,
                                      short *__restrict__ out, unsigned char *__restrict__ o8, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  signed char x = a[i];
  unsigned short y = b[i];
  int s = x * (int)y;
  s = s > 32767 ? 32767 : (s < -32768 ? -32768 : s);
  out[i] = (short)s;
  int add_sat;
  asm("add.sat.s32 %0, %1, %2;" : "=r"(add_sat) : "r"((int)x << 24), "r"((int)y << 16));
  o8[i] = (unsigned char)(add_sat >> 24) + (unsigned char)__usad((unsigned)x, y, 0);
}
