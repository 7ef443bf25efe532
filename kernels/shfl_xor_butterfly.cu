// Butterfly all-reduce with __shfl_xor_sync: every lane ends with the warp's max and float sum
// (the sum in butterfly order), and a width-4 xor exchange.
extern "C" __global__ void shfl_xor_butterfly(const float* in, float* sum, float* mx, float* sw)
{
    int lane = threadIdx.x;
    float s = in[lane], m = in[lane];
    for (int mask = 16; mask > 0; mask >>= 1) {
        s += __shfl_xor_sync(0xffffffffu, s, mask);
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, mask));
    }
    sum[lane] = s;
    mx[lane] = m;
    sw[lane] = __shfl_xor_sync(0xffffffffu, in[lane], 2, 4);
}
