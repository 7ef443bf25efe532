// Dynamic shared memory (extern __shared__, size from the launch): each block reverses its slice.
extern "C" __global__ void dyn_smem_reverse(const int* in, int* out)
{
    extern __shared__ int s[];
    int t = threadIdx.x;
    int base = blockIdx.x * blockDim.x;
    s[t] = in[base + t];
    __syncthreads();
    out[base + t] = s[blockDim.x - 1 - t] * 10 + t;
}
