// Horner evaluation of a degree-7 polynomial in a loop kept rolled (#pragma unroll 1): each step is
// one fma.rn.f32, high coefficient first.
extern "C" __global__ void horner_nounroll(const float* coef, const float* x, float* y, int degree)
{
    int i = threadIdx.x;
    float t = x[i];
    float acc = coef[degree];
#pragma unroll 1
    for (int k = degree - 1; k >= 0; --k) {
        acc = acc * t + coef[k];
    }
    y[i] = acc;
}
