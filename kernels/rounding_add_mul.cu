// Directed-rounding intrinsics for add and mul: __fadd_{rn,rz,rd,ru}, __fmul_{rn,rz,rd,ru}.
extern "C" __global__ void rounding_add_mul(const float* a, const float* b, float* out)
{
    int i = threadIdx.x;
    float x = a[i], y = b[i];
    out[8 * i + 0] = __fadd_rn(x, y);
    out[8 * i + 1] = __fadd_rz(x, y);
    out[8 * i + 2] = __fadd_rd(x, y);
    out[8 * i + 3] = __fadd_ru(x, y);
    out[8 * i + 4] = __fmul_rn(x, y);
    out[8 * i + 5] = __fmul_rz(x, y);
    out[8 * i + 6] = __fmul_rd(x, y);
    out[8 * i + 7] = __fmul_ru(x, y);
}
