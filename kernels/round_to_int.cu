// Float-to-integral-float rounding: rintf (ties to even), floorf, ceilf, truncf, roundf (ties away).
extern "C" __global__ void round_to_int(const float* a, float* out)
{
    int i = threadIdx.x;
    float x = a[i];
    out[5 * i + 0] = rintf(x);
    out[5 * i + 1] = floorf(x);
    out[5 * i + 2] = ceilf(x);
    out[5 * i + 3] = truncf(x);
    out[5 * i + 4] = roundf(x);
}
