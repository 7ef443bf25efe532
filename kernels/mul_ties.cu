// Multiplication rounding: ties to even, gradual underflow into subnormals, overflow to inf.
extern "C" __global__ void mul_ties(const float* a, const float* b, float* out)
{
    int i = threadIdx.x;
    out[i] = a[i] * b[i];
}
