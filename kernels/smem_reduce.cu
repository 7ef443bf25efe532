// Shared-memory tree reduction over a 64-thread block (two warps, __syncthreads between levels):
// s[t] += s[t + stride] for stride = 32, 16, ..., 1; one partial sum per block.
extern "C" __global__ void smem_reduce(const float* in, float* out)
{
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) {
            s[t] += s[t + stride];
        }
        __syncthreads();
    }
    if (t == 0) {
        out[blockIdx.x] = s[0];
    }
}
