// Block reduction over 64 threads: shuffle-down sum inside each warp, warp leaders publish to shared
// memory, __syncthreads, then warp 0 combines the two partial sums.
extern "C" __global__ void warp_reduce_2warps(const float* in, float* out, float* partials)
{
    __shared__ float warp_sum[2];
    int t = threadIdx.x;
    float v = in[blockIdx.x * blockDim.x + t];
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    if ((t & 31) == 0) warp_sum[t >> 5] = v;
    __syncthreads();
    if (t == 0) {
        partials[2 * blockIdx.x] = warp_sum[0];
        partials[2 * blockIdx.x + 1] = warp_sum[1];
        out[blockIdx.x] = warp_sum[0] + warp_sum[1];
    }
}
