// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: switch statements (dense and sparse), brx.idx jump table with .branchtargets in inline asm, selp/predicated execution, ternaries, early exits, goto-style loops, testp/isnan/isinf, setp with unordered comparisons.

__device__ __noinline__ float op_add(float a, float b) { return a + b; }
__device__ __noinline__ float op_mul(float a, float b) { return a * b; }

// Small interpreter: dense switch over opcodes.
extern "C" __global__ void bytecode_vm(const unsigned char *__restrict__ code, int code_len,
                                       const float *__restrict__ inputs, float *__restrict__ out) {
  float stack[8];
  int sp = 0;
  float x = inputs[blockIdx.x * blockDim.x + threadIdx.x];
  for (int pc = 0; pc < code_len; ++pc) {
    unsigned char op = code[pc];
    switch (op) {
      case 0: stack[sp++ & 7] = x; break;
      case 1: stack[sp++ & 7] = 1.0f; break;
      case 2: { float b = stack[--sp & 7], a = stack[--sp & 7]; stack[sp++ & 7] = op_add(a, b); } break;
      case 3: { float b = stack[--sp & 7], a = stack[--sp & 7]; stack[sp++ & 7] = op_mul(a, b); } break;
      case 4: { float b = stack[--sp & 7], a = stack[--sp & 7]; stack[sp++ & 7] = a - b; } break;
      case 5: stack[(sp - 1) & 7] = -stack[(sp - 1) & 7]; break;
      case 6: stack[(sp - 1) & 7] = sqrtf(fabsf(stack[(sp - 1) & 7])); break;
      case 7: stack[(sp - 1) & 7] = __expf(stack[(sp - 1) & 7]); break;
      case 8: { float a = stack[(sp - 1) & 7]; stack[sp++ & 7] = a; } break;
      case 9: --sp; break;
      case 10: stack[(sp - 1) & 7] = fmaxf(stack[(sp - 1) & 7], 0.0f); break;
      case 11: goto done;
      default: break;
    }
  }
done:
  out[blockIdx.x * blockDim.x + threadIdx.x] = sp > 0 ? stack[(sp - 1) & 7] : 0.0f;
}

// Sparse switch (compiles to a comparison tree).
__device__ __forceinline__ int sparse_code(int k) {
  switch (k) {
    case 3: return 1;
    case 17: return 2;
    case 100: return 3;
    case 1000: return 4;
    case -5: return 5;
    case 65536: return 6;
    default: return 0;
  }
}

// Explicit jump table with brx.idx: each case writes a different constant.
__device__ __forceinline__ unsigned jump_table(unsigned idx) {
  unsigned r;
  asm volatile(
      "{\n\t"
      ".reg .pred p;\n\t"
      "setp.gt.u32 p, %1, 3;\n\t"
      "mov.u32 %0, 0xdead;\n\t"
      "@p bra JT_END;\n\t"
      "JT_TARGETS: .branchtargets JT_0, JT_1, JT_2, JT_3;\n\t"
      "brx.idx %1, JT_TARGETS;\n\t"
      "JT_0: mov.u32 %0, 10;\n\t"
      "bra.uni JT_END;\n\t"
      "JT_1: mov.u32 %0, 21;\n\t"
      "bra.uni JT_END;\n\t"
      "JT_2: mov.u32 %0, 32;\n\t"
      "bra.uni JT_END;\n\t"
      "JT_3: mov.u32 %0, 43;\n\t"
      "JT_END:\n\t"
      "}"
      : "=r"(r)
      : "r"(idx));
  return r;
}

extern "C" __global__ void select_predicate(const float *__restrict__ a, const int *__restrict__ k,
                                            float *__restrict__ out, int *__restrict__ codes, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = a[i];
  int key = k[i];
  float r = v > 0.f ? v : 0.01f * v;           // selp / fmax
  r = (key & 1) ? r * 2.f : r;
  r = isnan(v) ? 0.f : r;                      // setp.nan / testp
  r = isinf(v) ? copysignf(1e30f, v) : r;
  r = isfinite(r) ? r : -1.f;
  bool unordered_lt = !(v >= 1.0f);             // setp.ltu
  if (unordered_lt) r += 0.5f;
  int c = sparse_code(key) + (int)jump_table((unsigned)key & 7u) + (int)jump_table((unsigned)(key >> 3) & 3u);
  if (key < 0) c = -c;
  else if (key > 1000) c <<= 2;
  codes[i] = c;
  out[i] = r;
}

// Predicated stores and divergent early return.
extern "C" __global__ void clamp_scatter(const int *__restrict__ idx, const float *__restrict__ val,
                                         float *__restrict__ out, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int j = idx[i];
  if (j < 0 || j >= m) return;
  float v = val[i];
  if (v != v) v = 0.f;
  out[j] = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);
}
