// sinf / cosf: no approximate instructions, but not correctly rounded (CUDA documents 2 ulp); large
// arguments take the Payne-Hanek reduction (a local array, mad.wide.u32 and a few f64 instructions).
// Expected values are sin(x) and cos(x) correctly rounded; the launch allows 2 ULP.
extern "C" __global__ void sin_cos(const float* x, float* s, float* c)
{
    int i = threadIdx.x;
    s[i] = sinf(x[i]);
    c[i] = cosf(x[i]);
}
