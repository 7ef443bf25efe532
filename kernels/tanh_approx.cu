// tanhf elementwise (approximate instructions inside). Expected values are tanh(x) correctly
// rounded; the launch allows a small ULP tolerance.
extern "C" __global__ void tanh_approx(const float* x, float* y)
{
    int i = threadIdx.x;
    y[i] = tanhf(x[i]);
}
