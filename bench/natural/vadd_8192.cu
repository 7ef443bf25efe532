// Issue 26's first natural-size launch: a float vector add over 8,192 elements, 32 blocks of 256.
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
