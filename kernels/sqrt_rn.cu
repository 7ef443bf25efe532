// Square roots: sqrtf is sqrt.rn.f32 (exact squares, subnormals, -0, +inf, negative -> NaN);
// __fsqrt_rz/_rd/_ru round as named; 1.0f / x is rcp.rn.f32.
extern "C" __global__ void sqrt_rn(const float* a, float* root, float* directed, float* recip)
{
    int i = threadIdx.x;
    float x = a[i];
    root[i] = sqrtf(x);
    directed[3 * i + 0] = __fsqrt_rz(x);
    directed[3 * i + 1] = __fsqrt_rd(x);
    directed[3 * i + 2] = __fsqrt_ru(x);
    recip[i] = 1.0f / x;
}
