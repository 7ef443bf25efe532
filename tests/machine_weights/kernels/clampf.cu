extern "C" __global__ void clampf(const float* x, float* y, float lo, float hi, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fminf(fmaxf(x[i] * 0.5f + 1.0f, lo), hi);
}
