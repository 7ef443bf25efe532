// each block sums one row of a 2-D matrix with a shared-memory tree reduction
extern "C" __global__ void rowsum(const int* m, int* out, int cols) {
    __shared__ int buf[32];
    int r = blockIdx.x, t = threadIdx.x;
    buf[t] = (t < cols) ? m[r * cols + t] * (t + 1) : 0;
    __syncthreads();
    for (int s = 16; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) out[r] = buf[0];
}
