// Directed-rounding division and reciprocal: __fdiv_{rn,rz,rd,ru}, __frcp_{rn,rz,rd,ru}.
extern "C" __global__ void rounding_div_rcp(const float* a, const float* b, float* out)
{
    int i = threadIdx.x;
    float x = a[i], y = b[i];
    out[8 * i + 0] = __fdiv_rn(x, y);
    out[8 * i + 1] = __fdiv_rz(x, y);
    out[8 * i + 2] = __fdiv_rd(x, y);
    out[8 * i + 3] = __fdiv_ru(x, y);
    out[8 * i + 4] = __frcp_rn(y);
    out[8 * i + 5] = __frcp_rz(y);
    out[8 * i + 6] = __frcp_rd(y);
    out[8 * i + 7] = __frcp_ru(y);
}
