// mm: domain [1,8,6,5] reduce (3,); collapsed [8, 6, 5] reduce (2,); gemm 64x64 tiles
extern "C" __global__ void k(const float* __restrict__ b0, const float* __restrict__ b1, float* __restrict__ b2)
{
  __shared__ float sa[16][65];
  __shared__ float sb[16][65];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (long long tile = blockIdx.x; tile < 1LL; tile += gridDim.x) {
    const long long n0 = tile % 1LL * 64;
    const long long m0 = tile / 1LL % 1LL * 64;
    float acc[4][4];
    #pragma unroll
    for (int u = 0; u < 16; ++u) acc[u / 4][u % 4] = 0.0f;
    for (long long k0 = 0; k0 < 5LL; k0 += 16) {
      for (int e1 = threadIdx.x; e1 < 1024; e1 += 256) {
        const long long row2 = m0 + e1 / 16, col3 = k0 + e1 % 16;
        float val4 = 0.0f;
        if (row2 < 8LL && col3 < 5LL) {
          const long long i0 = row2;
          const long long i2 = col3;
          const float v7 = b0[i0 * (5) + i2];
          val4 = v7;
        }
        sa[e1 % 16][e1 / 16] = val4;
      }
      for (int e8 = threadIdx.x; e8 < 1024; e8 += 256) {
        const long long row9 = n0 + e8 % 64, col10 = k0 + e8 / 64;
        float val11 = 0.0f;
        if (row9 < 6LL && col10 < 5LL) {
          const long long i1 = row9;
          const long long i2 = col10;
          const float v14 = b1[i1 + i2 * (6)];
          val11 = v14;
        }
        sb[e8 / 64][e8 % 64] = val11;
      }
      __syncthreads();
      #pragma unroll
      for (int s = 0; s < 16; ++s) {
        float x[4], y[4];
        #pragma unroll
        for (int u = 0; u < 4; ++u) x[u] = sa[s][ty + 16 * u], y[u] = sb[s][tx + 16 * u];
        #pragma unroll
        for (int u = 0; u < 16; ++u) {
          acc[u / 4][u % 4] = acc[u / 4][u % 4] + (x[u / 4] * y[u % 4]);
        }
      }
      __syncthreads();     // the slices are rewritten for the next step
    }
    const long long row15 = m0 + ty + 0, col16 = n0 + tx + 0;
    if (row15 < 8LL && col16 < 6LL) {
      const long long i0 = row15;
      const long long i1 = col16;
      b2[i0 * (6) + i1] = acc[0][0];
    }
    const long long row19 = m0 + ty + 0, col20 = n0 + tx + 16;
    if (row19 < 8LL && col20 < 6LL) {
      const long long i0 = row19;
      const long long i1 = col20;
      b2[i0 * (6) + i1] = acc[0][1];
    }
    const long long row23 = m0 + ty + 0, col24 = n0 + tx + 32;
    if (row23 < 8LL && col24 < 6LL) {
      const long long i0 = row23;
      const long long i1 = col24;
      b2[i0 * (6) + i1] = acc[0][2];
    }
    const long long row27 = m0 + ty + 0, col28 = n0 + tx + 48;
    if (row27 < 8LL && col28 < 6LL) {
      const long long i0 = row27;
      const long long i1 = col28;
      b2[i0 * (6) + i1] = acc[0][3];
    }
    const long long row31 = m0 + ty + 16, col32 = n0 + tx + 0;
    if (row31 < 8LL && col32 < 6LL) {
      const long long i0 = row31;
      const long long i1 = col32;
      b2[i0 * (6) + i1] = acc[1][0];
    }
    const long long row35 = m0 + ty + 16, col36 = n0 + tx + 16;
    if (row35 < 8LL && col36 < 6LL) {
      const long long i0 = row35;
      const long long i1 = col36;
      b2[i0 * (6) + i1] = acc[1][1];
    }
    const long long row39 = m0 + ty + 16, col40 = n0 + tx + 32;
    if (row39 < 8LL && col40 < 6LL) {
      const long long i0 = row39;
      const long long i1 = col40;
      b2[i0 * (6) + i1] = acc[1][2];
    }
    const long long row43 = m0 + ty + 16, col44 = n0 + tx + 48;
    if (row43 < 8LL && col44 < 6LL) {
      const long long i0 = row43;
      const long long i1 = col44;
      b2[i0 * (6) + i1] = acc[1][3];
    }
    const long long row47 = m0 + ty + 32, col48 = n0 + tx + 0;
    if (row47 < 8LL && col48 < 6LL) {
      const long long i0 = row47;
      const long long i1 = col48;
      b2[i0 * (6) + i1] = acc[2][0];
    }
    const long long row51 = m0 + ty + 32, col52 = n0 + tx + 16;
    if (row51 < 8LL && col52 < 6LL) {
      const long long i0 = row51;
      const long long i1 = col52;
      b2[i0 * (6) + i1] = acc[2][1];
    }
    const long long row55 = m0 + ty + 32, col56 = n0 + tx + 32;
    if (row55 < 8LL && col56 < 6LL) {
      const long long i0 = row55;
      const long long i1 = col56;
      b2[i0 * (6) + i1] = acc[2][2];
    }
    const long long row59 = m0 + ty + 32, col60 = n0 + tx + 48;
    if (row59 < 8LL && col60 < 6LL) {
      const long long i0 = row59;
      const long long i1 = col60;
      b2[i0 * (6) + i1] = acc[2][3];
    }
    const long long row63 = m0 + ty + 48, col64 = n0 + tx + 0;
    if (row63 < 8LL && col64 < 6LL) {
      const long long i0 = row63;
      const long long i1 = col64;
      b2[i0 * (6) + i1] = acc[3][0];
    }
    const long long row67 = m0 + ty + 48, col68 = n0 + tx + 16;
    if (row67 < 8LL && col68 < 6LL) {
      const long long i0 = row67;
      const long long i1 = col68;
      b2[i0 * (6) + i1] = acc[3][1];
    }
    const long long row71 = m0 + ty + 48, col72 = n0 + tx + 32;
    if (row71 < 8LL && col72 < 6LL) {
      const long long i0 = row71;
      const long long i1 = col72;
      b2[i0 * (6) + i1] = acc[3][2];
    }
    const long long row75 = m0 + ty + 48, col76 = n0 + tx + 48;
    if (row75 < 8LL && col76 < 6LL) {
      const long long i0 = row75;
      const long long i1 = col76;
      b2[i0 * (6) + i1] = acc[3][3];
    }
  }
}
