// Global histogram with contention: 2 blocks x 64 threads atomicAdd into 8 bins chosen by value.
extern "C" __global__ void histogram(const int* data, int* bins, int nbins)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = data[i];
    int b = v % nbins;
    if (b < 0) b += nbins;
    atomicAdd(&bins[b], 1);
}
