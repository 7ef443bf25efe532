// Blelloch work-efficient exclusive scan of 64 floats with 32 threads (up-sweep, clear, down-sweep).
extern "C" __global__ void scan_blelloch(const float* in, float* out, float* total)
{
    __shared__ float s[64];
    int t = threadIdx.x;
    const int n = 64;
    s[2 * t] = in[2 * t];
    s[2 * t + 1] = in[2 * t + 1];
    int offset = 1;
    for (int d = n >> 1; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1;
            int bi = offset * (2 * t + 2) - 1;
            s[bi] += s[ai];
        }
        offset <<= 1;
    }
    if (t == 0) {
        total[0] = s[n - 1];
        s[n - 1] = 0.0f;
    }
    for (int d = 1; d < n; d <<= 1) {
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1;
            int bi = offset * (2 * t + 2) - 1;
            float tmp = s[ai];
            s[ai] = s[bi];
            s[bi] += tmp;
        }
    }
    __syncthreads();
    out[2 * t] = s[2 * t];
    out[2 * t + 1] = s[2 * t + 1];
}
