// Per-thread histogram in a small local array indexed by data (ld.local / st.local through %SPL);
// loops kept rolled with #pragma unroll 1. out[t] = 1000 * (first bin with the largest sum) + that sum.
extern "C" __global__ void local_hist(const int* in, int* out, int n)
{
    int t = threadIdx.x;
    int h[8];
#pragma unroll 1
    for (int k = 0; k < 8; ++k) h[k] = k - t;
#pragma unroll 1
    for (int k = 0; k < n; ++k) {
        int v = in[t * n + k];
        h[v & 7] += v;
    }
    int best = 0;
#pragma unroll 1
    for (int k = 1; k < 8; ++k) if (h[k] > h[best]) best = k;
    out[t] = best * 1000 + h[best];
}
