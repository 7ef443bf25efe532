extern "C" __global__ void multi(const int* a, int* out, int n) {
    int i = (blockIdx.x << 6) | threadIdx.x;
    if (i >= n) return;
    int v = a[i];
    int s = 0;
    for (int k = 0; k < (v & 7); k++) s += (v >> k) ^ k;
    out[i] = s + ((threadIdx.x >> 5) << 10) + (blockIdx.x << 17);
}
