extern "C" __global__ void vadd(const int* a, const int* b, int* out, int n) {
    int i = threadIdx.x;
    if (i < n) out[i] = (a[i] + b[i]) ^ (i << 3);
}
