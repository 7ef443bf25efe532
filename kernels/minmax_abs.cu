// fminf / fmaxf (a single NaN operand is ignored, -0 < +0) on a, b; fabsf, negation and copysignf
// on c, d (kept free of NaN: PTX leaves the NaN produced by abs/neg unspecified).
extern "C" __global__ void minmax_abs(const float* a, const float* b, const float* c, const float* d,
                                      float* out)
{
    int i = threadIdx.x;
    float x = a[i], y = b[i];
    out[5 * i + 0] = fminf(x, y);
    out[5 * i + 1] = fmaxf(x, y);
    out[5 * i + 2] = fabsf(c[i]);
    out[5 * i + 3] = -d[i];
    out[5 * i + 4] = copysignf(c[i], d[i]);
}
