extern "C" __global__ void bar(int* buf, int* out) {
    int t = threadIdx.x;
    int base = blockIdx.x << 6;
    buf[base + t] = ((t << 3) ^ t) ^ blockIdx.x;
    __syncthreads();
    int v = buf[base + ((t + 1) & 63)];
    __syncthreads();
    buf[base + t] = v + 1;
    __syncthreads();
    out[base + t] = buf[base + ((t + 5) & 63)] + v;
}
