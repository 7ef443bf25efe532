// histogram: count n values into 16 bins with atomicAdd (threads collide on the same bin).
__global__ void histogram(const unsigned int* data, unsigned int* bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = gridDim.x * blockDim.x;
    for (; i < n; i += stride) atomicAdd(&bins[data[i] & 15u], 1u);
}
