// Reads one element past the end of x in the last thread of the second block (guarded store).
extern "C" __global__ void oob_load(const int* x, int* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i + 1];
    if (i < n) y[i] = v + 1;
}
