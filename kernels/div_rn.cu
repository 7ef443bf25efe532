// IEEE division (div.rn.f32): correctly rounded quotients, subnormal ties, x/0, 0/0, inf/inf.
extern "C" __global__ void div_rn(const float* a, const float* b, float* out)
{
    int i = threadIdx.x;
    out[i] = a[i] / b[i];
}
