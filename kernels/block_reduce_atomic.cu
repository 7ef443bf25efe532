// Multi-block integer sum: each block reduces its 32 values in shared memory, thread 0 adds the
// block's sum to a global total with atomicAdd (integer addition: order-independent) and records it.
extern "C" __global__ void block_reduce_atomic(const int* in, int* partial, int* total)
{
    __shared__ int s[32];
    int t = threadIdx.x;
    s[t] = in[blockIdx.x * 32 + t];
    __syncthreads();
    for (int stride = 16; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) {
        partial[blockIdx.x] = s[0];
        atomicAdd(total, s[0]);
    }
}
