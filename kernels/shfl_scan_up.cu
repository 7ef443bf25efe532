// Inclusive warp scan with __shfl_up_sync; also the raw shuffle (lanes below the offset get their own value).
extern "C" __global__ void shfl_scan_up(const int* in, int* scan, int* raw)
{
    int lane = threadIdx.x;
    int v = in[lane];
    raw[lane] = __shfl_up_sync(0xffffffffu, v, 3);
    for (int offset = 1; offset < 32; offset <<= 1) {
        int n = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += n;
    }
    scan[lane] = v;
}
