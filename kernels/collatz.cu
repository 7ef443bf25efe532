// Collatz steps: a data-dependent while loop per thread (maximal divergence in trip count).
extern "C" __global__ void collatz(const unsigned int* start, unsigned int* steps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int x = start[i];
    unsigned int n = 0;
    while (x != 1u) {
        if (x & 1u) {
            x = 3u * x + 1u;
        } else {
            x >>= 1;
        }
        ++n;
    }
    steps[i] = n;
}
