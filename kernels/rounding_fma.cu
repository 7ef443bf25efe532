// Directed-rounding fused multiply-add: __fmaf_{rn,rz,rd,ru}, plus __fsub_{rn,rz,rd,ru} signed-zero cases.
extern "C" __global__ void rounding_fma(const float* a, const float* b, const float* c, float* out)
{
    int i = threadIdx.x;
    float x = a[i], y = b[i], z = c[i];
    out[8 * i + 0] = __fmaf_rn(x, y, z);
    out[8 * i + 1] = __fmaf_rz(x, y, z);
    out[8 * i + 2] = __fmaf_rd(x, y, z);
    out[8 * i + 3] = __fmaf_ru(x, y, z);
    out[8 * i + 4] = __fsub_rn(x, z);
    out[8 * i + 5] = __fsub_rz(x, z);
    out[8 * i + 6] = __fsub_rd(x, z);
    out[8 * i + 7] = __fsub_ru(x, z);
}
