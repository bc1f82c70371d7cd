// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: dynamically indexed local arrays (__local_depot, %SP/%SPL, ld/st.local), local structs, per-thread insertion sort, small per-thread histogram, cvta.local, large stack frames.

struct Entry {
  float key;
  int val;
};

extern "C" __global__ void topk_per_thread(const float *__restrict__ scores, int cols, float *__restrict__ out_val,
                                           int *__restrict__ out_idx) {
  const int K = 8;
  Entry best[K];
#pragma unroll
  for (int k = 0; k < K; ++k) best[k] = Entry{-3.0e38f, -1};
  const float *row = scores + (size_t)(blockIdx.x * blockDim.x + threadIdx.x) * cols;
  for (int c = 0; c < cols; ++c) {
    float s = row[c];
    if (s <= best[K - 1].key) continue;
    int p = K - 1;
    while (p > 0 && best[p - 1].key < s) {
      best[p] = best[p - 1];
      --p;
    }
    best[p] = Entry{s, c};
  }
  int base = (blockIdx.x * blockDim.x + threadIdx.x) * K;
  for (int k = 0; k < K; ++k) {
    out_val[base + k] = best[k].key;
    out_idx[base + k] = best[k].val;
  }
}

extern "C" __global__ void local_histogram(const unsigned char *__restrict__ data, int len,
                                           unsigned *__restrict__ hist_out) {
  unsigned h[64];
  for (int b = 0; b < 64; ++b) h[b] = 0;
  const unsigned char *p = data + (size_t)(blockIdx.x * blockDim.x + threadIdx.x) * len;
  for (int i = 0; i < len; ++i) h[p[i] >> 2]++;
  for (int b = 0; b < 64; ++b) atomicAdd(&hist_out[b], h[b]);
}

__device__ __noinline__ float consume_buffer(const float *buf, int n) {
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += buf[i] * (float)(i + 1);
  return s;
}

// Local buffer whose address escapes to a non-inlined call (generic pointer to local).
extern "C" __global__ void escaping_local(const float *__restrict__ in, float *__restrict__ out, int n) {
  float buf[96];
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = 0; i < 96; ++i) buf[i] = in[(t + i) % n];
  buf[t % 96] += 1.0f;
  out[t] = consume_buffer(buf, 96 - (t & 31));
}
