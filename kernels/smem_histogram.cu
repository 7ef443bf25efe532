// Two-level histogram: shared-memory atomicAdd per block into 16 bins, then one global atomicAdd per
// bin and block (integer counts: order-independent).
extern "C" __global__ void smem_histogram(const unsigned int* data, unsigned int* hist)
{
    __shared__ unsigned int bins[16];
    int t = threadIdx.x;
    if (t < 16) bins[t] = 0;
    __syncthreads();
    unsigned int v = data[blockIdx.x * blockDim.x + t];
    atomicAdd(&bins[v % 16u], 1u);
    __syncthreads();
    if (t < 16) atomicAdd(&hist[t], bins[t]);
}
