// sum: domain [3000] reduce (0,); collapsed [3000] reduce (0,); a block per kept index
extern "C" __global__ void k(const float* __restrict__ b0, float* __restrict__ b1)
{
  __shared__ float shared0[32];
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (long long t = blockIdx.x; t < 1LL; t += gridDim.x) {
    float r1 = 0.0f;
    for (long long e2 = threadIdx.x; e2 < 3000LL; e2 += blockDim.x) {
      const long long i0 = e2;
      const float v4 = b0[i0];
      r1 = r1 + v4;
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float o5 = __shfl_down_sync(0xffffffffu, r1, offset);
      r1 = r1 + o5;
    }
    if (lane == 0) shared0[warp] = r1;
    __syncthreads();
    if (warp == 0) {
      r1 = lane < (blockDim.x >> 5) ? shared0[lane] : 0.0f;
      for (int offset = 16; offset > 0; offset >>= 1) {
        const float o6 = __shfl_down_sync(0xffffffffu, r1, offset);
        r1 = r1 + o6;
      }
      if (lane == 0) shared0[0] = r1;
    }
    __syncthreads();
    r1 = shared0[0];
    __syncthreads();     // the slots are rewritten for the next kept index
    if (threadIdx.x == 0) {
      b1[0] = r1;
    }
  }
}
