// 32-bit integer edge values: wraparound add/sub/mul, negation, abs(INT_MIN) = INT_MIN,
// signed and unsigned min/max.
extern "C" __global__ void int_edges(const int* a, const int* b, int* out, unsigned int* uout)
{
    int i = threadIdx.x;
    int x = a[i], y = b[i];
    out[7 * i + 0] = (int)((unsigned int)x + (unsigned int)y);
    out[7 * i + 1] = (int)((unsigned int)x - (unsigned int)y);
    out[7 * i + 2] = (int)((unsigned int)x * (unsigned int)y);
    out[7 * i + 3] = (int)(0u - (unsigned int)x);
    out[7 * i + 4] = abs(x);
    out[7 * i + 5] = max(x, y);
    out[7 * i + 6] = min(x, y);
    uout[2 * i + 0] = max((unsigned int)x, (unsigned int)y);
    uout[2 * i + 1] = min((unsigned int)x, (unsigned int)y) ^ (unsigned int)(x < 0);
}
