// warp_scan: an inclusive prefix sum inside each warp of 32 lanes with __shfl_up_sync.
__global__ void warp_scan(const int* in, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int v = in[i];
    for (int d = 1; d < 32; d <<= 1) {
        int u = __shfl_up_sync(0xffffffff, v, d);
        if (lane >= d) v += u;
    }
    out[i] = v;
}
