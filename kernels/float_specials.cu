// IEEE special values through add, sub and mul: signed zeros, subnormals, FLT_MAX overflow,
// inf - inf = NaN, 0 * inf = NaN, NaN propagation (GPU arithmetic returns the canonical NaN 0x7fffffff).
extern "C" __global__ void float_specials(const float* a, const float* b, float* out)
{
    int i = threadIdx.x;
    float x = a[i], y = b[i];
    float p = x * y;
    out[4 * i + 0] = x + y;
    out[4 * i + 1] = x - y;
    out[4 * i + 2] = p;
    out[4 * i + 3] = y - x;
}
