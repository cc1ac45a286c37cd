// uniform of 10 float32 (-1.0, 1.0): Philox4x32-10, 4 per counter
#ifndef DG_PHILOX
#define DG_PHILOX
struct dg_words { unsigned int w[4]; };
/* Philox4x32-10 of the counter (c0..c3) under the key (k0, k1) */
__device__ __forceinline__ dg_words dg_philox4x32_10(unsigned int c0, unsigned int c1,
    unsigned int c2, unsigned int c3, unsigned int k0, unsigned int k1) {
  #pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
  }
  dg_words out = {{c0, c1, c2, c3}};
  return out;
}
/* the words of counter number `counter` of the stream `seed` */
__device__ __forceinline__ dg_words dg_philox(unsigned long long counter, unsigned long long seed) {
  return dg_philox4x32_10((unsigned int)counter, (unsigned int)(counter >> 32), 0u, 0u,
                          (unsigned int)seed, (unsigned int)(seed >> 32));
}
#endif
extern "C" __global__ void k(float* __restrict__ b0, const unsigned long long* __restrict__ state)
{
  const unsigned long long seed = state[0], offset = state[1];
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < 3LL; t += (long long)blockDim.x * gridDim.x) {
    const dg_words r = dg_philox(offset + (unsigned long long)t, seed);
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      const long long i = t * 4 + j;
      if (i >= 10LL) break;
      const float u = (float)((r.w[j] >> 8)) * 5.960464477539063e-08f;
      b0[i] = u * 2.0f + (-1.0f);
    }
  }
}
