// corpus: archs=sm_80,sm_90a opts=-O0,-O2,-O2 -g
// Exercises (LLVM NVPTX): atomics through __nvvm_atom_* builtins (cta/sys scopes, cas, exch, min/max, inc/dec, f64 add) and C11 __atomic/__scoped_atomic builtins (relaxed/acq_rel/seq_cst RMW orderings, scoped atomics), membar/fence builtins, volatile accesses, shared-memory atomics.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))

extern "C" __global__ void atomic_zoo(int *ip, unsigned *up, long long *lp, float *fp, double *dp) {
  int t = __nvvm_read_ptx_sreg_tid_x();
  __shared__ int s_count;
  if (t == 0) s_count = 0;
  __syncthreads();
  __nvvm_atom_add_gen_i(&s_count, 1);
  int old = __nvvm_atom_xchg_gen_i(ip, t);
  __nvvm_atom_max_gen_i(ip + 1, old);
  __nvvm_atom_min_gen_i(ip + 2, old);
  __nvvm_atom_and_gen_i(ip + 3, ~t);
  __nvvm_atom_or_gen_i(ip + 4, 1 << (t & 31));
  __nvvm_atom_xor_gen_i(ip + 5, t);
  __nvvm_atom_inc_gen_ui(up, 255u);
  __nvvm_atom_dec_gen_ui(up + 1, 255u);
  __nvvm_atom_cas_gen_i(ip + 6, 0, t);
  __nvvm_atom_cta_add_gen_i(ip + 7, 1);
  __nvvm_atom_sys_add_gen_i(ip + 8, 1);
  __nvvm_atom_add_gen_ll(lp, (long long)t);
  __nvvm_atom_cas_gen_ll(lp + 1, 0ll, (long long)t);
  __nvvm_atom_add_gen_f(fp, 1.0f);
  __nvvm_atom_add_gen_d(dp, 0.5);
  __syncthreads();
  if (t == 0) ip[9] = s_count;
}

extern "C" __global__ void c11_atomics(int *flag, int *data, unsigned long long *ctr) {
  int t = __nvvm_read_ptx_sreg_tid_x();
  if (__nvvm_read_ptx_sreg_ctaid_x() == 0) {
    data[t] = t * 3;
    __nvvm_membar_gl();
    // LLVM 19's NVPTX back end cannot select acquire/release atomic loads/stores: use volatile + fences.
    if (t == 0) *(volatile int *)flag = 1;
  } else {
    while (__atomic_load_n(flag, __ATOMIC_RELAXED) == 0) {
    }
    __nvvm_membar_gl();
    data[1024 + t] = data[t];
  }
  __atomic_fetch_add(ctr, 1ull, __ATOMIC_RELAXED);
  __atomic_fetch_max(ctr + 1, (unsigned long long)t, __ATOMIC_SEQ_CST);
  int expected = 0;
  __atomic_compare_exchange_n(flag + 1, &expected, t, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  __scoped_atomic_fetch_add(flag + 2, 1, __ATOMIC_RELAXED, __MEMORY_SCOPE_WRKGRP);
  __scoped_atomic_fetch_add(flag + 3, 1, __ATOMIC_RELAXED, __MEMORY_SCOPE_DEVICE);
  __scoped_atomic_fetch_or(flag + 4, 1 << (t & 31), __ATOMIC_RELEASE, __MEMORY_SCOPE_SYSTEM);
  __nvvm_membar_cta();
  __nvvm_membar_sys();
  volatile int *vp = data + 2048;
  vp[t] = vp[t + 1] + 1;
}
