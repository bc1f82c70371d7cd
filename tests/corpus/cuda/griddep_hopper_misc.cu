// corpus: archs=sm_90a,sm_100a
// Exercises: programmatic dependent launch (griddepcontrol.wait / launch_dependents, inline and inside __noinline__ functions), %aggr_smem_size / %reserved_smem_* registers, ld.global.nc with L2::256B, fence.proxy.alias, fence.sc.cluster / fence.acq_rel.cluster, redux.sync inside a PDL prologue.

extern "C" __global__ void pdl_producer(const float *__restrict__ x, float *__restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 2.0f + 1.0f;
  // Signal that the dependent kernel may launch; its griddepcontrol.wait still waits for our memory.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

extern "C" __global__ void pdl_consumer(const float *__restrict__ y, const float *__restrict__ bias, float *__restrict__ z,
                                        int n) {
  // Prologue that does not depend on the producer: read bias, compute indices.
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float b = i < n ? __ldg(bias + (i & 255)) : 0.f;
  unsigned cnt = __reduce_add_sync(0xffffffffu, i < n ? 1u : 0u);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (i < n) z[i] = y[i] + b + (float)cnt;
}

// The PDL controls inside non-inlined device functions (as library code often has them).
__device__ __noinline__ void grid_dependency_sync() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __noinline__ void trigger_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

extern "C" __global__ void pdl_via_functions(float *__restrict__ data, int n) {
  grid_dependency_sync();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1.0f;
  trigger_dependents();
}

extern "C" __global__ void hopper_sregs_and_loads(const float4 *__restrict__ x, float4 *__restrict__ y,
                                                  unsigned *__restrict__ info, int n) {
  unsigned aggr, rbeg, rend, rsize;
  asm volatile("mov.u32 %0, %%aggr_smem_size;" : "=r"(aggr));
  asm volatile("mov.u32 %0, %%reserved_smem_offset_begin;" : "=r"(rbeg));
  asm volatile("mov.u32 %0, %%reserved_smem_offset_end;" : "=r"(rend));
  asm volatile("mov.u32 %0, %%reserved_smem_offset_cap;" : "=r"(rsize));
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(x + i));
    y[i] = make_float4(v.w, v.z, v.y, v.x);
  }
  asm volatile("fence.sc.cluster;" ::: "memory");
  asm volatile("fence.proxy.alias;" ::: "memory");
  asm volatile("fence.acq_rel.cluster;" ::: "memory");
  if (i == 0) {
    info[0] = aggr;
    info[1] = rbeg;
    info[2] = rend;
    info[3] = rsize;
  }
}
