// warpSize reaches PTX as WARP_SZ (an immediate 32 after parsing)
extern "C" __global__ void warpsz(int* out) {
    int t = threadIdx.x;
    out[t] = warpSize * 100 + t % warpSize + t / warpSize;
}
