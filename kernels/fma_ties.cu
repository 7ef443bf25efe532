// fmaf rounds once: cases where a double-precision a*b+c would double-round, exact cancellation,
// subnormal results and signed zeros.
extern "C" __global__ void fma_ties(const float* a, const float* b, const float* c, float* out)
{
    int i = threadIdx.x;
    out[i] = fmaf(a[i], b[i], c[i]);
}
