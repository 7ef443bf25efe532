// A __noinline__ device function called from divergent code (NVRTC emits a .func and call).
__device__ __noinline__ int poly(int x, int k)
{
    int acc = 1;
    for (int j = 0; j < k; ++j) {
        acc = acc * x + j;
    }
    return acc;
}

extern "C" __global__ void device_call(const int* in, int* out)
{
    int i = threadIdx.x;
    int v = in[i];
    if (v & 1) {
        out[i] = poly(v, 3);
    } else {
        out[i] = poly(v + 1, 2) - 1;
    }
}
