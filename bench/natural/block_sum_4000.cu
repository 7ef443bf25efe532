// Issue 26's second natural-size launch: one 256-thread block sums 4,000 ints through shared memory.
extern "C" __global__ void block_sum(const int* in, int n, int* out) {
    __shared__ int s[256];
    int t = threadIdx.x;
    int acc = 0;
    for (int i = t; i < n; i += blockDim.x) acc += in[i];
    s[t] = acc;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) out[0] = s[0];
}
