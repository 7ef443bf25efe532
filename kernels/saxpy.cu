// y[i] = alpha * x[i] + y[i]; NVRTC contracts this into one fma.rn.f32 (single rounding).
extern "C" __global__ void saxpy(float alpha, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = alpha * x[i] + y[i];
    }
}
