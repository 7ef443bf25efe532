// __shfl_sync (idx): broadcast from a data-chosen lane, a rotate, and width-8 segments where the
// source lane is taken modulo the segment.
extern "C" __global__ void shfl_broadcast(const int* in, const int* src, int* out)
{
    int lane = threadIdx.x;
    int v = in[lane];
    out[3 * lane + 0] = __shfl_sync(0xffffffffu, v, src[0]);
    out[3 * lane + 1] = __shfl_sync(0xffffffffu, v, lane + 5);
    out[3 * lane + 2] = __shfl_sync(0xffffffffu, v, src[lane], 8);
}
