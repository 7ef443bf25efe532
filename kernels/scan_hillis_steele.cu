// Hillis-Steele inclusive scan of 64 floats in one block, double-buffered in shared memory:
// at step d, x[t] = x[t - d] + x[t] (t >= d).
extern "C" __global__ void scan_hillis_steele(const float* in, float* out)
{
    __shared__ float buf[2][64];
    int t = threadIdx.x;
    int cur = 0;
    buf[0][t] = in[t];
    __syncthreads();
    for (int d = 1; d < 64; d <<= 1) {
        float v = buf[cur][t];
        if (t >= d) {
            v = buf[cur][t - d] + v;
        }
        buf[1 - cur][t] = v;
        cur = 1 - cur;
        __syncthreads();
    }
    out[t] = buf[cur][t];
}
