// A program of more than 3,072 machine rows on the 2B shape: eight copies of a body of float
// divisions, square roots and float-to-int64 conversions (inline sequences), in a loop that is not unrolled,
// so every trip runs through all eight 512-row banks of the ROM and jumps back to the first.
#define BODY(C)                                                    \
    acc += a / (acc + (C));                                        \
    acc = sqrtf(acc + a) / (a + 3.0f * (C));                       \
    m = m * 3 + (long long)__float2ll_rn(acc * 1000.0f);         \
    a = a / 1.25f + sqrtf(a + (C));

extern "C" __global__ void rom4k(const float *x, const long long *q, int trips, float *out, long long *qout) {
    int i = threadIdx.x;
    float a = x[i], acc = 0.0f;
    long long m = q[i];
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
        BODY(1.5f)
        BODY(2.0f)
        BODY(4.5f)
        BODY(7.0f)
        BODY(0.25f)
        BODY(9.0f)
        BODY(12.5f)
        BODY(0.75f)
    }
    out[i] = acc;
    qout[i] = m;
}
