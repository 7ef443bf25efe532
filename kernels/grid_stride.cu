// Grid-stride loop (uses gridDim.x): out[i] = 3 * i - in[i] for every i < n.
extern "C" __global__ void grid_stride(const int* in, int* out, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        out[i] = 3 * i - in[i];
    }
}
