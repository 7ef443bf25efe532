// c[i] = a[i] + b[i] over several blocks; threads past n do nothing (c's tail keeps its sentinels).
extern "C" __global__ void vec_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
