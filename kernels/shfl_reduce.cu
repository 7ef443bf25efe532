// Warp sum with __shfl_down_sync (offsets 16, 8, 4, 2, 1). Every lane's final value is written:
// lanes whose source lane is past 31 read their own value (PTX clamp), so they add it to itself.
extern "C" __global__ void shfl_reduce(const float* in, float* out)
{
    int lane = threadIdx.x;
    float v = in[lane];
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    out[lane] = v;
}
