// rsqrtf (approximate rsqrt.approx.f32) elementwise. Expected values are 1/sqrt(x) correctly
// rounded; the launch allows the documented 2 ULP.
extern "C" __global__ void rsqrt_norm(const float* x, float* y)
{
    int i = threadIdx.x;
    y[i] = rsqrtf(x[i]);
}
